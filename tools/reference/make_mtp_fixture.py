#!/usr/bin/env python3
"""Golden fixture for the DeepSeek-V4 MTP (multi-token prediction) block, built from transformers' parts.

transformers 5.17.0 has no MTP class (DeepseekV4PreTrainedModel ignores `mtp.*` on load), so this
script assembles DeepSeek's MTPBlock (official inference/model.py; vLLM DeepSeekV4MultiTokenPredictorLayer)
from transformers' own DeepSeek-V4 modules:

    e  = enorm(embed_tokens[next_id])                                   DeepseekV4RMSNorm, main embedding
    Xm = e_proj(e) (broadcast over hc_mult streams) + h_proj(hnorm(H))  nn.Linear, DeepseekV4RMSNorm per stream
    Xm = DeepseekV4DecoderLayer(Xm)        sliding attention (compress ratio 0), own cache, top-k MoE with bias
    logits = lm_head(norm(hc_head(Xm)))    DeepseekV4HyperHead (own), DeepseekV4RMSNorm (own), main lm_head

H_t = the main model's residual streams at position t before its hyper-head; slot t pairs H_t with
ids[t+1] at RoPE position t.

The main model is the `tiny-v4` fixture of make_dsv4_fixtures.py (same config, seed, ids; checked bit for
bit against <dsv4>/tiny-v4/logits.f32). Writes one folder:

    <out>/tiny-v4-mtp/config.json         official keys, num_nextn_predict_layers 1
    <out>/tiny-v4-mtp/model.safetensors   main weights + mtp.0.* under official names, F32 (tid2eid I64)
    <out>/tiny-v4-mtp/golden.json         ids, versions, seeds, MTP tensor list, checks
    <out>/tiny-v4-mtp/main_streams.f32    little-endian float32 [n, hc_mult, hidden]
    <out>/tiny-v4-mtp/mtp_logits.f32      little-endian float32 [n-1, vocab]
    <out>/tiny-v4-mtp/mtp_streams.f32     little-endian float32 [n-1, hc_mult, hidden]

Usage:  python tools/reference/make_mtp_fixture.py --out tests/fixtures/dsv4-mtp
See tools/reference/README.md ("DeepSeek-V4 MTP fixture").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_dsv4_fixtures as base  # noqa: E402  (same folder; nothing runs on import)
import make_dsv4_quantized_fixtures as qbase  # noqa: E402  (official F32 state + HCA-16 official config)

import safetensors  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM  # noqa: E402
from transformers.cache_utils import DynamicCache, DynamicSlidingWindowLayer  # noqa: E402
from transformers.masking_utils import create_sliding_window_causal_mask  # noqa: E402
from transformers.models.deepseek_v4.modeling_deepseek_v4 import (  # noqa: E402
    DeepseekV4DecoderLayer,
    DeepseekV4HyperHead,
    DeepseekV4RMSNorm,
    DeepseekV4RotaryEmbedding,
    DeepseekV4TopKRouter,
)

SLIDING, CSA, HCA = base.SLIDING, base.CSA, base.HCA
log = base.log

SOURCE = base.FIXTURES[0]                      # tiny-v4: config, seed, ids
assert SOURCE["name"] == "tiny-v4"
FIXTURE_NAME = "tiny-v4-mtp"
MTP_SEED = 4321                                # the MTP block's weights (main model keeps seed 1234)
MTP_CHUNKS = [5, 1, 9, 3, 8, 2, 13, 7, 15]     # 63 slots; cuts the 8-slot window at odd places
MIN_LOGIT_STD = 0.5                            # per slot, across the vocabulary
MIN_DISTINCT_ARGMAX = 16                       # over the 63 slots
MTP_CACHED_TOL = 1e-5
SPEC_TOL = 1e-4                                # float64 spec re-implementation vs transformers float32


# --------------------------------------------------------------------------------------
# The MTP block
# --------------------------------------------------------------------------------------


def mtp_config(main_cfg: DeepseekV4Config) -> DeepseekV4Config:
    """The main config with one decoder layer: sliding attention (compress ratio 0) and a top-k MoE."""
    d = main_cfg.to_dict()
    d.update(num_hidden_layers=1, layer_types=[SLIDING], mlp_layer_types=["moe"])
    c = DeepseekV4Config.from_dict(d)
    c._attn_implementation = "eager"
    c._experts_implementation = "eager"
    for k in ("hidden_size", "sliding_window", "hc_mult", "rms_norm_eps", "hc_eps", "n_routed_experts",
              "num_experts_per_tok", "scoring_func", "routed_scaling_factor", "swiglu_limit", "moe_intermediate_size",
              "num_attention_heads", "head_dim", "q_lora_rank", "o_groups", "o_lora_rank", "partial_rotary_factor",
              "rope_theta", "n_shared_experts", "hc_sinkhorn_iters", "vocab_size"):
        assert getattr(c, k) == getattr(main_cfg, k), k
    assert c.layer_types == [SLIDING] and c.mlp_layer_types == ["moe"] and c.num_hidden_layers == 1
    return c


class MTPBlock(nn.Module):
    """DeepSeek's MTPBlock from transformers parts. embed / lm_head / rotary are the main model's (not owned)."""

    def __init__(self, cfg: DeepseekV4Config):
        super().__init__()
        self.config = cfg
        D, eps = cfg.hidden_size, cfg.rms_norm_eps
        self.enorm = DeepseekV4RMSNorm(D, eps=eps)
        self.hnorm = DeepseekV4RMSNorm(D, eps=eps)
        self.e_proj = nn.Linear(D, D, bias=False)
        self.h_proj = nn.Linear(D, D, bias=False)
        self.layer = DeepseekV4DecoderLayer(cfg, 0)          # layer 0 of the 1-layer MTP config
        self.hc_head = DeepseekV4HyperHead(cfg)
        self.norm = DeepseekV4RMSNorm(D, eps=eps)
        assert self.layer.self_attn.layer_type == SLIDING and self.layer.self_attn.compressor is None
        assert self.layer.self_attn.rope_layer_type == "main"
        assert not self.layer.mlp.is_hash and isinstance(self.layer.mlp.gate, DeepseekV4TopKRouter)

    def forward(self, H, next_ids, position_ids, main, cache=None):
        """H [1, S, hc, D] main streams, next_ids [1, S], position_ids [1, S] -> (streams [1,S,hc,D], logits [1,S,V])."""
        mm = main.model
        e = self.enorm(mm.embed_tokens(next_ids))                                   # [1, S, D]
        x = self.e_proj(e).unsqueeze(2) + self.h_proj(self.hnorm(H))               # [1, S, hc, D]
        # exactly how DeepseekV4Model.forward builds its mask and RoPE tables, with the MTP's own cache
        mask = create_sliding_window_causal_mask(config=self.config, inputs_embeds=e, attention_mask=None,
                                                 past_key_values=cache, position_ids=position_ids)
        pe = {"main": mm.rotary_emb(e, position_ids=position_ids, layer_type="main"),
              "compress": mm.rotary_emb(e, position_ids=position_ids, layer_type="compress")}
        x = self.layer(x, position_embeddings=pe, position_ids=position_ids, attention_mask=mask,
                       input_ids=next_ids, past_key_values=cache)
        logits = main.lm_head(self.norm(self.hc_head(x)))
        return x, logits


@torch.no_grad()
def mtp_full(mtp, main, H, ids):
    n = ids.shape[1]
    pos = torch.arange(n - 1).unsqueeze(0)
    x, lg = mtp(H[:, : n - 1], ids[:, 1:], pos, main, cache=None)
    return x[0].clone(), lg[0].clone()


@torch.no_grad()
def mtp_chunked(mtp, main, H, ids, chunks):
    """Consecutive calls with one DynamicCache(config=mtp_config); chunks of 1 = slot-at-a-time decoding."""
    n = ids.shape[1]
    assert sum(chunks) == n - 1
    cache = DynamicCache(config=mtp.config)
    assert len(cache.layers) == 1 and isinstance(cache.layers[0], DynamicSlidingWindowLayer)
    xs, ls, p = [], [], 0
    for c in chunks:
        pos = torch.arange(p, p + c).unsqueeze(0)
        x, lg = mtp(H[:, p:p + c], ids[:, p + 1:p + 1 + c], pos, main, cache=cache)
        xs.append(x[0])
        ls.append(lg[0])
        p += c
    kept = cache.layers[0].keys.shape[-2]
    return torch.cat(xs, 0), torch.cat(ls, 0), kept


# --------------------------------------------------------------------------------------
# Official names
# --------------------------------------------------------------------------------------

MTP_EXTRA = {"e_proj.weight": "e_proj.weight", "h_proj.weight": "h_proj.weight",
             "enorm.weight": "enorm.weight", "hnorm.weight": "hnorm.weight"}


def mtp_official_name_map(mtp: MTPBlock) -> dict:
    """MTP module name -> [(official mtp.0.* name, slicer)], via make_dsv4_fixtures.official_name_map on a stand-in
    model whose only layer is the MTP's decoder layer (`layers.0.` -> `mtp.0.`; `norm.weight` / `hc_head_*`
    -> `mtp.0.norm.weight` / `mtp.0.hc_head_*`) + the four MTP-only tensors."""
    sd = mtp.state_dict()
    as_main = {}                                   # stand-in main-model name -> MTP module name
    for k in sd:
        if k.startswith("layer."):
            as_main["model.layers.0." + k[len("layer."):]] = k
        elif k.startswith("hc_head.") or k == "norm.weight":
            as_main["model." + k] = k
        else:
            assert k in MTP_EXTRA, k
    stand_in = SimpleNamespace(config=mtp.config, state_dict=lambda: {m: sd[k] for m, k in as_main.items()})
    out = {}
    for m, targets in base.official_name_map(stand_in).items():
        ren = []
        for oname, sl in targets:
            oname = "mtp.0." + (oname[len("layers.0."):] if oname.startswith("layers.0.") else oname)
            ren.append((oname, sl))
        out[as_main[m]] = ren
    for k, o in MTP_EXTRA.items():
        out[k] = [("mtp.0." + o, lambda t: t)]
    assert set(out) == set(sd)
    return out


def mtp_official_state(mtp: MTPBlock) -> dict:
    sd = mtp.state_dict()
    return {o: sl(sd[k]).detach().contiguous().clone() for k, tg in mtp_official_name_map(mtp).items() for o, sl in tg}


def mtp_from_official(mtp: MTPBlock, off: dict) -> dict:
    """Inverse of mtp_official_state (experts re-stacked: gate_up = cat(w1, w3) rows, down = w2)."""
    sd = {}
    for k, targets in mtp_official_name_map(mtp).items():
        if k.endswith("mlp.experts.gate_up_proj"):
            E = len(targets) // 2
            sd[k] = torch.stack([torch.cat([off[targets[2 * e][0]], off[targets[2 * e + 1][0]]], 0) for e in range(E)])
        elif k.endswith("mlp.experts.down_proj"):
            sd[k] = torch.stack([off[o] for o, _ in targets])
        else:
            (o, _), = targets
            sd[k] = off[o]
    return sd


# --------------------------------------------------------------------------------------
# Independent check: the MTP math of docs/dsv4-model.md §3/§4/§6/§7, float64, official tensors only
# --------------------------------------------------------------------------------------


@torch.no_grad()
def spec_mtp(off: dict, cfg: DeepseekV4Config, H: torch.Tensor, ids: torch.Tensor):
    """Plain-torch float64 MTP over the full sequence from the official tensors (`embed.weight`, `head.weight`,
    `mtp.0.*`) alone: no transformers module. H [n, hc, D]; returns (streams [n-1, hc, D], logits [n-1, V])."""
    T = {k: v.double() for k, v in off.items() if v.is_floating_point()}
    p = lambda k: T["mtp.0." + k]  # noqa: E731
    eps, hc_eps, nh, hd = cfg.rms_norm_eps, cfg.hc_eps, cfg.num_attention_heads, cfg.head_dim
    rd, W, G, L = cfg.qk_rope_head_dim, cfg.sliding_window, cfg.o_groups, cfg.swiglu_limit
    hcm, K, iters = cfg.hc_mult, cfg.num_experts_per_tok, cfg.hc_sinkhorn_iters
    rms = lambda x, w=None: x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps) * (1.0 if w is None else w)  # noqa: E731
    n = ids.shape[1] - 1
    pos = torch.arange(n, dtype=torch.float64)
    inv = cfg.rope_theta ** (-torch.arange(0, rd, 2, dtype=torch.float64) / rd)        # "main" RoPE, no YaRN
    ang = pos[:, None] * inv[None, :]                                                    # [n, rd/2]

    def rope(x, sign):                        # x [n, ..., hd]; interleaved pairs on the trailing rd dims
        c = torch.cos(ang).view(n, *([1] * (x.dim() - 2)), -1)
        sn = sign * torch.sin(ang).view(n, *([1] * (x.dim() - 2)), -1)
        a, b = x[..., hd - rd::2], x[..., hd - rd + 1::2]
        r = torch.stack([a * c - b * sn, b * c + a * sn], -1).flatten(-2)
        return torch.cat([x[..., :hd - rd], r], -1)

    def hc_site(X, pre_name):                 # X [n, hc, D]
        fn, base_, sc = p(f"hc_{pre_name}_fn"), p(f"hc_{pre_name}_base"), p(f"hc_{pre_name}_scale")
        m = rms(X.flatten(1)) @ fn.T
        pre = torch.sigmoid(m[:, :hcm] * sc[0] + base_[:hcm]) + hc_eps
        post = 2 * torch.sigmoid(m[:, hcm:2 * hcm] * sc[1] + base_[hcm:2 * hcm])
        C = (m[:, 2 * hcm:] * sc[2] + base_[2 * hcm:]).view(n, hcm, hcm)
        C = torch.softmax(C, -1) + hc_eps
        C = C / (C.sum(-2, keepdim=True) + hc_eps)
        for _ in range(iters - 1):
            C = C / (C.sum(-1, keepdim=True) + hc_eps)
            C = C / (C.sum(-2, keepdim=True) + hc_eps)
        u = (pre[:, :, None] * X).sum(1)
        return post, C, u

    def mix(X, post, C, y):                   # X_k <- post_k * y + sum_j C[j, k] X_j
        return post[:, :, None] * y[:, None, :] + torch.einsum("njk,njd->nkd", C, X)

    def swiglu(x, w1, w3, w2):
        return (torch.nn.functional.silu((x @ w1.T).clamp(max=L)) * (x @ w3.T).clamp(-L, L)) @ w2.T

    e = rms(T["embed.weight"][ids[0, 1:]], p("enorm.weight"))
    X = (e @ p("e_proj.weight").T)[:, None, :] + rms(H[:n].double(), p("hnorm.weight")) @ p("h_proj.weight").T
    # attention site
    post, C, u = hc_site(X, "attn")
    x = rms(u, p("attn_norm.weight"))
    q = (rms(x @ p("attn.wq_a.weight").T, p("attn.q_norm.weight")) @ p("attn.wq_b.weight").T).view(n, nh, hd)
    q = rope(rms(q), 1.0)
    kv = rope(rms(x @ p("attn.wkv.weight").T, p("attn.kv_norm.weight")), 1.0)          # [n, hd], K = V
    s = torch.einsum("thd,jd->thj", q, kv) / hd ** 0.5
    t_idx, j_idx = torch.arange(n)[:, None], torch.arange(n)[None, :]
    visible = (j_idx <= t_idx) & (j_idx > t_idx - W)
    s = s.masked_fill(~visible[:, None, :], float("-inf"))
    sink = p("attn.attn_sink")[None, :, None]
    mx = torch.maximum(s.max(-1, keepdim=True).values, sink)
    num = torch.exp(s - mx)
    prob = num / (num.sum(-1, keepdim=True) + torch.exp(sink - mx))
    o = rope(torch.einsum("thj,jd->thd", prob, kv), -1.0).reshape(n, G, -1)            # groups of heads
    wo_a = p("attn.wo_a.weight").view(G, -1, o.shape[-1])
    y = torch.einsum("ngi,gri->ngr", o, wo_a).reshape(n, -1) @ p("attn.wo_b.weight").T
    X = mix(X, post, C, y)
    # MoE site
    post, C, u = hc_site(X, "ffn")
    x = rms(u, p("ffn_norm.weight"))
    sc = torch.sqrt(torch.nn.functional.softplus(x @ p("ffn.gate.weight").T))
    idx = torch.topk(sc + p("ffn.gate.bias"), K, -1).indices
    w = sc.gather(1, idx)
    w = w / w.sum(-1, keepdim=True) * cfg.routed_scaling_factor
    y = swiglu(x, p("ffn.shared_experts.w1.weight"), p("ffn.shared_experts.w3.weight"), p("ffn.shared_experts.w2.weight"))
    for t in range(n):
        for k in range(K):
            ex = int(idx[t, k])
            y[t] += w[t, k] * swiglu(x[t:t + 1], p(f"ffn.experts.{ex}.w1.weight"), p(f"ffn.experts.{ex}.w3.weight"),
                                     p(f"ffn.experts.{ex}.w2.weight"))[0]
    X = mix(X, post, C, y)
    # hyper-head + norm + shared head
    m = rms(X.flatten(1)) @ p("hc_head_fn").T
    pre = torch.sigmoid(m * p("hc_head_scale") + p("hc_head_base")) + hc_eps
    h = (pre[:, :, None] * X).sum(1)
    return X, rms(h, p("norm.weight")) @ T["head.weight"].T


# --------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------


def build_main():
    fx = SOURCE
    torch.manual_seed(fx["seed"])
    cfg = base.build_config(fx["cfg"])
    model = base.new_model(cfg)
    base.init_weights(model, fx["seed"])
    g = torch.Generator().manual_seed(fx["seed"] + 1)
    ids = torch.randint(0, cfg.vocab_size, (1, fx["n_tokens"]), generator=g)
    return cfg, model, ids


@torch.no_grad()
def run_main_with_streams(model, ids):
    """Full-sequence main run; the hyper-head's input (= last decoder layer's output) captured by hooks."""
    cap = {}
    h1 = model.model.hc_head.register_forward_pre_hook(lambda m, a: cap.__setitem__("hc_head_in", a[0].clone()))
    h2 = model.model.layers[-1].register_forward_hook(lambda m, a, o: cap.__setitem__("last_layer_out", o.clone()))
    logits = model(ids, use_cache=False).logits[0].float().clone()
    h1.remove()
    h2.remove()
    assert torch.equal(cap["hc_head_in"], cap["last_layer_out"])
    S = cap["hc_head_in"]                                   # [1, n, hc, D]
    again = model.lm_head(model.model.norm(model.model.hc_head(S)))[0]
    assert torch.equal(again, logits), "captured streams do not reproduce the main logits"
    return S, logits


def make(out_root: str, src_dir: str) -> dict:
    folder = os.path.join(out_root, FIXTURE_NAME)
    log(f"\n=== {FIXTURE_NAME} ===")
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)

    # ---------------- main model (tiny-v4) ----------------
    cfg, model, ids = build_main()
    n, V, hc, D = ids.shape[1], cfg.vocab_size, cfg.hc_mult, cfg.hidden_size
    src_golden = json.load(open(os.path.join(src_dir, "golden.json")))
    src_logits = np.fromfile(os.path.join(src_dir, "logits.f32"), dtype="<f4").reshape(n, V)
    assert src_golden["ids"] == ids[0].tolist(), "token ids differ from the tiny-v4 fixture"
    H, main_logits = run_main_with_streams(model, ids)
    main_vs_src = float(np.abs(main_logits.numpy() - src_logits).max())
    assert np.array_equal(main_logits.numpy(), src_logits), f"main logits differ from tiny-v4 ({main_vs_src})"
    log(f"  main model reproduces {src_dir}/logits.f32 bit for bit; streams captured [n={n}, hc={hc}, D={D}]")

    # ---------------- MTP block ----------------
    mcfg = mtp_config(cfg)
    torch.manual_seed(MTP_SEED)                     # only the constructors use it; every tensor is overwritten
    mtp = MTPBlock(mcfg).float().eval()
    base.init_weights(mtp, MTP_SEED)                # same rules as the main model (norms, sinks, HC, bias, gains)
    r = DeepseekV4RotaryEmbedding(mcfg)
    assert torch.equal(r.main_inv_freq, model.model.rotary_emb.main_inv_freq)
    assert n - 1 > mcfg.sliding_window

    probes = base.Probes(SimpleNamespace(config=mcfg, model=SimpleNamespace(layers=[mtp.layer])))
    x_full, l_full = mtp_full(mtp, model, H, ids)
    clamp = probes.clamp_summary()
    bias_changed = {str(k): v for k, v in sorted(probes.bias_changed.items())}
    router_min_gap = probes.router_min_gap
    probes.remove()
    for kind in ("routed", "shared"):
        for key in ("gate_gt_limit", "up_gt_limit", "up_lt_neg_limit"):
            assert clamp[kind][key] > 0, f"MTP clamp {kind}.{key} never active"
    assert sum(v[0] for v in probes.bias_changed.values()) > 0, "MTP gate.bias never changes a selection"

    x_inc, l_inc, kept_inc = mtp_chunked(mtp, model, H, ids, [1] * (n - 1))
    x_ch, l_ch, kept_ch = mtp_chunked(mtp, model, H, ids, MTP_CHUNKS)
    assert kept_inc == kept_ch == mcfg.sliding_window - 1
    d = {
        "incremental_logits": float((l_inc - l_full).abs().max()),
        "incremental_streams": float((x_inc - x_full).abs().max()),
        "chunked_logits": float((l_ch - l_full).abs().max()),
        "chunked_streams": float((x_ch - x_full).abs().max()),
    }
    for k, v in d.items():
        assert v <= MTP_CACHED_TOL, f"MTP {k} cached vs full max |diff| {v} > {MTP_CACHED_TOL}"

    std = l_full.std(dim=-1)
    amax = l_full.argmax(-1)
    distinct = int(amax.unique().numel())
    assert float(std.min()) > MIN_LOGIT_STD, f"MTP logits nearly flat: min std {float(std.min())}"
    assert distinct >= MIN_DISTINCT_ARGMAX, f"MTP argmax varies too little: {distinct} distinct"
    # the MTP logits must not be a copy of the main model's next-position logits
    vs_main = float((l_full - main_logits[1:]).abs().max())
    assert vs_main > 1.0
    argmax_eq_main_next = int((amax == main_logits[1:].argmax(-1)).sum())

    # ---------------- write ----------------
    off_cfg = qbase.fixture_config_json(cfg, 128)
    del off_cfg["quantization_config"]
    off_cfg["num_nextn_predict_layers"] = 1
    off_cfg["torch_dtype"] = "float32"                                 # every tensor here is F32 (tid2eid I64)
    assert off_cfg["compress_ratios"] == [0, 0, 4, 16, 4, 16, 0]       # trailing 0 = the MTP layer (sliding)
    hf_cfg = qbase.hf_loadable_config(off_cfg)
    # same attribute / rope / inv_freq checks as the official-bf16 fixture, on the HF-readable spelling
    c2 = base.check_official_roundtrip(hf_cfg, cfg)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(off_cfg, f, indent=2)
        f.write("\n")

    main_off = qbase.official_fp32_state(model)
    mtp_off = mtp_official_state(mtp)
    assert not set(main_off) & set(mtp_off)
    tensors = {**main_off, **mtp_off}
    for k, v in tensors.items():
        assert v.dtype == (torch.int64 if k.endswith("tid2eid") else torch.float32), (k, v.dtype)
    st_path = os.path.join(folder, "model.safetensors")
    save_file(tensors, st_path, metadata={"format": "pt"})

    # main streams (input H), MTP logits and output streams
    H[0].numpy().astype("<f4").tofile(os.path.join(folder, "main_streams.f32"))
    l_full.numpy().astype("<f4").tofile(os.path.join(folder, "mtp_logits.f32"))
    x_full.numpy().astype("<f4").tofile(os.path.join(folder, "mtp_streams.f32"))

    # ---------------- re-read ----------------
    back = load_file(st_path)
    assert set(back) == set(tensors)
    for k, v in tensors.items():
        assert back[k].dtype == v.dtype and torch.equal(back[k], v), k
    m2 = base.new_model(c2)
    m2.load_state_dict(base.from_official_state(m2, {k: v for k, v in back.items() if not k.startswith("mtp.")}),
                       strict=True)
    H2, main2 = run_main_with_streams(m2.eval(), ids)
    reload_own = {"main_logits": float((main2 - main_logits).abs().max()), "main_streams": float((H2 - H).abs().max())}
    assert torch.equal(main2, main_logits) and torch.equal(H2, H)
    mtp2 = MTPBlock(mtp_config(c2)).float().eval()
    mtp2.load_state_dict(mtp_from_official(mtp2, {k: v for k, v in back.items() if k.startswith("mtp.")}), strict=True)
    x2, l2 = mtp_full(mtp2, m2, H2, ids)
    reload_own.update(mtp_logits=float((l2 - l_full).abs().max()), mtp_streams=float((x2 - x_full).abs().max()))
    assert torch.equal(x2, x_full) and torch.equal(l2, l_full)
    for k, v in mtp.state_dict().items():
        assert torch.equal(mtp2.state_dict()[k], v), k
    # independent float64 re-implementation of the spec from the file's tensors
    x_spec, l_spec = spec_mtp(back, cfg, H[0], ids)
    spec_diff = {"logits": float((l_spec - l_full.double()).abs().max()),
                 "streams": float((x_spec - x_full.double()).abs().max())}
    assert spec_diff["logits"] < SPEC_TOL and spec_diff["streams"] < SPEC_TOL, f"spec re-implementation: {spec_diff}"
    # transformers' own loader on the official names (mtp.* ignored: _keys_to_ignore_on_load_unexpected)
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(hf_cfg, f)
        os.symlink(os.path.abspath(st_path), os.path.join(tmp, "model.safetensors"))
        m3 = DeepseekV4ForCausalLM.from_pretrained(tmp, dtype=torch.float32, attn_implementation="eager",
                                                   experts_implementation="eager").eval()
        H3, main3 = run_main_with_streams(m3, ids)
    hf_reload = float((main3 - main_logits).abs().max())
    assert hf_reload == 0.0 and torch.equal(H3, H)
    # the binary files read back
    rb = lambda fn, shape: np.fromfile(os.path.join(folder, fn), dtype="<f4").reshape(shape)  # noqa: E731
    assert np.array_equal(rb("main_streams.f32", (n, hc, D)), H[0].numpy())
    assert np.array_equal(rb("mtp_logits.f32", (n - 1, V)), l_full.numpy())
    assert np.array_equal(rb("mtp_streams.f32", (n - 1, hc, D)), x_full.numpy())

    # ---------------- golden.json ----------------
    mtp_list = {k: [str(v.dtype).replace("torch.", ""), list(v.shape)] for k, v in sorted(mtp_off.items())}
    golden = {
        "fixture": FIXTURE_NAME,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "safetensors_version": safetensors.__version__,
        "main_fixture": "tiny-v4",
        "seed": SOURCE["seed"],
        "mtp_seed": MTP_SEED,
        "ids": ids[0].tolist(),
        "vocab_size": V,
        "n_tokens": n,
        "n_slots": n - 1,
        "hc_mult": hc,
        "hidden_size": D,
        "sliding_window": mcfg.sliding_window,
        "pairing": "slot t (0..n-2): H = main_streams[t], next id = ids[t+1], RoPE position t",
        "files": {
            "main_streams.f32": f"little-endian float32 [{n}, {hc}, {D}]: main model residual streams before "
                                "its hyper-head (input of hc_head), use_cache=False run",
            "mtp_logits.f32": f"little-endian float32 [{n - 1}, {V}]: MTP logits of slots 0..{n - 2}, full sequence",
            "mtp_streams.f32": f"little-endian float32 [{n - 1}, {hc}, {D}]: MTP block output streams before its "
                               "hyper-head (what chained drafting feeds back as H)",
        },
        "math": [
            "e = RMSNorm_enorm(embed[next_id])",
            "Xm = e_proj(e) broadcast to all hc_mult streams + h_proj(RMSNorm_hnorm(H)) per stream",
            "Xm = DecoderLayer_mtp(Xm): sliding attention (main RoPE, own window cache), top-k MoE with gate.bias, "
            "attn_hc / ffn_hc mHC sites",
            "logits = head(RMSNorm_norm(HyperHead_mtp(Xm)))   (embed and head shared with the main model)",
        ],
        "mtp_tensors": mtp_list,
        "n_mtp_tensors": len(mtp_list),
        "n_main_tensors": len(main_off),
        "weights_dtype": "float32 (main ffn.gate.tid2eid int64)",
        "tensor_names_style": "official DeepSeek checkpoint names (embed.weight, layers.N.*, mtp.0.*), no 'model.' prefix",
        "checks": {
            "main_logits_equal_tiny_v4": main_vs_src == 0.0,
            "main_logits_vs_tiny_v4_max_abs_diff": main_vs_src,
            "mtp_incremental_vs_full_max_abs_diff_logits": d["incremental_logits"],
            "mtp_incremental_vs_full_max_abs_diff_streams": d["incremental_streams"],
            "mtp_chunked": MTP_CHUNKS,
            "mtp_chunked_vs_full_max_abs_diff_logits": d["chunked_logits"],
            "mtp_chunked_vs_full_max_abs_diff_streams": d["chunked_streams"],
            "mtp_cache_rows_kept": kept_inc,
            "cached_tolerance": MTP_CACHED_TOL,
            "safetensors_reread_identical": True,
            "spec_float64_reimplementation_max_abs_diff": spec_diff,
            "reload_own_mapping_max_abs_diff": reload_own,
            "reload_hf_main_model_max_abs_diff": hf_reload,
            "mtp_logits_min_std_over_vocab": float(std.min()),
            "mtp_logits_mean_std_over_vocab": float(std.mean()),
            "mtp_logits_max_abs": float(l_full.abs().max()),
            "mtp_argmax_distinct": distinct,
            "mtp_argmax_equal_main_argmax_next_position": argmax_eq_main_next,
            "mtp_vs_main_next_logits_max_abs_diff": vs_main,
            "mtp_clamp_fractions": clamp,
            "mtp_bias_changed_selections": bias_changed,
            "mtp_router_min_topk_gap": router_min_gap,
        },
        "notes": (
            "transformers 5.17.0 has no MTP class; the block is DeepSeek's MTPBlock assembled from transformers' "
            "DeepseekV4DecoderLayer (config = the main config with num_hidden_layers 1, layer_types "
            "[sliding_attention], mlp_layer_types [moe]), DeepseekV4HyperHead, DeepseekV4RMSNorm and nn.Linear, "
            "float32, eager attention and experts, CPU, 2 threads, TF32 off. Cached runs use "
            "DynamicCache(config=mtp config) (one DynamicSlidingWindowLayer). config.json: official keys; "
            "compress_ratios has HCA 16, which DeepseekV4Config itself cannot read (only 0/4/128). "
            "See tools/reference/README.md."
        ),
    }
    with open(os.path.join(folder, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")

    sizes = {fn: os.path.getsize(os.path.join(folder, fn)) for fn in sorted(os.listdir(folder))}
    log(f"  MTP: sliding window {mcfg.sliding_window}, {n - 1} slots, cache keeps {kept_inc} rows")
    log(f"  cached vs full max|diff|: incremental logits {d['incremental_logits']:.3g} streams "
        f"{d['incremental_streams']:.3g}; chunked {MTP_CHUNKS} logits {d['chunked_logits']:.3g} streams "
        f"{d['chunked_streams']:.3g}")
    log(f"  MTP logits: max |logit| {float(l_full.abs().max()):.3f}, std over vocab min {float(std.min()):.3f} "
        f"mean {float(std.mean()):.3f}; {distinct} distinct argmax over {n - 1} slots; "
        f"argmax == main argmax at t+1 in {argmax_eq_main_next} slots")
    for kind in ("routed", "shared"):
        c = clamp[kind]
        log(f"  MTP clamp {kind:6s} gate>L {c['gate_gt_limit']:.3%}  up>L {c['up_gt_limit']:.3%}  "
            f"up<-L {c['up_lt_neg_limit']:.3%}  (n={c['n_elements']})")
    log(f"  MTP gate.bias changed top-k selection [changed, tokens] {bias_changed}; router min gap {router_min_gap:.3g}")
    log(f"  safetensors: {len(main_off)} main + {len(mtp_off)} mtp.0.* tensors, re-read identical; own-mapping "
        f"reload reproduces main logits/streams and MTP logits/streams exactly; transformers from_pretrained "
        f"(mtp.* ignored) main max|diff| {hf_reload}")
    log(f"  independent float64 spec re-implementation (official tensors only) vs transformers: logits "
        f"{spec_diff['logits']:.3g}, streams {spec_diff['streams']:.3g}")
    log("  files: " + ", ".join(f"{k} {v} B" for k, v in sizes.items()))
    log(f"  total {sum(sizes.values()) / 1024:.1f} KiB")
    return sizes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output root, e.g. tests/fixtures/dsv4-mtp")
    ap.add_argument("--source", default="tests/fixtures/dsv4/tiny-v4", help="the tiny-v4 fixture to check against")
    args = ap.parse_args()
    base.prepare_reference_run()
    assert os.path.isfile(os.path.join(args.source, "logits.f32")), f"need the tiny-v4 fixture at {args.source}"
    os.makedirs(args.out, exist_ok=True)
    make(args.out, args.source)
    log("\n=== done ===")


if __name__ == "__main__":
    main()
