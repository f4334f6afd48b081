#!/usr/bin/env python3
"""FP8 / FP4 quantized golden fixtures for the frank DeepSeek-V4 engine.

Takes the tiny random model of the `tiny-v4` fixture (make_dsv4_fixtures.py, same config,
seed and token ids), quantizes it the way DeepSeek ships V4 checkpoints (FP8 e4m3 block-scaled
linears, FP4 e2m1 routed experts, power-of-two ue8m0 scales), DEQUANTIZES the result back to
float32, loads those values into transformers' DeepseekV4ForCausalLM and records its logits.
The golden is therefore "transformers on exactly the numbers the quantized checkpoint encodes".

Writes two folders (FP8 block 128 = DeepSeek-V4, FP8 block 32 = the V4.1 block size; the block-32 one
multiplies each 32x32 FP8 block by a power-of-two gain first, so that neighbouring blocks have different
scales, see QUANTIZED_FIXTURES):

    <out>/tiny-v4-fp8-fp4/       config.json (official keys + quantization_config),
    <out>/tiny-v4-fp8b32-fp4/    model.safetensors (official names, F8_E4M3 / I8 / F8_E8M0 / F32 / I64),
                                 golden.json, logits.f32 (little-endian float32 [n_tokens, vocab])

Needs the tiny-v4 fixture (<out>/tiny-v4, checked bit for bit) and accelerate (transformers' FP8 loader,
used to cross-check the files with transformers' own dequantization).

Usage:  python tools/reference/make_dsv4_quantized_fixtures.py --out tests/fixtures/dsv4
See tools/reference/README.md ("Quantized DeepSeek-V4 fixtures").
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import struct
import sys
import tempfile
from collections import defaultdict

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_dsv4_fixtures as base  # noqa: E402  (same folder; nothing runs on import)

import safetensors  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM  # noqa: E402
from transformers.cache_utils import DynamicCache  # noqa: E402

CSA, HCA = base.CSA, base.HCA
log = base.log

QUANTIZED_FIXTURES = [
    dict(name="tiny-v4-fp8-fp4", block=128, block_gains=False),
    # FP8 with power-of-two scales is scale-equivariant: on tiny-v4's weights the 32x32 block scales of a
    # tensor come out (nearly) all equal, and the dequantized values are bit-identical to the block-128
    # fixture, so a loader that reads the wrong scale block would still pass. block_gains multiplies each
    # FP8 block by 2^k, k in -1..1 chosen so that every block's scale differs from its upper and left
    # neighbours' (see make_quantized_fixture), BEFORE quantization (exact).
    dict(name="tiny-v4-fp8b32-fp4", block=32, block_gains=True),
]
SOURCE = base.FIXTURES[0]                       # tiny-v4: config, seed, ids, prefill, chunks
assert SOURCE["name"] == "tiny-v4"

# Official tensor names (see make_dsv4_fixtures.official_name_map) that DeepSeek ships quantized.
FP8_RE = re.compile(r"^layers\.\d+\.(?:attn\.(?:wq_a|wq_b|wkv|wo_a|wo_b|indexer\.wq_b)|ffn\.shared_experts\.w[123])\.weight$")
FP4_RE = re.compile(r"^layers\.\d+\.ffn\.experts\.\d+\.w[123]\.weight$")

FP8_MAX = 448.0                                 # largest finite float8_e4m3fn
FP4_MAX = 6.0                                   # largest e2m1
FP4_BLOCK = 32                                  # FP4 scale granularity: 32 consecutive values of a row
E2M1_TABLE = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
# Midpoints between consecutive e2m1 magnitudes (codes c and c+1). At an exact tie the value goes
# to the code with the even mantissa bit (bit 0 of the code), i.e. up iff c is odd.
E2M1_MIDS = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
ZERO_BLOCK_SCALE_BYTE = 127                     # amax == 0 -> scale 2^0 = 1 (never happens with these weights)


# --------------------------------------------------------------------------------------
# Quantizers (torch / exact float64 arithmetic)
# --------------------------------------------------------------------------------------


def pow2_ceil_exponent(amax: float, qmax: float) -> int:
    """Smallest integer e with amax <= qmax * 2^e, i.e. e = ceil(log2(amax / qmax)), computed exactly."""
    if amax == 0.0:
        return ZERO_BLOCK_SCALE_BYTE - 127
    e = math.ceil(math.log2(amax / qmax))
    while amax > qmax * 2.0 ** e:               # qmax * 2^e and the comparisons are exact in float64
        e += 1
    while amax <= qmax * 2.0 ** (e - 1):
        e -= 1
    assert -127 <= e <= 127, (amax, qmax, e)
    # DeepSeek's kernels (inference/kernel.py fast_round_scale) compute fast_log2_ceil(amax * (1/qmax)) on
    # float32 bits; assert that this float32 formula picks the same exponent for every (float32) block amax.
    if float(np.float32(amax)) == amax:
        v = np.float32(amax) * np.float32(1.0 / qmax)
        bits = int(np.array(v, dtype=np.float32).view(np.uint32))
        assert (bits >> 23) & 0xFF not in (0, 255), (amax, qmax)
        assert ((bits >> 23) & 0xFF) - 127 + int((bits & 0x7FFFFF) != 0) == e, (amax, qmax, e)
    return e


def quantize_fp8(w: torch.Tensor, B: int):
    """[out, in] float32 -> (float8_e4m3fn [out, in], e8m0 bytes uint8 [ceil(out/B), ceil(in/B)])."""
    out, inn = w.shape
    nr, nc = -(-out // B), -(-inn // B)
    q = torch.empty(out, inn, dtype=torch.float8_e4m3fn)
    s = torch.empty(nr, nc, dtype=torch.uint8)
    for i in range(nr):
        for j in range(nc):
            blk = w[i * B:(i + 1) * B, j * B:(j + 1) * B]           # last row/column block may be partial
            e = pow2_ceil_exponent(float(blk.abs().max()), FP8_MAX)
            s[i, j] = e + 127
            x = blk * (2.0 ** -e)                                     # exact (power of two, no under/overflow)
            assert float(x.abs().max()) <= FP8_MAX
            q[i * B:(i + 1) * B, j * B:(j + 1) * B] = x.to(torch.float8_e4m3fn)   # round to nearest even
    return q, s


def e2m1_codes(x: np.ndarray) -> np.ndarray:
    """Nearest e2m1 code of each float64 value (|x| <= 6), ties to the even code, sign kept (-tiny -> -0)."""
    mag = np.abs(x)
    assert float(mag.max(initial=0.0)) <= FP4_MAX
    code = np.zeros(x.shape, dtype=np.uint8)
    for c, mid in enumerate(E2M1_MIDS):
        up = (mag > mid) | ((mag == mid) & (c % 2 == 1))
        code += up.astype(np.uint8)
    code |= (np.signbit(x).astype(np.uint8) << 3)
    return code


def pack_fp4(code: np.ndarray) -> np.ndarray:
    """[out, in] codes -> [out, in/2] int8: byte k = code[2k] | code[2k+1] << 4."""
    assert code.shape[-1] % 2 == 0
    return (code[..., 0::2] | (code[..., 1::2] << 4)).astype(np.uint8).view(np.int8)


def quantize_fp4(w: torch.Tensor):
    """[out, in] float32 -> (packed int8 [out, in/2], e8m0 bytes uint8 [out, in/32], codes uint8 [out, in])."""
    out, inn = w.shape
    assert inn % FP4_BLOCK == 0
    blocks = w.double().numpy().reshape(out, inn // FP4_BLOCK, FP4_BLOCK)
    amax = np.abs(blocks).max(-1)
    e = np.vectorize(lambda a: pow2_ceil_exponent(float(a), FP4_MAX), otypes=[np.int64])(amax)
    x = blocks * np.ldexp(1.0, -e)[..., None]                         # exact
    code = e2m1_codes(x).reshape(out, inn)
    return torch.from_numpy(pack_fp4(code)), torch.from_numpy((e + 127).astype(np.uint8)), code


def dequant_fp8_torch(q: torch.Tensor, s: torch.Tensor, B: int) -> torch.Tensor:
    scale = torch.exp2(s.to(torch.float32) - 127.0)
    scale = scale.repeat_interleave(B, 0)[: q.shape[0]].repeat_interleave(B, 1)[:, : q.shape[1]]
    return q.to(torch.float32) * scale


def dequant_fp4_torch(code: np.ndarray, s: torch.Tensor) -> torch.Tensor:
    vals = torch.tensor(E2M1_TABLE, dtype=torch.float32)[torch.from_numpy(code.astype(np.int64))]
    return vals * torch.exp2(s.to(torch.float32) - 127.0).repeat_interleave(FP4_BLOCK, 1)


# --------------------------------------------------------------------------------------
# Independent reader / decoder (raw safetensors bytes + numpy, no torch dtypes)
# --------------------------------------------------------------------------------------


def e4m3fn_table() -> np.ndarray:
    """float32 value of every float8_e4m3fn byte from its bit fields (NaN for S.1111.111)."""
    t = np.empty(256, dtype=np.float64)
    for b in range(256):
        sgn, E, M = b >> 7, (b >> 3) & 15, b & 7
        if E == 15 and M == 7:
            v = float("nan")
        elif E == 0:
            v = M / 8.0 * 2.0 ** -6
        else:
            v = (1.0 + M / 8.0) * 2.0 ** (E - 7)
        t[b] = -v if sgn else v
    return t.astype(np.float32)


def e2m1_table() -> np.ndarray:
    t = []
    for n in range(16):
        sgn, E, M = n >> 3, (n >> 1) & 3, n & 1
        v = M * 0.5 if E == 0 else (1.0 + M / 2.0) * 2.0 ** (E - 1)
        t.append(-v if sgn else v)
    return np.array(t, dtype=np.float32)


def e8m0_values(b: np.ndarray) -> np.ndarray:
    assert (b < 255).all(), "e8m0 byte 255 is NaN"
    return np.ldexp(1.0, b.astype(np.int64) - 127)                    # float64, exact


ST_DTYPES = {"F32": np.float32, "I64": np.int64, "I8": np.int8, "U8": np.uint8, "F8_E4M3": np.uint8, "F8_E8M0": np.uint8}


def read_safetensors_raw(path: str) -> tuple[dict, dict]:
    """name -> (safetensors dtype string, shape, numpy array of the raw elements), and the metadata."""
    buf = open(path, "rb").read()
    n = struct.unpack("<Q", buf[:8])[0]
    header = json.loads(buf[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = buf[8 + n:]
    out = {}
    for name, h in header.items():
        a, b = h["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype=np.dtype(ST_DTYPES[h["dtype"]]).newbyteorder("<")).reshape(h["shape"])
        out[name] = (h["dtype"], list(h["shape"]), arr)
    return out, meta


def decode_checkpoint(path: str, B: int) -> tuple[dict, dict]:
    """Official name -> float32 (or int64) numpy array, decoding FP8 / FP4 tensors independently."""
    raw, meta = read_safetensors_raw(path)
    e4m3, e2m1 = e4m3fn_table(), e2m1_table()
    dec, info = {}, {"fp8": [], "fp4": [], "plain": 0, "scale_bytes_min": 255, "scale_bytes_max": 0,
                 "fp8_scale_grids": {}, "q": {}}
    for name, (dt, shape, arr) in raw.items():
        if name.endswith(".scale"):
            assert name[:-len(".scale")] + ".weight" in raw, f"orphan scale {name}"
            continue
        sname = name[:-len(".weight")] + ".scale" if name.endswith(".weight") else None
        if sname is not None and sname in raw:
            sdt, sshape, sarr = raw[sname]
            assert sdt == "F8_E8M0", (sname, sdt)
            assert (sarr < 255).all(), f"{sname}: e8m0 byte 255 (NaN)"
            info["scale_bytes_min"] = min(info["scale_bytes_min"], int(sarr.min()))
            info["scale_bytes_max"] = max(info["scale_bytes_max"], int(sarr.max()))
            sc = e8m0_values(sarr)
            out_, cols = shape[0], shape[1]
            if dt == "F8_E4M3":
                assert FP8_RE.match(name), name
                info["fp8_scale_grids"][name] = sarr.copy()
                assert sshape == [-(-out_ // B), -(-cols // B)], (name, shape, sshape)
                vals = e4m3[arr].astype(np.float64)
                assert not np.isnan(vals).any(), name
                full = np.repeat(np.repeat(sc, B, 0)[:out_], B, 1)[:, :cols]
                # each scale is the smallest power of two that fits its block: amax/scale in (224, 448]
                for i in range(sshape[0]):
                    for j in range(sshape[1]):
                        bm = float(np.abs(vals[i * B:(i + 1) * B, j * B:(j + 1) * B]).max())
                        assert 224.0 <= bm <= FP8_MAX, (name, i, j, bm)
                dec[name] = (vals * full).astype(np.float32)
                info["fp8"].append(name)
                info["q"][name] = (vals, arr & 1, full)
            elif dt == "I8":
                assert FP4_RE.match(name), name
                n_in = 2 * cols
                assert sshape == [out_, n_in // FP4_BLOCK], (name, shape, sshape)
                u = arr.view(np.uint8)
                codes = np.empty((out_, n_in), dtype=np.uint8)
                codes[:, 0::2] = u & 0xF                                   # element 2k: low nibble
                codes[:, 1::2] = u >> 4                                    # element 2k+1: high nibble
                vals = e2m1[codes].astype(np.float64)
                # smallest power of two: amax/scale in (3, 6] -> the largest |e2m1| of each group is 3, 4 or 6
                gm = np.abs(vals).reshape(out_, n_in // FP4_BLOCK, FP4_BLOCK).max(-1)
                assert (gm >= 3.0).all(), (name, float(gm.min()))
                full = np.repeat(sc, FP4_BLOCK, 1)
                dec[name] = (vals * full).astype(np.float32)
                info["fp4"].append(name)
                info["q"][name] = (vals, codes & 1, full)
            else:
                raise AssertionError(f"{name}: quantized weight with dtype {dt}")
        else:
            assert not FP8_RE.match(name) and not FP4_RE.match(name), f"{name} should be quantized"
            assert dt in ("F32", "I64"), (name, dt)
            dec[name] = arr.copy()
            info["plain"] += 1
    return dec, {**info, "metadata": meta, "raw": {k: (v[0], v[1]) for k, v in raw.items()}}


# --------------------------------------------------------------------------------------
# Hand checks of the formats
# --------------------------------------------------------------------------------------


def hand_checks() -> dict:
    # e2m1 table from bit fields == the table DeepSeek / transformers use
    assert e2m1_table().tolist() == E2M1_TABLE and [math.copysign(1, v) for v in e2m1_table()] == \
        [math.copysign(1, v) for v in E2M1_TABLE]
    # e4m3fn table from bit fields == torch's float8_e4m3fn decoding (all 256 bytes, NaN at 0x7f / 0xff)
    tt = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).to(torch.float32).numpy()
    mine = e4m3fn_table()
    assert np.array_equal(np.isnan(tt), np.isnan(mine)) and np.isnan(mine).sum() == 2
    ok = ~np.isnan(mine)
    assert np.array_equal(tt[ok].view(np.uint32), mine[ok].view(np.uint32))
    assert float(np.nanmax(mine)) == FP8_MAX
    # e8m0: torch's float8_e8m0fnu bytes agree with 2^(b-127) for the bytes used here
    for b in (0, 100, 120, 127, 128, 140, 254):
        v = torch.tensor([b], dtype=torch.uint8).view(torch.float8_e8m0fnu).to(torch.float64).item()
        assert v == 2.0 ** (b - 127), (b, v)
    # e2m1 rounding: ties go to the even code, signs kept, exact values map to themselves
    x = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.2499, 0.2501, 5.01, 6.0, 0.0])
    assert e2m1_codes(x).tolist() == [0, 2, 2, 4, 4, 6, 6, 0, 1, 7, 7, 0]
    assert e2m1_codes(-x).tolist() == [8, 10, 10, 12, 12, 14, 14, 8, 9, 15, 15, 8]
    assert e2m1_codes(np.abs(np.array(E2M1_TABLE))).tolist() == list(range(8)) * 2
    # nibble order: row [0.5, -6, 1.5, 0] -> codes [1, 15, 3, 0] -> bytes [0xF1, 0x03] -> int8 [-15, 3]
    row = np.array([[0.5, -6.0, 1.5, 0.0]])
    codes = e2m1_codes(row)
    assert codes.tolist() == [[1, 15, 3, 0]]
    packed = pack_fp4(codes)
    assert packed.view(np.uint8).tolist() == [[0xF1, 0x03]] and packed.tolist() == [[-15, 3]]
    u = packed.view(np.uint8)
    unpacked = np.stack([u & 0xF, u >> 4], -1).reshape(1, 4)
    assert e2m1_table()[unpacked].tolist() == row.tolist()
    # ... and transformers' own FP4 unpacker (finegrained_fp8.Fp8Dequantize._unpack_fp4) reads it the same way
    from transformers.integrations.finegrained_fp8 import Fp8Dequantize
    assert Fp8Dequantize(None)._unpack_fp4(torch.from_numpy(packed.copy())).tolist() == row.tolist()
    # the ceil-power-of-two scale rule
    assert pow2_ceil_exponent(448.0, FP8_MAX) == 0 and pow2_ceil_exponent(448.0001, FP8_MAX) == 1
    assert pow2_ceil_exponent(224.0, FP8_MAX) == -1 and pow2_ceil_exponent(6.0, FP4_MAX) == 0
    assert pow2_ceil_exponent(3.0, FP4_MAX) == -1
    assert pow2_ceil_exponent(float(np.nextafter(np.float32(3), np.float32(4))), FP4_MAX) == 0
    assert pow2_ceil_exponent(float(np.nextafter(np.float32(448), np.float32(0))), FP8_MAX) == 0
    fp4_native = getattr(torch, "float4_e2m1fn_x2", None) is not None
    fp4_cast = None
    if fp4_native:
        try:
            torch.tensor([1.0, 2.0]).to(torch.float4_e2m1fn_x2)
            fp4_cast = "works (not used)"
        except Exception as e:  # noqa: BLE001
            fp4_cast = f"{type(e).__name__}: {str(e)[:80]}"
    res = {"torch_float4_e2m1fn_x2_dtype": fp4_native, "torch_float_to_float4_cast": fp4_cast,
           "nibble_example": {"values": row[0].tolist(), "codes": codes[0].tolist(),
                              "bytes_hex": [f"0x{b:02X}" for b in u[0].tolist()], "int8": packed[0].tolist()}}
    log(f"  hand checks ok: {res}")
    return res


# --------------------------------------------------------------------------------------
# Fixture driver
# --------------------------------------------------------------------------------------


def official_fp32_state(model) -> dict:
    """Official name -> float32 / int64 tensor (no bf16 rounding, unlike make_dsv4_fixtures.to_official_state)."""
    sd = model.state_dict()
    res = {}
    for name, targets in base.official_name_map(model).items():
        for oname, sl in targets:
            res[oname] = sl(sd[name]).detach().contiguous().clone()
    return res


def fixture_config_json(cfg: DeepseekV4Config, B: int) -> dict:
    """Official-spelling config.json. official_config() only accepts HCA rate 128 (transformers maps only
    the per-layer ratios 0 / 4 / 128); tiny-v4's HCA rate is 16, so the per-layer `compress_ratios` are
    written directly (same spelling as tests/unit/model_test_util.h's tiny_official_config)."""
    c128 = base.build_config({**SOURCE["cfg"], "compress_rates": {CSA: 4, HCA: 128}})
    off = base.official_config(c128)
    ratio_of = {base.SLIDING: 0, CSA: cfg.compress_rates[CSA], HCA: cfg.compress_rates[HCA]}
    off["compress_ratios"] = [ratio_of[t] for t in cfg.layer_types] + [0]
    off["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                                  "weight_block_size": [B, B], "activation_scheme": "dynamic"}
    return off


def hf_loadable_config(off: dict) -> dict:
    """The same config in a form DeepseekV4Config can read (explicit layer_types + compress_rates)."""
    r2t = {0: base.SLIDING, 4: CSA}
    n = off["num_hidden_layers"]
    hca = sorted({r for r in off["compress_ratios"][:n] if r not in r2t})
    assert len(hca) == 1
    c = {k: v for k, v in off.items() if k != "compress_ratios"}
    c["layer_types"] = [r2t.get(r, HCA) for r in off["compress_ratios"][:n]]
    c["compress_rates"] = {CSA: 4, HCA: hca[0]}
    return c


def check_nearest(name: str, w: np.ndarray, qv: np.ndarray, lsb: np.ndarray, scale: np.ndarray, fp8: bool) -> int:
    """The file's value of every element is a nearest representable value of w / scale (half a gap at most),
    exact ties on the even code. Returns the number of exact ties."""
    x = w.astype(np.float64) / scale
    ax = np.abs(x)
    if fp8:        # e4m3: 3 mantissa bits, subnormal step 2^-9 below 2^-6
        half = np.where(ax < 2.0 ** -6, 2.0 ** -10, np.exp2(np.floor(np.log2(np.maximum(ax, 2.0 ** -6))) - 4))
    else:          # e2m1: steps 0.5 below 2, 1 in [2, 4), 2 in [4, 6]
        half = np.where(ax < 2.0, 0.25, np.where(ax < 4.0, 0.5, 1.0))
    err = np.abs(qv - x)
    assert (err <= half).all(), f"{name}: not nearest-rounded (worst {float((err / half).max())} half-steps)"
    assert (np.signbit(qv) == np.signbit(x)).all() or fp8, f"{name}: FP4 sign not kept"
    tie = err == half
    assert (lsb[tie] == 0).all(), f"{name}: a tie did not round to the even code"
    return int(tie.sum())


def bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype == np.float32:
        return np.array_equal(a.view(np.uint32), b.view(np.uint32))
    return np.array_equal(a, b)


@torch.no_grad()
def make_quantized_fixture(qfx: dict, out_root: str, src_dir: str, hand: dict) -> dict:
    name, B = qfx["name"], qfx["block"]
    log(f"\n=== {name} (FP8 block {B}x{B}, FP4 block 1x{FP4_BLOCK}) ===")
    folder = os.path.join(out_root, name)
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)

    # ---------------- the tiny-v4 model, exactly as make_dsv4_fixtures.py builds it ----------------
    fx = SOURCE
    torch.manual_seed(fx["seed"])
    cfg = base.build_config(fx["cfg"])
    model = base.new_model(cfg)
    base.init_weights(model, fx["seed"])
    g = torch.Generator().manual_seed(fx["seed"] + 1)
    ids = torch.randint(0, cfg.vocab_size, (1, fx["n_tokens"]), generator=g)
    n, P, chunks = fx["n_tokens"], fx["prefill"], fx["chunks"]

    src_golden = json.load(open(os.path.join(src_dir, "golden.json")))
    src_logits = np.fromfile(os.path.join(src_dir, "logits.f32"), dtype="<f4").reshape(n, cfg.vocab_size)
    assert src_golden["ids"] == ids[0].tolist(), "token ids differ from the tiny-v4 fixture"
    unq = base.run_full(model, ids)
    unq_vs_src = float(np.abs(unq.numpy() - src_logits).max())
    assert unq_vs_src == 0.0, f"rebuilt tiny-v4 model does not reproduce tiny-v4/logits.f32 ({unq_vs_src})"
    log("  rebuilt tiny-v4 model reproduces tiny-v4/logits.f32 bit for bit")

    # ---------------- quantize + dequantize ----------------
    off = official_fp32_state(model)
    gains = None
    if qfx["block_gains"]:
        gains = {}
        for t_idx, oname in enumerate(sorted(k for k in off if FP8_RE.match(k))):
            w = off[oname]
            nr, nc = -(-w.shape[0] // B), -(-w.shape[1] // B)
            nat = [[pow2_ceil_exponent(float(w[i * B:(i + 1) * B, j * B:(j + 1) * B].abs().max()), FP8_MAX)
                    for j in range(nc)] for i in range(nr)]
            kk = [[0] * nc for _ in range(nr)]
            for i in range(nr):
                for j in range(nc):
                    first = (i + 2 * j + t_idx) % 3
                    for c in range(3):                                # default first, then the next in order
                        kk[i][j] = (first + c) % 3 - 1
                        e = nat[i][j] + kk[i][j]
                        if (i == 0 or e != nat[i - 1][j] + kk[i - 1][j]) and (j == 0 or e != nat[i][j - 1] + kk[i][j - 1]):
                            break
                    else:
                        raise AssertionError("no block gain separates the scales")
            k = torch.tensor(kk, dtype=torch.float32)
            full = torch.exp2(k).repeat_interleave(B, 0)[: w.shape[0]].repeat_interleave(B, 1)[:, : w.shape[1]]
            off[oname] = w * full                                         # exact: powers of two
            gains[oname] = k.to(torch.int64).tolist()
        log(f"  power-of-two block gains (exponents in -1..1) applied to {len(gains)} FP8 tensors before quantization")
    file_tensors, deq = {}, {}
    fp8_names, fp4_names = [], []
    err = {"fp8": [0.0, 0.0], "fp4": [0.0, 0.0]}        # sum |dW|^2, sum |W|^2
    max_rel = {"fp8": 0.0, "fp4": 0.0}
    for oname in sorted(off):
        t = off[oname]
        if FP8_RE.match(oname):
            q, s = quantize_fp8(t, B)
            file_tensors[oname] = q
            file_tensors[oname[:-len(".weight")] + ".scale"] = s.view(torch.float8_e8m0fnu)
            deq[oname] = dequant_fp8_torch(q, s, B)
            fp8_names.append(oname)
            kind = "fp8"
        elif FP4_RE.match(oname):
            packed, s, code = quantize_fp4(t)
            file_tensors[oname] = packed
            file_tensors[oname[:-len(".weight")] + ".scale"] = s.view(torch.float8_e8m0fnu)
            deq[oname] = dequant_fp4_torch(code, s)
            fp4_names.append(oname)
            kind = "fp4"
        else:
            file_tensors[oname] = t
            deq[oname] = t
            continue
        d2, w2 = float(((deq[oname] - t) ** 2).sum()), float((t ** 2).sum())
        err[kind][0] += d2
        err[kind][1] += w2
        max_rel[kind] = max(max_rel[kind], math.sqrt(d2 / w2))
        assert not torch.equal(deq[oname], t), oname
    expect_fp8 = sum(8 + (lt == CSA) for lt in cfg.layer_types)
    expect_fp4 = cfg.num_hidden_layers * cfg.n_routed_experts * 3
    assert len(fp8_names) == expect_fp8 and len(fp4_names) == expect_fp4, (len(fp8_names), len(fp4_names))
    quant_error = {k: {"rel_rms_all": math.sqrt(v[0] / v[1]), "rel_rms_worst_tensor": max_rel[k]} for k, v in err.items()}
    log(f"  quantized {len(fp8_names)} FP8 + {len(fp4_names)} FP4 tensors; relative RMS error {quant_error}")

    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(base.from_official_state(model, deq), strict=True)
    changed = sorted(k for k, v in model.state_dict().items() if not torch.equal(v, before[k]))
    expect_changed = {k for k in before if re.search(r"(q_a_proj|q_b_proj|self_attn\.kv_proj|o_a_proj|o_b_proj|"
                                                     r"shared_experts\.\w+_proj|experts\.gate_up_proj|experts\.down_proj)", k)
                      and "compressor.kv_proj" not in k}
    assert set(changed) == expect_changed, sorted(set(changed) ^ expect_changed)
    log(f"  loaded dequantized weights: {len(changed)} HF tensors changed, all others bit-identical")

    # ---------------- transformers on the dequantized weights ----------------
    probes = base.Probes(model)
    ref = base.run_full(model, ids)
    ties_full = sorted(probes.ties)
    clamp = probes.clamp_summary()
    bias_changed = {str(k): v for k, v in sorted(probes.bias_changed.items())}
    router_min_gap = probes.router_min_gap
    idx_gap, idx_gap_at = probes.index_min_gap, probes.index_min_gap_at
    idx_checked, idx_zero = probes.index_positions_checked, probes.index_boundary_zero
    probes.active = False
    inc = base.run_incremental(model, ids, P)
    ch = base.run_chunked(model, ids, chunks)
    ties_all = sorted(probes.ties)
    probes.remove()
    d_inc = base.check_close(ref, inc, "incremental")
    d_ch = base.check_close(ref, ch, "chunked")
    cache = DynamicCache(config=model.config)
    single = model(ids, past_key_values=cache, use_cache=True).logits[0].float()
    d_single = float((single - ref).abs().max())
    if ties_full or ties_all:
        raise AssertionError(f"{name}: indexer ties at the top-k boundary: {ties_full} / {ties_all}")
    for kind in ("routed", "shared"):
        for key in ("gate_gt_limit", "up_gt_limit", "up_lt_neg_limit"):
            assert clamp[kind][key] > 0, f"{name}: clamp {kind}.{key} never active"
    assert sum(v[0] for v in probes.bias_changed.values()) > 0, f"{name}: router bias never changes a selection"

    vs_src = np.abs(ref.numpy() - src_logits)
    argmax_changed = int((ref.numpy().argmax(-1) != src_logits.argmax(-1)).sum())
    assert float(vs_src.max()) > 0.0, "quantization did not change the logits"
    log(f"  logits vs tiny-v4 (unquantized): max |diff| {vs_src.max():.6g}, mean |diff| {vs_src.mean():.4g}, "
        f"argmax changed at {argmax_changed}/{n} positions")

    # ---------------- write ----------------
    off_cfg = fixture_config_json(cfg, B)
    hf_cfg = hf_loadable_config(off_cfg)
    base.check_official_roundtrip({k: v for k, v in hf_cfg.items() if k != "quantization_config"}, cfg)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(off_cfg, f, indent=2)
        f.write("\n")
    st_path = os.path.join(folder, "model.safetensors")
    save_file(file_tensors, st_path, metadata={"format": "pt"})
    logits_path = os.path.join(folder, "logits.f32")
    ref.numpy().astype("<f4").tofile(logits_path)

    # ---------------- self-checks on what was written ----------------
    # (1) independent decode of the raw file == the values transformers ran on, bit for bit
    dec, info = decode_checkpoint(st_path, B)
    assert sorted(info["fp8"]) == fp8_names and sorted(info["fp4"]) == fp4_names
    multi = {k: v for k, v in info["fp8_scale_grids"].items() if v.size > 1}
    uniform = sorted(k for k, v in multi.items() if len(np.unique(v)) == 1)
    adjacent_equal = sum(int((v[1:, :] == v[:-1, :]).sum() + (v[:, 1:] == v[:, :-1]).sum()) for v in multi.values())
    adjacent_pairs = sum((v.shape[0] - 1) * v.shape[1] + v.shape[0] * (v.shape[1] - 1) for v in multi.values())
    scale_grid_stats = {"fp8_multi_block_tensors": len(multi), "fp8_multi_block_tensors_with_one_scale_value": len(uniform),
                        "fp8_adjacent_blocks_with_equal_scale": [adjacent_equal, adjacent_pairs]}
    log(f"  FP8 scale grids: {scale_grid_stats}")
    if qfx["block_gains"]:
        assert not uniform and adjacent_equal == 0, (uniform, adjacent_equal)
    assert set(dec) == set(off), set(dec) ^ set(off)
    sd = model.state_dict()
    n_cmp = 0
    for hname, targets in base.official_name_map(model).items():
        for oname, sl in targets:
            mine = sl(sd[hname]).contiguous().numpy()
            assert bits_equal(dec[oname], mine), f"{oname}: decoded file != model tensor"
            n_cmp += 1
    assert n_cmp == len(off)
    ties = {"fp8": 0, "fp4": 0}
    for oname in fp8_names + fp4_names:
        qv, lsb, full = info["q"][oname]
        kind = "fp8" if oname in fp8_names else "fp4"
        ties[kind] += check_nearest(oname, off[oname].numpy(), qv, lsb, full, kind == "fp8")
    log(f"  every stored value is a nearest e4m3 / e2m1 value of (weight / its scale), exact ties {ties} on even codes; "
        f"every scale is the smallest power of two that fits its block")
    raw = info["raw"]
    dt_count = defaultdict(int)
    for k, (dt, _shape) in raw.items():
        dt_count[dt] += 1
    assert dt_count["F8_E4M3"] == len(fp8_names) and dt_count["I8"] == len(fp4_names)
    assert dt_count["F8_E8M0"] == len(fp8_names) + len(fp4_names)
    log(f"  independent numpy decode of model.safetensors == model weights bit for bit ({n_cmp} tensors); "
        f"dtypes {dict(dt_count)}; e8m0 bytes in [{info['scale_bytes_min']}, {info['scale_bytes_max']}] (< 255)")
    # (2) a fresh model built from config.json + the decoded file reproduces the golden logits exactly
    c2 = DeepseekV4Config.from_dict(hf_loadable_config(json.load(open(os.path.join(folder, "config.json")))))
    m2 = base.new_model(c2)
    m2.load_state_dict(base.from_official_state(m2, {k: torch.from_numpy(v.copy()) for k, v in dec.items()}), strict=True)
    reload_own = float((base.run_full(m2.eval(), ids) - ref).abs().max())
    assert reload_own == 0.0, reload_own
    log(f"  fresh model from config.json + decoded file: max |diff| vs golden {reload_own}")
    # (3) informational: transformers' own FP8/FP4 dequantizing loader (FineGrainedFP8, dequantize=True)
    hf_reload = hf_dequant_reload(folder, hf_cfg, ids, ref)
    log(f"  transformers' own loader (FineGrainedFP8 dequantize=True, official-name conversion): max |diff| vs golden {hf_reload}")

    # ---------------- golden ----------------
    golden = {
        "fixture": name,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "safetensors_version": safetensors.__version__,
        "accelerate_version": __import__("accelerate").__version__,
        "seed": fx["seed"],
        "ids": ids[0].tolist(),
        "vocab_size": cfg.vocab_size,
        "n_tokens": n,
        "prefill": P,
        "chunks": chunks,
        "hf_incremental_max_abs_diff": d_inc,
        "hf_chunked_max_abs_diff": d_ch,
        "use_cache_single_pass_max_abs_diff": d_single,
        "indexer_ties": [list(x) for x in ties_full],
        "weights_dtype": ("FP8 e4m3 (F8_E4M3) + ue8m0 block scales (F8_E8M0) for the `quantized.fp8` tensors; "
                          "FP4 e2m1 packed 2 per byte (I8) + ue8m0 scales per 32 values (F8_E8M0) for the "
                          "`quantized.fp4` tensors; every other tensor float32 (tid2eid int64)"),
        "tensor_names_style": "official DeepSeek checkpoint names (embed.weight, layers.N.attn.wq_a.weight, "
                              "layers.N.attn.wq_a.scale, ...), no 'model.' prefix",
        "notes": (
            "Model, ids, prefill and chunks of tiny-v4 (same seed)"
            + (" with power-of-two FP8 block gains (see fp8_block_gains)" if gains is not None else "")
            + ". The quantized tensors were dequantized back "
            "to float32 (W = e4m3(q) * 2^(s-127), resp. e2m1(n) * 2^(s-127)) and loaded into transformers "
            "DeepseekV4ForCausalLM; logits.f32 = its (ids, use_cache=False).logits[0], float32, eager attention, "
            "eager experts, CPU, TF32 off. incremental = prefill `prefill` tokens with DynamicCache(config) then "
            "one token at a time; chunked = consecutive calls with `chunks` token counts. config.json spells the "
            "per-layer compress_ratios with HCA 16, which DeepseekV4Config itself cannot map (only 0/4/128). "
            "See tools/reference/README.md."
        ),
        "logits_shape": [n, cfg.vocab_size],
        "logits_sha256": base.sha256(logits_path),
        "max_abs_logit": float(ref.abs().max()),
        "clamp_fractions": clamp,
        "bias_changed_selections": bias_changed,
        "router_min_topk_gap": router_min_gap,
        "indexer_positions_checked": idx_checked,
        "indexer_min_rel_gap_at_k": idx_gap,
        "indexer_min_rel_gap_at": list(idx_gap_at) if idx_gap_at else None,
        "indexer_zero_score_at_k_plus_1": idx_zero,
        "quantized": {"fp8": fp8_names, "fp4": fp4_names, "block": B},
        "fp8_block_gains": (None if gains is None else {
            "rule": "before quantization, FP8 block (i, j) of each quantized.fp8 tensor was multiplied by 2^k "
                    "(exact), k = exponents[name][i][j] in -1..1: by default (i + 2j + t) % 3 - 1 (t = index of the "
                    "tensor in quantized.fp8), else the next value in that cycle that gives the block a scale "
                    "different from its upper and left neighbours'. The model is tiny-v4 with these gains.",
            "exponents": gains}),
        "scale_grid_stats": scale_grid_stats,
        "quantization": {
            "fp8": f"per {B}x{B} block of [out, in] (last block partial when a dim is not a multiple of {B}): "
                   "scale = 2^e, e = smallest integer with amax <= 448 * 2^e (ceil(log2(amax/448)), exact); "
                   "q = float8_e4m3fn(w / scale), round to nearest even (torch .to)",
            "fp4": "per 32 consecutive values of a row: scale = 2^e, e = smallest integer with amax <= 6 * 2^e; "
                   "q = nearest e2m1 value of w / scale, exact ties to the even code (0.25->0, 0.75->1, 1.25->1, "
                   "1.75->2, 2.5->2, 3.5->4, 5->4), sign kept (tiny negatives -> code 8 = -0); "
                   "byte k of a row = code[2k] | code[2k+1] << 4",
            "scale_byte": "e + 127 (float8_e8m0fnu); an all-zero block would get byte 127 (scale 1); none occurs",
            "relative_rms_error": quant_error,
            "scale_bytes_range": [info["scale_bytes_min"], info["scale_bytes_max"]],
        },
        "scale_dtype_written": "F8_E8M0 (safetensors %s writes float8_e8m0fnu natively)" % safetensors.__version__,
        "format_checks": hand,
        "official_tensor_dtypes": dict(sorted(dt_count.items())),
        "unquantized_tiny_v4_reproduced_max_abs_diff": unq_vs_src,
        "vs_tiny_v4_logits_max_abs_diff": float(vs_src.max()),
        "vs_tiny_v4_logits_mean_abs_diff": float(vs_src.mean()),
        "vs_tiny_v4_argmax_changed_positions": argmax_changed,
        "official_config_roundtrip": ("DeepseekV4Config.from_dict(config.json with compress_ratios -> "
                                      "layer_types + compress_rates) reproduces the tiny-v4 config and inv_freq tables"),
        "reload_own_mapping_max_abs_diff": reload_own,
        "reload_hf_conversion_max_abs_diff": hf_reload,
    }
    with open(os.path.join(folder, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")

    sizes = {fn: os.path.getsize(os.path.join(folder, fn)) for fn in sorted(os.listdir(folder))}
    log(f"  max |logit| {golden['max_abs_logit']:.4f}; HF incremental vs full {d_inc:.3g}, chunked {d_ch:.3g}, "
        f"single cached pass {d_single:.3g}")
    log(f"  indexer: positions checked {idx_checked}, min rel gap at k {idx_gap:.3g} at {idx_gap_at}, "
        f"zero score at k+1 {idx_zero}")
    for kind in ("routed", "shared"):
        c = clamp[kind]
        log(f"  clamp {kind:6s} gate>L {c['gate_gt_limit']:.3%}  up>L {c['up_gt_limit']:.3%}  "
            f"up<-L {c['up_lt_neg_limit']:.3%}")
    log(f"  bias changed selections {bias_changed}; router min gap {router_min_gap:.3g}")
    log("  files: " + ", ".join(f"{k} {v} B" for k, v in sizes.items()))
    log(f"  total {sum(sizes.values()) / 1024:.1f} KiB; logits sha256 {golden['logits_sha256']}")
    return {"name": name, "bytes": sum(sizes.values()), "logits_sha256": golden["logits_sha256"]}


def hf_dequant_reload(folder, hf_cfg, ids, ref):
    """transformers' FineGrainedFP8 loader with dequantize=True (the CPU path) on a copy of the fixture whose
    config.json DeepseekV4Config can read (transformers' FP8 loader needs accelerate, checked in main())."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = dict(hf_cfg)
        cfg["quantization_config"] = {**cfg["quantization_config"], "dequantize": True}
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(cfg, f)
        os.symlink(os.path.abspath(os.path.join(folder, "model.safetensors")), os.path.join(tmp, "model.safetensors"))
        m = DeepseekV4ForCausalLM.from_pretrained(tmp, dtype=torch.float32, attn_implementation="eager",
                                                  experts_implementation="eager").eval()
        bad = [k for k, v in m.state_dict().items() if v.is_floating_point() and v.dtype != torch.float32]
        assert not bad, f"transformers' dequantizing load left non-float32 tensors: {bad[:4]}"
        d = float((base.run_full(m, ids) - ref).abs().max())
        assert d == 0.0, f"transformers' own dequantization gives other logits: max |diff| {d}"
        return d


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output root, e.g. tests/fixtures/dsv4")
    ap.add_argument("--source", help="the tiny-v4 fixture folder to check against (default: <out>/tiny-v4)")
    ap.add_argument("--only", nargs="*", help="fixture names to build (default: all)")
    args = ap.parse_args()

    try:
        import accelerate  # noqa: F401  (transformers' FP8 loader, used by the reload cross-check)
    except ImportError:
        sys.exit("need accelerate (pip install accelerate==1.15.0) for transformers' FP8 dequantizing loader")
    base.prepare_reference_run()
    src_dir = args.source or os.path.join(args.out, SOURCE["name"])
    assert os.path.isfile(os.path.join(src_dir, "logits.f32")), f"need the tiny-v4 fixture at {src_dir}"
    hand = hand_checks()
    results = []
    for q in QUANTIZED_FIXTURES:
        if args.only and q["name"] not in args.only:
            continue
        results.append(make_quantized_fixture(q, args.out, src_dir, hand))
    log("\n=== done ===")
    for r in results:
        log(f"  {r['name']:28s} {r['bytes'] / 1024:8.1f} KiB  logits sha256 {r['logits_sha256']}")


if __name__ == "__main__":
    main()
