"""Golden values of DeepSeek-V4.1's QAT rounding, made by transformers' own fake-quantisers.

Runs `_fake_quant_fp8_block` (window K=V: FP8, ue8m0 scale per 32) and `_fake_quant_fp4_block`
(compressed entries: FP4, e4m3 scale per 16; indexer q/k: FP4, ue8m0 scale per 32) of the
DeepSeek-V4.1 source (dsv41_source.py: the PR-branch snapshot, hash-checked, kept outside the
repository) on rows built to reach every branch, and writes inputs and outputs to
tests/fixtures/dsv41/fake_quant.safetensors. The C++ test (tests/unit/test_fake_quant.cpp) feeds the
same inputs to frank's rounding and requires the same float32 bits.

    /tmp/v41env/bin/python tools/reference/make_dsv41_quant_fixtures.py \
        --source /tmp/dsv41-src/deepseek_v41 --out tests/fixtures/dsv41/fake_quant.safetensors
"""

from __future__ import annotations

import argparse
import json

import torch
from safetensors.torch import save_file

import dsv41_source

SEED = 4141


def rows_for(block: int, grid: list[float], gen: torch.Generator) -> torch.Tensor:
    """Blocks of `block` values (one per row) that reach every rounding case of one quantiser:
    random magnitudes over 12 decades, exact grid points and midpoints (ties) of a power-of-two scale,
    all-zero and tiny blocks (the amax floors), subnormal-scale blocks, signed zeros, and near-tie
    values one ulp either side of a midpoint."""
    rows = []
    for decade in range(-9, 3):
        rows.append(torch.randn(block, generator=gen) * 10.0**decade)
    # Exact grid values and midpoints at scale 1: amax = grid max, so the scale stays a power of two
    # (ue8m0) or the max over 6/448 (e4m3) and the midpoints are true ties.
    top = grid[-1]
    mids = [(a + b) / 2 for a, b in zip(grid, grid[1:])]
    for values in (grid, mids):
        v = torch.tensor(([top] + values * block)[:block], dtype=torch.float32)
        rows.append(v)
        rows.append(-v)
    for m in mids:
        v = torch.full((block,), m, dtype=torch.float32)
        v[0] = top
        rows.append(torch.nextafter(v, torch.full_like(v, float("inf"))))
        rows.append(torch.nextafter(v, torch.full_like(v, float("-inf"))))
    rows.append(torch.zeros(block))
    z = torch.zeros(block)
    z[1::2] = -0.0
    rows.append(z)
    rows.append(torch.randn(block, generator=gen) * 1e-30)  # below every amax floor
    rows.append(torch.randn(block, generator=gen) * 0.02)   # e4m3 scale subnormal (amax / 6 < 2^-6)
    rows.append(torch.randn(block, generator=gen) * 1e-3)   # the 6 * 2^-9 floor
    rows.append(torch.randn(block, generator=gen) * 1e-6)   # the FP8 1e-4 floor
    return torch.stack(rows).float()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    source = dsv41_source.verify_source(args.source)
    modeling = dsv41_source.register_source(args.source)
    torch.set_num_threads(2)
    gen = torch.Generator().manual_seed(SEED)

    fp4_grid = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    fp8_grid = [0.0, 0.25, 0.5, 1.0, 1.125, 2.0, 3.5, 16.0, 240.0, 256.0, 448.0]  # a few e4m3 neighbours
    tensors = {}
    cases = {
        "fp8_ue8m0_32": (32, fp8_grid, lambda x: modeling._fake_quant_fp8_block(x, block_size=32)),
        "fp4_e4m3_16": (16, fp4_grid, lambda x: modeling._fake_quant_fp4_block(x, block_size=16, e4m3_scales=True)),
        "fp4_ue8m0_32": (32, fp4_grid, lambda x: modeling._fake_quant_fp4_block(x, block_size=32)),
    }
    for name, (block, grid, fn) in cases.items():
        x = rows_for(block, grid, gen)
        y = fn(x.clone())
        assert torch.isfinite(y).all(), name
        tensors[f"{name}.in"] = x.contiguous()
        tensors[f"{name}.out"] = y.contiguous()
    meta = {"source": json.dumps(source), "torch": torch.__version__, "seed": str(SEED)}
    save_file(tensors, args.out, metadata=meta)
    print("wrote", args.out, {k: list(v.shape) for k, v in tensors.items()})


if __name__ == "__main__":
    main()
