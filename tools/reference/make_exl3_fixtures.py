#!/usr/bin/env python3
"""Golden data for frank's EXL3 (ExLlamaV3) weight decoder, made with exllamav3 1.6.5 itself.

Writes into --out (default tests/fixtures/exl3), each file only when its part could be made:

    codebooks.safetensors  F16 [65536] per codebook ("3inst", "mcg", "mul1"): the decoded value of
                           every 16-bit trellis state
    tiles.safetensors      random trellises (any bit pattern is a valid encoding) and their decoded
                           Q matrices [k, n] for K = 1..8 and every codebook, bit-exact kernel output
    linears.safetensors    small linears quantised with quantize_exl3 (their on-disk tensors under
                           the native names), inputs x and ExLlamaV3's outputs with int8 GEMV off
    manifest.json          what this run made, from which exllamav3 function, and what it could not
                           make and why

Where the values come from, in order of preference:
  1. exllamav3's own pure-torch functions, loaded from the installed package's files without
     importing the package (any `import exllamav3...` builds the CUDA extension). In 1.6.5 the
     only one is `modules/quant/exl3_lib/ngram_codec.py:mul1_codebook` (the MUL1 table).
  2. the compiled extension (`exllamav3_ext`): ext.decode for the codebook tables,
     ext.reconstruct for tiles, quantize_exl3 + LinearEXL3 for the linears. This needs a CUDA
     GPU, a CUDA build of torch and, when no prebuilt extension is installed, nvcc + ninja for
     the JIT build on first import (several minutes).
Where the extension cannot be imported the script still writes what step 1 gives, says what is
missing, and exits with status 3.

With the extension it also checks the format notes (docs/exl3-format.md in the shared docs) with
an independent numpy oracle: trellis states from the bitstream rule, the tile permutation, and the
Hadamard sandwich W = diag(suh) H Q H diag(svh). Disagreements are recorded in manifest.json and
make the script exit with status 2 (after writing the files).

Usage:  python tools/reference/make_exl3_fixtures.py --out tests/fixtures/exl3
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
from pathlib import Path

# ExLlamaV3 reads these when its modules load: keep the fp16 GEMV path (the int8 one rounds
# activations to int8, ~0.9% RMS, and is on by default for mul1).
os.environ["EXL3_INT8_GEMV"] = "0"

import numpy as np
import torch
from safetensors.numpy import save_file

EXLLAMAV3_VERSION = "1.6.5"
SEED = 20261130
CODEBOOKS = {"3inst": (False, False), "mcg": (True, False), "mul1": (False, True)}  # name: (mcg, mul1)
TILE_SHAPE = (2, 8)        # tiles (k/16, n/16): 32 x 128, the smallest width ext.reconstruct takes
WIDE_TILE_SHAPE = (2, 16)  # 32 x 256: a second 128-column block
WIDE_BITS, WIDE_CODEBOOK = 3, "mcg"
# name, in_features k, out_features n, K, codebook, calibrated (X^T X Hessian) or identity Hessian
LINEARS = [("mul1_k2_cal", 256, 128, 2, "mul1", True), ("mcg_k3_cal", 256, 128, 3, "mcg", True),
           ("3inst_k4_cal", 128, 256, 4, "3inst", True), ("mul1_k5_id", 256, 128, 5, "mul1", False)]
CALIBRATION_ROWS = 512
INPUT_ROWS = (1, 5)


# ---------------------------------------------------------------------------------------------
# Finding exllamav3 without importing it

def exllamav3_dir() -> Path:
    spec = importlib.util.find_spec("exllamav3")  # locates the package; runs none of its code
    if spec is None or not spec.submodule_search_locations:
        sys.exit("exllamav3 is not installed (pip install exllamav3==1.6.5 --no-deps, see README.md)")
    version = importlib.metadata.version("exllamav3")
    if version != EXLLAMAV3_VERSION:
        sys.exit(f"exllamav3 {version} is installed; the fixtures are defined for {EXLLAMAV3_VERSION}")
    return Path(spec.submodule_search_locations[0])


def load_file_as_module(path: Path, name: str):
    """Runs one source file of the package on its own (it must import nothing from the package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pure_torch_mul1_table(package: Path) -> np.ndarray:
    codec = load_file_as_module(package / "modules/quant/exl3_lib/ngram_codec.py", "exl3_ngram_codec")
    table = codec.mul1_codebook("cpu")
    assert table.dtype == torch.float16 and table.shape == (65536,)
    return table.numpy().view(np.uint16).copy()


def import_extension():
    """(ext, None), or (None, why not)."""
    if not torch.cuda.is_available():
        return None, f"torch {torch.__version__} sees no CUDA device (the extension's kernels need one)"
    try:
        from exllamav3.ext import exllamav3_ext as ext
    except Exception as e:  # a JIT build failure surfaces as many exception types
        return None, f"importing exllamav3's extension failed: {type(e).__name__}: {e}"
    return ext, None


# ---------------------------------------------------------------------------------------------
# Independent numpy oracle of the format notes (docs/exl3-format.md §2)

def oracle_states(trellis: np.ndarray, bits: int) -> np.ndarray:
    """[tk, tn, 16K] int16 -> [tk, tn, 256] trellis states in bitstream order.

    The tile is 8K little-endian uint32 words read MSB-first; state t is the 16 stream bits ending
    at bit (t+1)K, circularly (element 0 reads the end of the tile)."""
    halves = trellis.view(np.uint16).astype(np.uint64)
    words = halves[..., 0::2] | (halves[..., 1::2] << np.uint64(16))  # [tk, tn, 8K]
    n_words, stream_bits = 8 * bits, 256 * bits
    start = ((np.arange(256) + 1) * bits - 16) % stream_bits
    first = start // 32
    window = (words[..., first] << np.uint64(32)) | words[..., (first + 1) % n_words]
    return ((window >> (48 - start % 32).astype(np.uint64)) & np.uint64(0xFFFF)).astype(np.int64)


def oracle_q(trellis: np.ndarray, bits: int, table: np.ndarray, perm: np.ndarray) -> np.ndarray:
    """Q [k, n] as fp16 bits: element t of tile (kt, nt) lands at (16kt + perm[t]//16, 16nt + perm[t]%16)."""
    tk, tn, _ = trellis.shape
    values = table[oracle_states(trellis, bits)]  # [tk, tn, 256]
    tiles = np.empty_like(values)
    tiles[..., perm] = values
    return tiles.reshape(tk, tn, 16, 16).transpose(0, 2, 1, 3).reshape(16 * tk, 16 * tn)


def hadamard128() -> np.ndarray:
    i = np.arange(128)
    popcount = np.vectorize(lambda v: bin(v).count("1"))(i[:, None] & i[None, :])
    return np.where(popcount % 2 == 0, 1.0, -1.0) / np.sqrt(128.0)


def oracle_weight(q_bits: np.ndarray, suh: np.ndarray, svh: np.ndarray) -> np.ndarray:
    """W [k, n] = diag(suh) . H_k . Q . H_n . diag(svh) in float64, 128-blocks on both sides."""
    h = hadamard128()
    q = q_bits.view(np.float16).astype(np.float64)
    k, n = q.shape
    q = np.einsum("ij,bjc->bic", h, q.reshape(k // 128, 128, n)).reshape(k, n)
    q = np.einsum("rbj,jc->rbc", q.reshape(k, n // 128, 128), h).reshape(k, n)
    return suh.astype(np.float64)[:, None] * q * svh.astype(np.float64)[None, :]


def max_scaled_diff(ours: np.ndarray, reference: np.ndarray) -> float:
    """max |a - b| / max(1, max|b|): one number per comparison for the manifest."""
    reference = reference.astype(np.float64)
    return float(np.max(np.abs(ours.astype(np.float64) - reference)) / max(1.0, np.max(np.abs(reference))))


# ---------------------------------------------------------------------------------------------
# Parts made with the extension

def ext_codebook_tables(ext) -> dict[str, np.ndarray]:
    states = np.arange(65536, dtype=np.uint16).view(np.int16).reshape(1024, 64)  # cols: multiple of 64
    idx = torch.from_numpy(states).cuda()
    tables = {}
    for name, (mcg, mul1) in CODEBOOKS.items():
        out = torch.empty((1024, 64), dtype=torch.half, device="cuda")
        ext.decode(idx, out, mcg, mul1)
        tables[name] = out.cpu().numpy().view(np.uint16).reshape(65536).copy()
    return tables


def ext_reconstruct(ext, trellis: np.ndarray, bits: int, codebook: str) -> np.ndarray:
    tk, tn, _ = trellis.shape
    out = torch.empty((16 * tk, 16 * tn), dtype=torch.half, device="cuda")
    mcg, mul1 = CODEBOOKS[codebook]
    ext.reconstruct(out, torch.from_numpy(trellis).cuda(), bits, mcg, mul1)
    return out.cpu().numpy().view(np.uint16).copy()


def random_trellis(rng, tiles: tuple[int, int], bits: int) -> np.ndarray:
    return rng.integers(0, 65536, size=(*tiles, 16 * bits), dtype=np.uint16).view(np.int16)


def make_tiles(ext, rng, tables, perm, checks) -> dict[str, np.ndarray]:
    out = {}
    cases = [(f"K{bits}", TILE_SHAPE, bits, list(CODEBOOKS)) for bits in range(1, 9)]
    cases.append(("wide", WIDE_TILE_SHAPE, WIDE_BITS, [WIDE_CODEBOOK]))
    mismatches = 0
    for name, tiles, bits, codebooks in cases:
        trellis = random_trellis(rng, tiles, bits)
        out[f"{name}.trellis"] = trellis
        for cb in codebooks:
            q = ext_reconstruct(ext, trellis, bits, cb)
            out[f"{name}.{cb}"] = q
            mismatches += int(np.count_nonzero(q != oracle_q(trellis, bits, tables[cb], perm)))
    checks["tiles_oracle_mismatched_elements"] = mismatches
    return out


def correlated_inputs(rng, rows: int, k: int) -> np.ndarray:
    """Activations with unequal channel scales and correlations, so LDLQ has work to do."""
    mix = rng.standard_normal((k, k)) / np.sqrt(k) + np.eye(k)
    return (rng.standard_normal((rows, k)) @ mix * rng.uniform(0.2, 3.0, size=k)).astype(np.float32)


def quantize_linear(rng, k: int, n: int, bits: int, codebook: str, calibrated: bool, seed: int) -> dict:
    from exllamav3.modules.quant.exl3_lib.quantize import quantize_exl3

    weight = torch.from_numpy((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)).cuda()  # (in, out)
    if calibrated:
        x = torch.from_numpy(correlated_inputs(rng, CALIBRATION_ROWS, k)).cuda()
        hessian, count = x.T @ x, CALIBRATION_ROWS  # summed over rows, as the capture does
    else:
        hessian, count = torch.eye(k, device="cuda"), 1  # uncalibrated, sfxnz's expert recipe
    h_data = {"H": hessian, "count": count, "finalized": False, "first_key": "fixture", "num_total": count,
              "inf_nan": torch.zeros(2, dtype=torch.long, device="cuda"), "device": torch.device("cuda:0")}
    quant_args = {"K": bits, "seed": seed, "sigma_reg": 0.025, "devices": [0], "apply_out_scales": None}
    if codebook != "3inst":
        quant_args[codebook] = True  # only the wanted key: {"mcg": False} would still select MCG in old code
    _, proxy_err, tensors = quantize_exl3(weight, h_data, quant_args, return_weight_q=False)
    return {"tensors": tensors, "proxy_err": float(proxy_err)}


def make_linears(ext, rng, tables, perm, checks) -> dict[str, np.ndarray]:
    from exllamav3.modules.quant.exl3 import LinearEXL3

    out, linear_checks = {}, {}
    for index, (name, k, n, bits, codebook, calibrated) in enumerate(LINEARS):
        made = quantize_linear(rng, k, n, bits, codebook, calibrated, SEED + index)
        t = made["tensors"]
        assert t["trellis"].shape == (k // 16, n // 16, 16 * bits), t["trellis"].shape
        markers = sorted(set(t) & {"mcg", "mul1"})
        assert markers == ([] if codebook == "3inst" else [codebook]), markers
        linear = LinearEXL3(None, k, n, suh=t["suh"], svh=t["svh"], trellis=t["trellis"],
                            mcg=t.get("mcg"), mul1=t.get("mul1"), key=name)
        for key, tensor in t.items():
            out[f"{name}.{key}"] = tensor.cpu().numpy()
        weight = linear.get_weight_tensor()
        out[f"{name}.weight"] = weight.cpu().numpy()
        trellis = t["trellis"].cpu().numpy()
        q = ext_reconstruct(ext, trellis, bits, codebook)
        w_oracle = oracle_weight(q, out[f"{name}.suh"], out[f"{name}.svh"])
        entry = {"k": k, "n": n, "K": bits, "codebook": codebook, "calibrated": calibrated,
                 "proxy_err": made["proxy_err"],
                 "q_oracle_mismatched_elements": int(np.count_nonzero(q != oracle_q(trellis, bits, tables[codebook], perm))),
                 "weight_vs_oracle_max_scaled_diff": max_scaled_diff(out[f"{name}.weight"], w_oracle)}
        for rows in INPUT_ROWS:
            x = torch.from_numpy(rng.standard_normal((rows, k)).astype(np.float16)).cuda()
            y_kernel = linear.forward(x, {})                      # rows <= 144: the quantized GEMV/GEMM kernel
            y_recon = linear.forward(x, {"reconstruct": True})   # fp16 W, then hgemm
            out[f"{name}.x{rows}"] = x.cpu().numpy()
            out[f"{name}.y{rows}_kernel"] = y_kernel.cpu().numpy()
            out[f"{name}.y{rows}_reconstruct"] = y_recon.cpu().numpy()
            y_oracle = x.cpu().numpy().astype(np.float64) @ w_oracle
            entry[f"y{rows}_kernel_vs_oracle_max_scaled_diff"] = max_scaled_diff(out[f"{name}.y{rows}_kernel"], y_oracle)
            entry[f"y{rows}_reconstruct_vs_oracle_max_scaled_diff"] = max_scaled_diff(out[f"{name}.y{rows}_reconstruct"], y_oracle)
        linear_checks[name] = entry
    checks["linears"] = linear_checks
    return out


# ---------------------------------------------------------------------------------------------

def write(out_dir: Path, filename: str, tensors: dict[str, np.ndarray], metadata: dict[str, str], files: dict):
    path = out_dir / filename
    # np.array(order="C") rather than np.ascontiguousarray, which turns the 0-dim markers into [1]
    save_file({k: np.array(v, order="C") for k, v in tensors.items()}, str(path), metadata=metadata)
    files[filename] = {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "bytes": path.stat().st_size,
                       "tensors": sorted(tensors), "source": metadata["source"]}
    print(f"wrote {path} ({path.stat().st_size} bytes)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures/exl3"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)

    package = exllamav3_dir()
    versions = {"exllamav3": EXLLAMAV3_VERSION, "torch": torch.__version__, "numpy": np.__version__,
                "python": platform.python_version()}
    files, missing, checks = {}, {}, {}
    mul1_pure = pure_torch_mul1_table(package)
    ext, why_not = import_extension()

    if ext is None:
        print(f"NOTE: {why_not}")
        write(args.out, "codebooks.safetensors", {"mul1": mul1_pure.view(np.float16)},
              {"source": "mul1: exllamav3 1.6.5 modules/quant/exl3_lib/ngram_codec.py:mul1_codebook (pure torch, CPU)"},
              files)
        missing["codebooks.safetensors: 3inst, mcg"] = why_not + "; upstream has no pure-torch 3INST/MCG decoder"
        missing["tiles.safetensors"] = why_not + "; upstream decodes trellis tiles only in CUDA (ext.reconstruct)"
        missing["linears.safetensors"] = why_not + "; quantize_exl3 runs on CUDA only"
    else:
        versions["cuda_device"] = torch.cuda.get_device_name(0)
        versions["torch_cuda"] = str(torch.version.cuda)
        from exllamav3.modules.quant.exl3_lib.quantize import tensor_core_perm
        perm = tensor_core_perm("cpu").numpy()
        tables = ext_codebook_tables(ext)
        checks["mul1_pure_torch_vs_ext_decode_mismatches"] = int(np.count_nonzero(tables["mul1"] != mul1_pure))
        write(args.out, "codebooks.safetensors", {k: v.view(np.float16) for k, v in tables.items()},
              {"source": "exllamav3 1.6.5 ext.decode (CUDA) for every codebook"}, files)
        write(args.out, "tiles.safetensors", make_tiles(ext, rng, tables, perm, checks),
              {"source": "exllamav3 1.6.5 ext.reconstruct (CUDA) on random trellises",
               "tiles": "K1..K8: trellis [2, 8, 16K] and Q [32, 128] per codebook; wide: K3 mcg [2, 16, 48] -> [32, 256]"},
              files)
        write(args.out, "linears.safetensors", make_linears(ext, rng, tables, perm, checks),
              {"source": "exllamav3 1.6.5 quantize_exl3 + LinearEXL3 (CUDA), EXL3_INT8_GEMV=0",
               "linears": json.dumps(LINEARS)}, files)

    manifest = {"versions": versions, "seed": SEED, "files": files, "not_made": missing, "checks": checks}
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(json.dumps({"not_made": missing, "checks": checks}, indent=1))

    oracle_failures = checks.get("tiles_oracle_mismatched_elements", 0) + \
        checks.get("mul1_pure_torch_vs_ext_decode_mismatches", 0) + \
        sum(v["q_oracle_mismatched_elements"] for v in checks.get("linears", {}).values())
    if oracle_failures:
        print("ERROR: the numpy oracle of docs/exl3-format.md disagrees with the extension (see checks)")
        return 2
    return 3 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
