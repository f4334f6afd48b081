#!/usr/bin/env python3
"""Golden K=V row records for frank's KV storage formats (src/frank/engine/kv_record.h), made with
numpy + ml_dtypes, independently of the C++ encoder.

The fp8 record is DeepSeek-V4's (dsv4-model.md section 9, 584 bytes for 512 dims): the first
dim - rope_dims values ("nope") as float8 e4m3fn with one ue8m0 power-of-two scale per 64 values,
the last rope_dims values as bfloat16, then the scale bytes, then zero padding to a multiple of 8:

    [0, nope)                 e4m3fn(x / s_b) of nope value i, block b = i // 64
    [nope, nope + 2*rope)     bfloat16(x), little-endian
    [.., + ceil(nope / 64))   ue8m0 byte of s_b (exponent + 127)
    zeros up to a multiple of 8 bytes

    s_b = 2^ceil(log2(float32(max(amax_b, 1e-4)) / 448))   (the fp32 quotient, as DeepSeek computes it)

The bf16 record is the 512 values as bfloat16 (round to nearest even).

Writes --out (default tests/fixtures/kv_record/records.json):
    e4m3_saturating  [float32 bits, byte]: float -> e4m3fn, round to nearest even, saturating to +-448
    bf16             [float32 bits, bf16 bits]: round to nearest even
    records          rows (float32 bits) with their fp8 and bf16 records as hex strings

Usage:  python tools/reference/make_kv_record_fixtures.py --out tests/fixtures/kv_record/records.json
"""

from __future__ import annotations

import argparse
import json
import math
import os

import ml_dtypes
import numpy as np

SEED = 20261130
BLOCK = 64
E4M3_MAX = np.float32(448.0)
AMAX_FLOOR = np.float32(1e-4)


def f32(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def bits(values: np.ndarray) -> list[int]:
    return [int(b) for b in f32(values).view(np.uint32)]


def to_e4m3_bytes(x: np.ndarray) -> np.ndarray:
    """Round to nearest even, saturating: ml_dtypes turns values past the range into NaN, so clip
    first (clipping cannot change a rounding: 448 is the largest finite e4m3fn value)."""
    return np.clip(f32(x), -E4M3_MAX, E4M3_MAX).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


def to_bf16_bytes(x: np.ndarray) -> bytes:
    return f32(x).astype(ml_dtypes.bfloat16).view(np.uint16).astype("<u2").tobytes()


def block_exponent(block: np.ndarray) -> int:
    amax = np.max(np.abs(block)) if block.size else np.float32(0)
    quotient = np.float32(max(np.float32(amax), AMAX_FLOOR)) / E4M3_MAX  # float32 division
    return math.ceil(math.log2(float(quotient)))  # float64 log2: exact for powers of two


def fp8_record(row: np.ndarray, rope: int) -> bytes:
    nope = row.size - rope
    values, scales = bytearray(), bytearray()
    for b in range(0, nope, BLOCK):
        block = row[b:min(b + BLOCK, nope)]
        e = block_exponent(block)
        # x * 2^-e is exact in float32 (a power of two), so it equals DeepSeek's x / s.
        values += to_e4m3_bytes(block * np.float32(2.0 ** -e)).tobytes()
        scale = np.float32(2.0 ** e).astype(ml_dtypes.float8_e8m0fnu).view(np.uint8)
        assert int(scale) == e + 127
        scales.append(int(scale))
    record = bytes(values) + to_bf16_bytes(row[nope:]) + bytes(scales)
    return record + bytes(-len(record) % 8)


def ties_and_subnormals(rng, n: int) -> np.ndarray:
    """Values that land on e4m3 rounding ties and subnormals once divided by the block's scale
    (the block's max is 448 * 2^-3, so s = 2^-3: e4m3 sees 8x the value)."""
    s = np.float32(2.0 ** -3)
    e4m3_ties = f32([1.0625, 1.1875, 2.125, 2.375, 17.0, 19.0, 208.0, 240.0])  # midpoints: even, odd neighbours
    subnormal = f32([2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -10, 5 * 2.0 ** -10, 7 * 2.0 ** -9, 15 * 2.0 ** -10,
                     2.0 ** -11, 2.0 ** -6 - 2.0 ** -10])
    picked = np.concatenate([e4m3_ties, -e4m3_ties, subnormal, -subnormal])
    row = rng.choice(picked, size=n) * s
    row[0] = 448.0 * s  # sets the scale: amax / 448 = 2^-3 exactly
    return f32(row)


def rows(rng) -> list[tuple[str, int, np.ndarray]]:
    out = []
    d, r = 512, 64
    out.append(("normal 512/64", r, f32(rng.standard_normal(d) * 2.0)))
    out.append(("zeros 512/64", r, f32(np.zeros(d))))
    neg_zero = f32(np.zeros(d))
    neg_zero[::3] = -0.0
    out.append(("negative zeros 512/64", r, neg_zero))
    tiny = f32(rng.uniform(-1e-4, 1e-4, d) * rng.choice([1.0, 1e-3, 1e-6], d))  # every block under the floor
    out.append(("under the 1e-4 floor 512/64", r, tiny))
    out.append(("ties and subnormals 512/64", r, ties_and_subnormals(rng, d)))
    # amax exactly 448 * 2^k: x / s reaches 448, the top of the range; other blocks huge or mixed.
    top = f32(rng.uniform(-1, 1, d) * 448.0 * 2.0 ** 5)
    for b in range(0, 448, BLOCK):
        top[b + 7] = -448.0 * 2.0 ** (5 - b // BLOCK)
    top[130] = 3.0e38
    out.append(("range top and huge 512/64", r, top))
    mixed = f32(rng.standard_normal(d) * np.repeat(f32([1e-5, 1e-2, 1.0, 1e2, 1e4, 1e-3, 10.0, 1.0]), 64))
    mixed[448:452] = f32([1.00390625, 1.01171875, -0.0, 65280.0])  # bf16 ties (even, odd), -0, large
    out.append(("scales across binades 512/64", r, mixed))
    out.append(("tiny model 32/8", 8, f32(rng.standard_normal(32))))
    out.append(("tiny model under the floor 32/8", 8, f32(rng.uniform(-5e-5, 5e-5, 32))))
    out.append(("partial last block 200/64", 64, f32(rng.standard_normal(200) * 3.0)))
    return out


def e4m3_table(rng) -> list[list[int]]:
    edge = [0.0, -0.0, 1.0, -1.0, 448.0, -448.0, 449.0, 464.0, -464.0, 465.0, 480.0, 1e6, -1e6, 3.0e38,
            2.0 ** -9, -(2.0 ** -9), 2.0 ** -10, 3 * 2.0 ** -10, 2.0 ** -11, 2.0 ** -12, 7 * 2.0 ** -9,
            2.0 ** -6, 2.0 ** -6 - 2.0 ** -10, 1.0625, 1.1875, 1e-30, -1e-30]
    spread = rng.standard_normal(200) * np.exp2(rng.integers(-12, 10, 200))
    values = f32(np.concatenate([edge, spread]))
    return [[b, int(v)] for b, v in zip(bits(values), to_e4m3_bytes(values))]


def bf16_table(rng) -> list[list[int]]:
    edge_bits = np.array([0x00000000, 0x80000000, 0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF, 0x7F7FFFFF,
                          0x00008000, 0x00018000, 0xC0490FDB], dtype=np.uint32)
    values = np.concatenate([edge_bits.view(np.float32), f32(rng.standard_normal(100) * 100.0)])
    return [[b, int(v)] for b, v in zip(bits(values), f32(values).astype(ml_dtypes.bfloat16).view(np.uint16))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="tests/fixtures/kv_record/records.json")
    args = parser.parse_args()
    rng = np.random.default_rng(SEED)
    records = []
    for name, rope, row in rows(rng):
        fp8 = fp8_record(row, rope)
        records.append({"name": name, "dim": int(row.size), "rope_dims": rope, "values": bits(row),
                        "fp8": fp8.hex(), "bf16": to_bf16_bytes(row).hex()})
    assert len(records[0]["fp8"]) == 2 * 584, "DeepSeek-V4's record is 584 bytes"
    golden = {"ml_dtypes_version": ml_dtypes.__version__, "numpy_version": np.__version__,
              "e4m3_saturating": e4m3_table(rng), "bf16": bf16_table(rng), "records": records}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out}: {len(records)} records, {len(golden['e4m3_saturating'])} e4m3 and "
          f"{len(golden['bf16'])} bf16 conversions")


if __name__ == "__main__":
    main()
