#!/usr/bin/env python3
"""Golden data for frank's FP8-block / FP4 CPU kernels (src/frank/cpu/quant/), made with
numpy + ml_dtypes, independently of the C++ decoders.

Writes into --out (default tests/fixtures/quant):

    values.json        every e4m3fn byte, e2m1fn nibble and e8m0fnu byte as ml_dtypes decodes
                       it (NaN as null)
    gemv.safetensors   random matrices in DeepSeek-V4's two weight formats, inputs x and
                       y = dequant(W) @ x computed in float64 (see README.md)

Usage:  python tools/reference/make_quant_fixtures.py --out tests/fixtures/quant
"""

from __future__ import annotations

import argparse
import json
import math
import os

import ml_dtypes
import numpy as np

SEED = 20261129
E4M3_NAN_BYTES = (0x7F, 0xFF)

# name, rows, cols, block: partial last blocks in both dimensions, and cols that are not a
# multiple of the SIMD width (300 % 32 = 12, 50 % 16 = 2) so the kernels' tails are covered.
FP8_CASES = [("fp8_b128_200x300", 200, 300, 128), ("fp8_b32_70x96", 70, 96, 32),
             ("fp8_b32_33x50", 33, 50, 32)]
FP4_CASES = [("fp4_64x96", 64, 96), ("fp4_40x256", 40, 256)]
TOKEN_COUNTS = (1, 3, 8)


def decode(byte_values: np.ndarray, dtype) -> np.ndarray:
    return byte_values.astype(np.uint8).view(dtype).astype(np.float64)


def as_json_list(values: np.ndarray) -> list:
    return [None if math.isnan(v) else float(v) for v in values]


def value_tables() -> dict:
    all_bytes = np.arange(256, dtype=np.uint8)
    return {
        "ml_dtypes_version": ml_dtypes.__version__,
        "e4m3fn": as_json_list(decode(all_bytes, ml_dtypes.float8_e4m3fn)),
        "e2m1fn": as_json_list(decode(np.arange(16, dtype=np.uint8), ml_dtypes.float4_e2m1fn)),
        "e8m0fnu": as_json_list(decode(all_bytes, ml_dtypes.float8_e8m0fnu)),
    }


def random_scales(rng, shape) -> np.ndarray:
    # 2^-9 .. 2^7: a spread of binades without overflow.
    return rng.integers(118, 135, size=shape, dtype=np.uint8)


def fp8_case(rng, rows, cols, block):
    allowed = np.array([b for b in range(256) if b not in E4M3_NAN_BYTES], dtype=np.uint8)
    weight = rng.choice(allowed, size=(rows, cols))
    scales = random_scales(rng, (-(-rows // block), -(-cols // block)))
    scale_full = np.repeat(np.repeat(decode(scales, ml_dtypes.float8_e8m0fnu), block, 0), block, 1)
    w = decode(weight, ml_dtypes.float8_e4m3fn) * scale_full[:rows, :cols]
    return {"weight": weight, "scales": scales}, w


def fp4_case(rng, rows, cols):
    nibbles = rng.integers(0, 16, size=(rows, cols), dtype=np.uint8)
    packed = (nibbles[:, 0::2] | (nibbles[:, 1::2] << 4)).astype(np.uint8)  # element 2k low
    scales = random_scales(rng, (rows, cols // 32))
    w = decode(nibbles, ml_dtypes.float4_e2m1fn) * np.repeat(decode(scales, ml_dtypes.float8_e8m0fnu), 32, 1)
    return {"packed": packed, "scales": scales}, w


def add_inputs_and_outputs(rng, name, w, tensors):
    for n in TOKEN_COUNTS:
        x = rng.standard_normal((n, w.shape[1])).astype(np.float32)
        x64 = x.astype(np.float64)
        tensors[f"{name}.x{n}"] = x
        tensors[f"{name}.y{n}"] = x64 @ w.T                  # exact inputs, float64 math
        tensors[f"{name}.yabs{n}"] = np.abs(x64) @ np.abs(w).T  # sum_j |W_ij x_j|, for error bounds


def gemv_tensors():
    rng = np.random.default_rng(SEED)
    tensors, metadata = {}, {}
    for name, rows, cols, block in FP8_CASES:
        parts, w = fp8_case(rng, rows, cols, block)
        tensors.update({f"{name}.{k}": v for k, v in parts.items()})
        metadata[f"{name}.block"] = str(block)
        add_inputs_and_outputs(rng, name, w, tensors)
    for name, rows, cols in FP4_CASES:
        parts, w = fp4_case(rng, rows, cols)
        tensors.update({f"{name}.{k}": v for k, v in parts.items()})
        add_inputs_and_outputs(rng, name, w, tensors)
    metadata.update({
        "fp8_cases": ",".join(c[0] for c in FP8_CASES), "fp4_cases": ",".join(c[0] for c in FP4_CASES),
        "token_counts": ",".join(map(str, TOKEN_COUNTS)), "seed": str(SEED),
        "numpy_version": np.__version__, "ml_dtypes_version": ml_dtypes.__version__,
    })
    return tensors, metadata


SAFETENSORS_DTYPES = {np.dtype(np.uint8): "U8", np.dtype(np.float32): "F32", np.dtype(np.float64): "F64"}


def save_safetensors(path, tensors, metadata) -> None:
    """The safetensors layout, written here with sorted keys so that reruns are byte-identical
    (the safetensors package orders __metadata__ by a hash map)."""
    header, offset = {"__metadata__": dict(sorted(metadata.items()))}, 0
    for name in sorted(tensors):
        t = np.ascontiguousarray(tensors[name])
        header[name] = {"dtype": SAFETENSORS_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    header_bytes = json.dumps(header, separators=(",", ":")).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)
    with open(path, "wb") as f:
        f.write(len(header_bytes).to_bytes(8, "little") + header_bytes)
        for name in sorted(tensors):
            f.write(np.ascontiguousarray(tensors[name]).astype(tensors[name].dtype.newbyteorder("<")).tobytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="tests/fixtures/quant")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "values.json"), "w") as f:
        json.dump(value_tables(), f, indent=1)
        f.write("\n")
    tensors, metadata = gemv_tensors()
    save_safetensors(os.path.join(args.out, "gemv.safetensors"), tensors, metadata)
    print(f"wrote {args.out}/values.json and {args.out}/gemv.safetensors ({len(tensors)} tensors)")


if __name__ == "__main__":
    main()
