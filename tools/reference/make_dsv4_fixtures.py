#!/usr/bin/env python3
"""Golden fixtures for the frank DeepSeek-V4 engine, produced by HF transformers.

Builds tiny random ``DeepseekV4ForCausalLM`` models (transformers 5.17.0, float32,
eager attention, eager experts) that exercise every path of the architecture
(sliding / CSA / HCA attention, lightning indexer with more entries than
index_topk, hash-routed and score-routed MoE, shared expert, SwiGLU clamps,
YaRN, 4-stream mHC), runs them in three ways (full sequence, prefill + single
token decode, chunked prefill), checks that transformers agrees with itself,
and writes one folder per fixture:

    <out>/<fixture>/config.json (+ weights, see README.md)
    <out>/<fixture>/golden.json      metadata + checks
    <out>/<fixture>/logits.f32       raw little-endian float32 [n_tokens, vocab]
    <out>/tiny-v4/ops.safetensors    op-level goldens (first fixture only)

Usage:  python tools/reference/make_dsv4_fixtures.py --out tests/fixtures/dsv4
See tools/reference/README.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
from collections import defaultdict

import numpy as np
import torch
import torch.nn.functional as F

import safetensors
import transformers
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
from transformers.cache_utils import DynamicCache

REQUIRED_TRANSFORMERS = "5.17.0"

# --------------------------------------------------------------------------------------
# Fixture definitions
# --------------------------------------------------------------------------------------

SLIDING, CSA, HCA = "sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"

BASE_CFG = dict(
    vocab_size=256, hidden_size=64, num_hidden_layers=6,
    num_attention_heads=4, num_key_value_heads=1, head_dim=32, partial_rotary_factor=0.25,
    q_lora_rank=32, o_groups=2, o_lora_rank=16,
    layer_types=[SLIDING, SLIDING, CSA, HCA, CSA, HCA],
    compress_rates={CSA: 4, HCA: 16},
    mlp_layer_types=["hash_moe"] * 3 + ["moe"] * 3,
    n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=32,
    sliding_window=8, index_n_heads=16, index_head_dim=16, index_topk=4,
    hc_mult=4, hc_sinkhorn_iters=20, hc_eps=1e-6, rms_norm_eps=1e-6,
    rope_theta=10000.0, compress_rope_theta=160000.0,
    rope_parameters={"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 65536,
                     "beta_fast": 32, "beta_slow": 1},
    swiglu_limit=10.0, routed_scaling_factor=1.5, scoring_func="sqrtsoftplus", norm_topk_prob=True,
    max_position_embeddings=1048576, num_nextn_predict_layers=0, tie_word_embeddings=False,
    bos_token_id=0, eos_token_id=1,
)

FIXTURES = [
    dict(
        name="tiny-v4",
        seed=1234,
        cfg={},
        n_tokens=64,
        prefill=41,                       # 41 % 4 = 1, 41 % 16 = 9
        chunks=[3, 5, 1, 7, 4, 2, 9, 6, 11, 3, 13],   # cuts CSA (4), HCA (16) and window (8) boundaries
        style="save_pretrained",
        ops=True,
    ),
    dict(
        name="tiny-v4-modnames-sharded",
        seed=5678,
        cfg=dict(
            layer_types=[SLIDING, CSA, HCA, CSA, HCA, CSA],
            compress_rates={CSA: 4, HCA: 8},
            mlp_layer_types=["hash_moe"] * 3 + ["moe"] * 3,
            sliding_window=16, index_topk=3,
            vocab_size=200, hidden_size=48,
            num_attention_heads=8, o_groups=4, o_lora_rank=8, partial_rotary_factor=0.5,
            n_routed_experts=6, num_experts_per_tok=3, moe_intermediate_size=24,
        ),
        n_tokens=80,
        prefill=47,                       # 47 % 4 = 3, 47 % 8 = 7
        chunks=[1, 6, 2, 9, 13, 5, 3, 17, 7, 11, 6],
        style="module_names_sharded",
        ops=False,
    ),
    dict(
        name="tiny-v4-official-bf16",
        seed=9012,
        # HCA ratio 128: the official config carries per-layer `compress_ratios`, and transformers
        # only maps the values 0 / 4 / 128 (configuration_deepseek_v4.py:28-32); the HCA rate itself
        # always comes from `compress_rates` (default 128). So an official-style config can only
        # describe HCA ratio 128 -> this fixture needs > 128 tokens.
        cfg=dict(
            layer_types=[SLIDING, SLIDING, CSA, HCA, CSA, HCA],
            compress_rates={CSA: 4, HCA: 128},
            mlp_layer_types=["hash_moe"] * 2 + ["moe"] * 4,
            sliding_window=16, index_topk=5, moe_intermediate_size=24,
        ),
        n_tokens=160,
        prefill=101,                      # 101 % 4 = 1; HCA window closes at t=127 during decode
        chunks=[7, 1, 12, 5, 30, 9, 27, 40, 3, 26],   # 91..131 chunk straddles the HCA close at 127
        style="official_bf16",
        ops=False,
    ),
]

# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------

KEEP_FP32_STRICT = list(DeepseekV4ForCausalLM._keep_in_fp32_modules_strict)
# transformers matches these as an unanchored regex alternation on the parameter name
# (core_model_loading.py build_glob_alternation + .search), i.e. substring match.
KEEP_FP32_RE = re.compile("|".join(f"(?:{p})" for p in KEEP_FP32_STRICT))


def prepare_reference_run():
    """What every fixture script does first: refuse another transformers, make torch deterministic
    on 2 CPU threads (no TF32), quiet transformers, and log the versions."""
    if transformers.__version__ != REQUIRED_TRANSFORMERS:
        sys.exit(f"need transformers=={REQUIRED_TRANSFORMERS}, found {transformers.__version__}")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    log(f"transformers {transformers.__version__}, torch {torch.__version__}, safetensors {safetensors.__version__}, "
        f"numpy {np.__version__}, threads {torch.get_num_threads()}")


def log(*a):
    print(*a, flush=True)


def build_config(overrides: dict) -> DeepseekV4Config:
    kw = json.loads(json.dumps(BASE_CFG))
    kw.update(json.loads(json.dumps(overrides)))
    return DeepseekV4Config(**kw)


def new_model(cfg: DeepseekV4Config) -> DeepseekV4ForCausalLM:
    m = DeepseekV4ForCausalLM._from_config(
        cfg, attn_implementation="eager", experts_implementation="eager", dtype=torch.float32
    )
    m = m.float().eval()
    assert m.config._attn_implementation == "eager"
    assert m.config._experts_implementation == "eager"
    return m


def randn(g, *shape):
    return torch.randn(*shape, generator=g, dtype=torch.float32)


@torch.no_grad()
def init_weights(model: DeepseekV4ForCausalLM, seed: int) -> dict:
    """Overwrite every parameter and persistent buffer deterministically (by sorted name).

    Everything `_init_weights` (modeling_deepseek_v4.py:1220-1252) sets to zeros / ones /
    constants is replaced by non-trivial values, and linear weights are scaled ~ d_in^-0.5
    so activations and logits are O(1..10). Expert / shared-expert gate and up weights are
    scaled up (gain 6) so that the SwiGLU clamps at +-10 are active.
    """
    g = torch.Generator().manual_seed(seed)
    cfg = model.config
    E, K = cfg.n_routed_experts, cfg.num_experts_per_tok
    gains = {}
    sd = model.state_dict(keep_vars=True)
    seen = set()
    for name in sorted(sd):
        t = sd[name]
        shape = tuple(t.shape)
        if name.endswith("mlp.gate.tid2eid"):
            rows = [torch.randperm(E, generator=g)[:K] for _ in range(shape[0])]
            t.data.copy_(torch.stack(rows).to(t.dtype))
        elif name.endswith("e_score_correction_bias"):
            t.data.copy_(randn(g, *shape) * 0.25)
        elif name.endswith("self_attn.sinks"):
            t.data.copy_(randn(g, *shape) * 1.0)
        elif name.endswith("position_bias"):
            t.data.copy_(randn(g, *shape) * 1.0)
        elif name.endswith("_hc.fn") or name.endswith("hc_head.hc_fn"):
            t.data.copy_(randn(g, *shape) * shape[1] ** -0.5 * 1.5)
        elif name.endswith("_hc.base") or name.endswith("hc_head.hc_base"):
            t.data.copy_(randn(g, *shape) * 0.75)
        elif name.endswith("_hc.scale") or name.endswith("hc_head.hc_scale"):
            t.data.copy_(0.5 + torch.rand(*shape, generator=g))
        elif "norm" in name and name.endswith(".weight") and t.dim() == 1:
            t.data.copy_(1.0 + 0.2 * randn(g, *shape))
        elif name == "model.embed_tokens.weight":
            t.data.copy_(randn(g, *shape))
        elif name == "lm_head.weight":
            t.data.copy_(randn(g, *shape) * shape[1] ** -0.5 * 2.5)
        elif name.endswith("mlp.experts.gate_up_proj"):      # [E, 2I, D]
            t.data.copy_(randn(g, *shape) * shape[2] ** -0.5 * 6.0)
        elif name.endswith("mlp.experts.down_proj"):         # [E, D, I]
            t.data.copy_(randn(g, *shape) * shape[2] ** -0.5 * 0.08)
        elif name.endswith("shared_experts.gate_proj.weight") or name.endswith("shared_experts.up_proj.weight"):
            t.data.copy_(randn(g, *shape) * shape[1] ** -0.5 * 6.0)
        elif name.endswith("shared_experts.down_proj.weight"):
            t.data.copy_(randn(g, *shape) * shape[1] ** -0.5 * 0.08)
        elif name.endswith("compressor.gate_proj.weight") or name.endswith("indexer.gate_proj.weight"):
            t.data.copy_(randn(g, *shape) * shape[1] ** -0.5 * 1.5)
        elif name.endswith(".weight") and t.dim() == 2:       # all other nn.Linear (incl. router gate)
            t.data.copy_(randn(g, *shape) * shape[1] ** -0.5)
        else:
            raise RuntimeError(f"init_weights: no rule for {name} {shape} {t.dtype}")
        seen.add(name)
    assert seen == set(model.state_dict().keys())
    # rotary inv_freq buffers are non-persistent and computed by transformers: left untouched.
    return gains


@torch.no_grad()
def round_to_bf16_except_fp32_kept(model) -> tuple[list, list]:
    rounded, kept = [], []
    for name, t in model.state_dict(keep_vars=True).items():
        if not t.is_floating_point():
            continue
        if KEEP_FP32_RE.search(name):
            kept.append(name)
        else:
            t.data.copy_(t.data.to(torch.bfloat16).to(torch.float32))
            rounded.append(name)
    return rounded, kept


# --------------------------------------------------------------------------------------
# Instrumentation: clamps, router bias effect, indexer ties
# --------------------------------------------------------------------------------------


class Probes:
    """Forward (pre-)hooks that measure clamp activity, bias effect and indexer ties."""

    def __init__(self, model):
        self.model = model
        self.cfg = model.config
        self.handles = []
        self.active = True
        self.reset()
        layers = model.model.layers
        for i, layer in enumerate(layers):
            mlp = layer.mlp
            self.handles.append(mlp.experts.register_forward_pre_hook(self._experts_pre(i)))
            self.handles.append(mlp.shared_experts.register_forward_pre_hook(self._shared_pre(i)))
            if not mlp.is_hash:
                self.handles.append(mlp.gate.register_forward_pre_hook(self._router_pre(i)))
            comp = layer.self_attn.compressor
            if comp is not None and hasattr(comp, "indexer"):
                self.handles.append(comp.indexer.register_forward_pre_hook(self._indexer_pre(i)))
                self.handles.append(comp.indexer.scorer.register_forward_hook(self._scorer_post(i)))

    def reset(self):
        self.clamp = defaultdict(lambda: np.zeros(4, dtype=np.int64))  # gate>L, up>L, up<-L, total
        self.bias_changed = defaultdict(lambda: [0, 0])                 # changed tokens, tokens
        self.router_min_gap = float("inf")
        self.ties = set()
        self.index_min_gap = float("inf")
        self.index_min_gap_at = None
        self.index_boundary_zero = 0
        self.index_positions_checked = 0
        self._pos = {}

    def remove(self):
        for h in self.handles:
            h.remove()

    def _count(self, key, gate, up):
        L = self.cfg.swiglu_limit
        c = self.clamp[key]
        c[0] += int((gate > L).sum())
        c[1] += int((up > L).sum())
        c[2] += int((up < -L).sum())
        c[3] += gate.numel()

    def _experts_pre(self, li):
        def hook(mod, args):
            if not self.active:
                return
            x, idx, _w = args
            for e in range(mod.num_experts):
                tok, _ = torch.where(idx == e)
                if tok.numel() == 0:
                    continue
                gu = F.linear(x[tok], mod.gate_up_proj[e])
                gate, up = gu.chunk(2, dim=-1)
                self._count(("routed", li), gate, up)
        return hook

    def _shared_pre(self, li):
        def hook(mod, args):
            if not self.active:
                return
            x = args[0]
            self._count(("shared", li), mod.gate_proj(x), mod.up_proj(x))
        return hook

    def _router_pre(self, li):
        def hook(mod, args):
            if not self.active:
                return
            flat = args[0].reshape(-1, mod.hidden_dim)
            scores = mod.score_fn(F.linear(flat, mod.weight))
            biased = scores + mod.e_score_correction_bias
            a = torch.topk(biased, mod.top_k, dim=-1).indices.sort(-1).values
            b = torch.topk(scores, mod.top_k, dim=-1).indices.sort(-1).values
            ch = self.bias_changed[li]
            ch[0] += int((a != b).any(-1).sum())
            ch[1] += flat.shape[0]
            srt = biased.sort(-1, descending=True).values
            gap = (srt[:, mod.top_k - 1] - srt[:, mod.top_k]).abs().min().item()
            self.router_min_gap = min(self.router_min_gap, gap)
        return hook

    def _indexer_pre(self, li):
        def hook(mod, args):
            self._pos[li] = args[2].clone()      # position_ids [B, S]
        return hook

    def _scorer_post(self, li):
        def hook(mod, args, out):
            scores = out[0]                      # [S, T] raw scores (before the future mask)
            pos = self._pos[li][0]
            T = scores.shape[-1]
            ratio = self.cfg.compress_rates[CSA]
            k = min(self.cfg.index_topk, T)
            for s in range(scores.shape[0]):
                t = int(pos[s])
                visible = min((t + 1) // ratio, T)
                if visible <= k:
                    continue
                self.index_positions_checked += 1
                vals = scores[s, :visible].sort(descending=True).values
                a, b = float(vals[k - 1]), float(vals[k])
                if a == b:
                    self.ties.add((li, t))
                if b == 0.0:
                    self.index_boundary_zero += 1
                rel = (a - b) / max(abs(a), 1e-30)
                if rel < self.index_min_gap:
                    self.index_min_gap = rel
                    self.index_min_gap_at = (li, t)
        return hook

    def clamp_summary(self):
        out = {}
        for kind in ("routed", "shared"):
            tot = np.zeros(4, dtype=np.int64)
            for (kk, _li), c in self.clamp.items():
                if kk == kind:
                    tot += c
            n = max(int(tot[3]), 1)
            out[kind] = {"gate_gt_limit": tot[0] / n, "up_gt_limit": tot[1] / n, "up_lt_neg_limit": tot[2] / n,
                         "n_elements": int(tot[3])}
        return out


# --------------------------------------------------------------------------------------
# The three runs
# --------------------------------------------------------------------------------------


@torch.no_grad()
def run_full(model, ids):
    return model(ids, use_cache=False).logits[0].float().clone()


@torch.no_grad()
def run_incremental(model, ids, prefill):
    cache = DynamicCache(config=model.config)
    outs = [model(ids[:, :prefill], past_key_values=cache, use_cache=True).logits[0]]
    for t in range(prefill, ids.shape[1]):
        outs.append(model(ids[:, t:t + 1], past_key_values=cache, use_cache=True).logits[0])
    return torch.cat(outs, 0).float()


@torch.no_grad()
def run_chunked(model, ids, chunks):
    assert sum(chunks) == ids.shape[1]
    cache = DynamicCache(config=model.config)
    outs, p = [], 0
    for c in chunks:
        outs.append(model(ids[:, p:p + c], past_key_values=cache, use_cache=True).logits[0])
        p += c
    return torch.cat(outs, 0).float()


def check_close(ref, other, what):
    tol = 1e-4 * torch.clamp(ref.abs(), min=1.0)
    diff = (ref - other).abs()
    bad = diff > tol
    if bad.any():
        idx = bad.nonzero()[0].tolist()
        raise AssertionError(f"{what}: HF disagrees with its own full-sequence run at {idx}: "
                             f"max |diff| {diff.max().item():.3g}")
    return float(diff.max())


# --------------------------------------------------------------------------------------
# Op-level goldens (fixture 1)
# --------------------------------------------------------------------------------------


@torch.no_grad()
def capture_ops(model, ids, ref_logits):
    cfg = model.config
    mm = model.model
    ops = {}
    S = ids.shape[1]

    def put(name, t):
        t = t.detach()
        if t.dim() > 0 and t.shape[0] == 1 and name not in ("rope.main_inv_freq", "rope.compress_inv_freq"):
            t = t[0]
        t = t.to(torch.int64) if not t.is_floating_point() else t.to(torch.float32)
        ops[name] = t.contiguous().clone()

    hooks = []

    def fwd(mod, name, fn):
        def hook(m, a, k, o):
            fn(a, k, o)
            return None                      # never replace the module output
        hooks.append(mod.register_forward_hook(hook, with_kwargs=True))

    # rotary tables
    put("rope.main_inv_freq", mm.rotary_emb.main_inv_freq)
    put("rope.compress_inv_freq", mm.rotary_emb.compress_inv_freq)
    pos = torch.arange(S).unsqueeze(0)
    for lt in ("main", "compress"):
        cos, sin = mm.rotary_emb(mm.embed_tokens.weight[None, :1], position_ids=pos, layer_type=lt)
        put(f"rope.{lt}_cos", cos)
        put(f"rope.{lt}_sin", sin)
    # check that every rotary copy (compressors / indexers own one each) has the same tables
    for n, b in model.named_buffers():
        if n.endswith("main_inv_freq") or n.endswith("compress_inv_freq"):
            ref = mm.rotary_emb.main_inv_freq if n.endswith("main_inv_freq") else mm.rotary_emb.compress_inv_freq
            assert torch.equal(b, ref), n

    put("ids", ids)
    fwd(mm.embed_tokens, "embed", lambda a, k, o: put("embed.out", o))
    # layer.{i}.in would duplicate layer.{i-1}.out (layer.0.in = embed.out repeated on 4 streams)
    for i, layer in enumerate(mm.layers):
        fwd(layer, "", lambda a, k, o, i=i: put(f"layer.{i}.out", o))
        if i not in (0, 2, 3, 4):                  # one layer of each kind is enough (size budget)
            continue
        fwd(layer.self_attn, "", lambda a, k, o, i=i: (put(f"layer.{i}.self_attn.in", a[0]),
                                                       put(f"layer.{i}.self_attn.out", o[0])))
        fwd(layer.mlp, "", lambda a, k, o, i=i: (put(f"layer.{i}.mlp.in", a[0]), put(f"layer.{i}.mlp.out", o)))

    L2 = mm.layers[2]
    # attn_hc.in of layer 2 == layer.1.out and hc_head.in == layer.{last}.out (asserted below)
    fwd(L2.attn_hc, "", lambda a, k, o: (put("_attn_hc_in", a[0]), put("layer.2.attn_hc.post", o[0]),
                                         put("layer.2.attn_hc.comb", o[1]), put("layer.2.attn_hc.collapsed", o[2])))
    fwd(L2.ffn_hc, "", lambda a, k, o: (put("layer.2.ffn_hc.in", a[0]), put("layer.2.ffn_hc.post", o[0]),
                                        put("layer.2.ffn_hc.comb", o[1]), put("layer.2.ffn_hc.collapsed", o[2])))
    fwd(mm.hc_head, "", lambda a, k, o: (put("_hc_head_in", a[0]), put("hc_head.out", o)))
    fwd(mm.norm, "", lambda a, k, o: put("final_norm.out", o))

    fwd(mm.layers[0].mlp.gate, "", lambda a, k, o: (put("layer.0.router.in", a[0]), put("layer.0.router.input_ids", a[1]),
                                                    put("layer.0.router.logits", o[0]), put("layer.0.router.weights", o[1]),
                                                    put("layer.0.router.indices", o[2])))
    fwd(mm.layers[3].mlp.gate, "", lambda a, k, o: (put("layer.3.router.in", a[0]), put("layer.3.router.logits", o[0]),
                                                    put("layer.3.router.weights", o[1]), put("layer.3.router.indices", o[2])))
    L4 = mm.layers[4]
    fwd(L4.mlp.shared_experts, "", lambda a, k, o: (put("layer.4.shared_experts.in", a[0]),
                                                    put("layer.4.shared_experts.out", o)))
    fwd(L4.mlp.experts, "", lambda a, k, o: (put("layer.4.experts.in", a[0]), put("layer.4.experts.top_k_index", a[1]),
                                             put("layer.4.experts.top_k_weights", a[2]), put("layer.4.experts.out", o)))
    comp2 = L2.self_attn.compressor
    fwd(comp2, "", lambda a, k, o: put("layer.2.compressor.entries_nocache", o[0][:, 0]))
    fwd(mm.layers[3].self_attn.compressor, "", lambda a, k, o: put("layer.3.compressor.entries_nocache", o[0][:, 0]))
    fwd(comp2.indexer, "", lambda a, k, o: put("layer.2.indexer.topk", o))
    fwd(comp2.indexer.scorer, "", lambda a, k, o: put("layer.2.indexer.scores", o))

    logits = model(ids, use_cache=False).logits[0]
    for h in hooks:
        h.remove()
    assert torch.equal(logits, ref_logits), "ops capture run differs from the reference run"
    assert torch.equal(ops.pop("_attn_hc_in"), ops["layer.1.out"])
    assert torch.equal(ops.pop("_hc_head_in"), ops[f"layer.{cfg.num_hidden_layers - 1}.out"])
    # the MoE block input is also the router / expert input: keep one copy
    assert torch.equal(ops.pop("layer.0.mlp.in"), ops["layer.0.router.in"])
    assert torch.equal(ops.pop("layer.3.mlp.in"), ops["layer.3.router.in"])
    assert torch.equal(ops.pop("layer.4.mlp.in"), ops["layer.4.shared_experts.in"])
    assert torch.equal(ops["layer.4.experts.in"], ops["layer.4.shared_experts.in"])
    assert torch.equal(ops["layer.0.router.input_ids"], ops["ids"])
    assert torch.allclose(ops["layer.4.mlp.out"], ops["layer.4.experts.out"] + ops["layer.4.shared_experts.out"])

    # compressed entries / indexer keys from the cache after one use_cache=True pass
    cache = DynamicCache(config=cfg)
    logits_c = model(ids, past_key_values=cache, use_cache=True).logits[0]
    cache_diff = float((logits_c - ref_logits).abs().max())
    for li, lt in enumerate(cfg.layer_types):
        if lt == SLIDING:
            continue
        cl = cache.layers[li]
        put(f"cache.layer.{li}.compressor.entries", cl.compressed_kv["compressor"])
        if lt == CSA:
            put(f"cache.layer.{li}.indexer.keys", cl.compressed_kv["indexer"])
    # sanity: stateless and cached single pass give the same entries
    assert torch.allclose(ops["cache.layer.2.compressor.entries"], ops["layer.2.compressor.entries_nocache"], atol=1e-6)
    assert torch.allclose(ops["cache.layer.3.compressor.entries"], ops["layer.3.compressor.entries_nocache"], atol=1e-6)
    return ops, cache_diff


# --------------------------------------------------------------------------------------
# Writers
# --------------------------------------------------------------------------------------


def official_name_map(model) -> dict:
    """HF module name -> list of (official name, slicer) pairs (official DeepSeek checkpoint names)."""
    cfg = model.config
    I = cfg.moe_intermediate_size
    out = {}
    layer_re = re.compile(r"^model\.layers\.(\d+)\.(.*)$")
    attn_leaf = {
        "q_a_proj.weight": "wq_a.weight", "q_a_norm.weight": "q_norm.weight", "q_b_proj.weight": "wq_b.weight",
        "kv_proj.weight": "wkv.weight", "kv_norm.weight": "kv_norm.weight", "o_a_proj.weight": "wo_a.weight",
        "o_b_proj.weight": "wo_b.weight", "sinks": "attn_sink",
        "compressor.kv_proj.weight": "compressor.wkv.weight", "compressor.gate_proj.weight": "compressor.wgate.weight",
        "compressor.position_bias": "compressor.ape", "compressor.kv_norm.weight": "compressor.norm.weight",
        "compressor.indexer.kv_proj.weight": "indexer.compressor.wkv.weight",
        "compressor.indexer.gate_proj.weight": "indexer.compressor.wgate.weight",
        "compressor.indexer.position_bias": "indexer.compressor.ape",
        "compressor.indexer.kv_norm.weight": "indexer.compressor.norm.weight",
        "compressor.indexer.q_b_proj.weight": "indexer.wq_b.weight",
        "compressor.indexer.scorer.weights_proj.weight": "indexer.weights_proj.weight",
    }
    top = {
        "model.embed_tokens.weight": "embed.weight", "lm_head.weight": "head.weight", "model.norm.weight": "norm.weight",
        "model.hc_head.hc_fn": "hc_head_fn", "model.hc_head.hc_base": "hc_head_base", "model.hc_head.hc_scale": "hc_head_scale",
    }
    ident = lambda t: t  # noqa: E731
    for name, t in model.state_dict().items():
        if name in top:
            out[name] = [(top[name], ident)]
            continue
        mt = layer_re.match(name)
        assert mt, name
        n, rest = mt.group(1), mt.group(2)
        p = f"layers.{n}."
        if rest.startswith("self_attn."):
            out[name] = [(p + "attn." + attn_leaf[rest[len("self_attn."):]], ident)]
        elif rest in ("input_layernorm.weight", "post_attention_layernorm.weight"):
            out[name] = [(p + ("attn_norm.weight" if rest.startswith("input") else "ffn_norm.weight"), ident)]
        elif rest.startswith("attn_hc.") or rest.startswith("ffn_hc."):
            site, leaf = rest.split(".")
            out[name] = [(p + f"hc_{site[:-3]}_{leaf}", ident)]
        elif rest == "mlp.gate.weight":
            out[name] = [(p + "ffn.gate.weight", ident)]
        elif rest == "mlp.gate.e_score_correction_bias":
            out[name] = [(p + "ffn.gate.bias", ident)]
        elif rest == "mlp.gate.tid2eid":
            out[name] = [(p + "ffn.gate.tid2eid", ident)]
        elif rest.startswith("mlp.shared_experts."):
            w = {"gate_proj.weight": "w1", "up_proj.weight": "w3", "down_proj.weight": "w2"}[rest[len("mlp.shared_experts."):]]
            out[name] = [(p + f"ffn.shared_experts.{w}.weight", ident)]
        elif rest == "mlp.experts.gate_up_proj":       # [E, 2I, D]: rows [0:I] gate (w1), [I:2I] up (w3)
            lst = []
            for e in range(t.shape[0]):
                lst.append((p + f"ffn.experts.{e}.w1.weight", lambda x, e=e: x[e, :I]))
                lst.append((p + f"ffn.experts.{e}.w3.weight", lambda x, e=e: x[e, I:]))
            out[name] = lst
        elif rest == "mlp.experts.down_proj":          # [E, D, I]
            out[name] = [(p + f"ffn.experts.{e}.w2.weight", lambda x, e=e: x[e]) for e in range(t.shape[0])]
        else:
            raise RuntimeError(f"no official name for {name}")
    return out


def to_official_state(model) -> dict:
    sd = model.state_dict()
    res = {}
    for name, targets in official_name_map(model).items():
        t = sd[name]
        keep = KEEP_FP32_RE.search(name) is not None
        for oname, sl in targets:
            v = sl(t).contiguous().clone()
            if v.is_floating_point():
                v = v.to(torch.float32 if keep else torch.bfloat16)
            res[oname] = v
    return res


def from_official_state(model, off: dict) -> dict:
    """Inverse mapping (our own): official tensors -> HF module state dict."""
    cfg = model.config
    sd = {}
    for name, targets in official_name_map(model).items():
        if name.endswith("mlp.experts.gate_up_proj"):
            E = len(targets) // 2
            rows = [torch.cat([off[targets[2 * e][0]], off[targets[2 * e + 1][0]]], 0) for e in range(E)]
            sd[name] = torch.stack(rows).float()
        elif name.endswith("mlp.experts.down_proj"):
            sd[name] = torch.stack([off[o] for o, _ in targets]).float()
        else:
            (o, _), = targets
            v = off[o]
            sd[name] = v.float() if v.is_floating_point() else v
    assert cfg is not None
    return sd


def official_config(cfg: DeepseekV4Config) -> dict:
    """An official-style (DeepSeek-shipped spelling) config.json for `cfg`."""
    ratio_of = {SLIDING: 0, CSA: cfg.compress_rates[CSA], HCA: cfg.compress_rates[HCA]}
    assert cfg.compress_rates == {CSA: 4, HCA: 128}, "official configs can only express CSA 4 / HCA 128"
    n_hash = sum(1 for t in cfg.mlp_layer_types if t == "hash_moe")
    assert cfg.mlp_layer_types == ["hash_moe"] * n_hash + ["moe"] * (cfg.num_hidden_layers - n_hash)
    comp = cfg.rope_parameters["compress"]
    return {
        "architectures": ["DeepseekV4ForCausalLM"],
        "model_type": "deepseek_v4",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": cfg.bos_token_id,
        "eos_token_id": cfg.eos_token_id,
        "compress_ratios": [ratio_of[t] for t in cfg.layer_types] + [0],
        "compress_rope_theta": cfg.compress_rope_theta,
        "hc_eps": cfg.hc_eps,
        "hc_mult": cfg.hc_mult,
        "hc_sinkhorn_iters": cfg.hc_sinkhorn_iters,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "hidden_size": cfg.hidden_size,
        "index_head_dim": cfg.index_head_dim,
        "index_n_heads": cfg.index_n_heads,
        "index_topk": cfg.index_topk,
        "initializer_range": 0.02,
        "max_position_embeddings": cfg.max_position_embeddings,
        "moe_intermediate_size": cfg.moe_intermediate_size,
        "n_routed_experts": cfg.n_routed_experts,
        "n_shared_experts": cfg.n_shared_experts,
        "norm_topk_prob": True,
        "num_attention_heads": cfg.num_attention_heads,
        "num_experts_per_tok": cfg.num_experts_per_tok,
        "num_hash_layers": n_hash,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_key_value_heads": cfg.num_key_value_heads,
        "num_nextn_predict_layers": 0,
        "o_groups": cfg.o_groups,
        "o_lora_rank": cfg.o_lora_rank,
        "q_lora_rank": cfg.q_lora_rank,
        "qk_rope_head_dim": cfg.qk_rope_head_dim,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_scaling": {
            "type": "yarn",
            "factor": comp["factor"],
            "original_max_position_embeddings": comp["original_max_position_embeddings"],
            "beta_fast": comp["beta_fast"],
            "beta_slow": comp["beta_slow"],
        },
        "rope_theta": cfg.rope_theta,
        "routed_scaling_factor": cfg.routed_scaling_factor,
        "scoring_func": cfg.scoring_func,
        "sliding_window": cfg.sliding_window,
        "swiglu_limit": cfg.swiglu_limit,
        "tie_word_embeddings": False,
        "topk_method": "noaux_tc",
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "vocab_size": cfg.vocab_size,
    }


def check_official_roundtrip(off_cfg: dict, cfg: DeepseekV4Config):
    c2 = DeepseekV4Config.from_dict(json.loads(json.dumps(off_cfg)))
    problems = []
    for attr in ("layer_types", "mlp_layer_types", "compress_rates", "partial_rotary_factor", "qk_rope_head_dim",
                 "sliding_window", "index_topk", "index_n_heads", "index_head_dim", "num_experts_per_tok",
                 "n_routed_experts", "moe_intermediate_size", "hc_mult", "hc_sinkhorn_iters", "hc_eps",
                 "rms_norm_eps", "swiglu_limit", "routed_scaling_factor", "o_groups", "o_lora_rank", "q_lora_rank",
                 "head_dim", "hidden_size", "num_attention_heads", "vocab_size", "rope_theta", "compress_rope_theta"):
        if getattr(c2, attr) != getattr(cfg, attr):
            problems.append((attr, getattr(c2, attr), getattr(cfg, attr)))
    for lt in ("main", "compress"):
        a = {k: v for k, v in c2.rope_parameters[lt].items() if k != "type"}
        b = cfg.rope_parameters[lt]
        if a != b:
            problems.append((f"rope_parameters.{lt}", a, b))
    # rope tables built from the round-tripped config must be bit-identical
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4RotaryEmbedding
    r1, r2 = DeepseekV4RotaryEmbedding(cfg), DeepseekV4RotaryEmbedding(c2)
    for lt in ("main", "compress"):
        if not torch.equal(getattr(r1, f"{lt}_inv_freq"), getattr(r2, f"{lt}_inv_freq")):
            problems.append((f"{lt}_inv_freq", None, None))
    if problems:
        raise AssertionError(f"official config does not round-trip: {problems}")
    return c2


def write_module_names_sharded(folder, model, n_shards=2):
    sd = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    names = list(sd)                     # state_dict (module registration) order
    sizes = [sd[k].numel() * sd[k].element_size() for k in names]
    total = sum(sizes)
    shards, cur, acc = [[] for _ in range(n_shards)], 0, 0
    for k, s in zip(names, sizes):
        if acc >= total * (cur + 1) / n_shards and cur < n_shards - 1:
            cur += 1
        shards[cur].append(k)
        acc += s
    weight_map = {}
    for i, keys in enumerate(shards):
        fn = f"model-{i + 1:05d}-of-{n_shards:05d}.safetensors"
        save_file({k: sd[k] for k in keys}, os.path.join(folder, fn), metadata={"format": "pt"})
        for k in keys:
            weight_map[k] = fn
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")
    model.config.architectures = ["DeepseekV4ForCausalLM"]
    model.config.to_json_file(os.path.join(folder, "config.json"))
    return [len(s) for s in shards]


def load_module_names_sharded(folder):
    idx = json.load(open(os.path.join(folder, "model.safetensors.index.json")))
    sd = {}
    for fn in sorted(set(idx["weight_map"].values())):
        sd.update(load_file(os.path.join(folder, fn)))
    assert set(sd) == set(idx["weight_map"])
    return sd


def saved_keys(folder):
    keys = {}
    for fn in sorted(os.listdir(folder)):
        if fn.endswith(".safetensors"):
            with safe_open(os.path.join(folder, fn), "pt") as f:
                for k in f.keys():
                    sl = f.get_slice(k)
                    keys[k] = (sl.get_dtype(), list(sl.get_shape()))
    return keys


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


# --------------------------------------------------------------------------------------
# Main per-fixture driver
# --------------------------------------------------------------------------------------


def make_fixture(fx: dict, out_root: str) -> dict:
    name = fx["name"]
    log(f"\n=== {name} ===")
    folder = os.path.join(out_root, name)
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)

    torch.manual_seed(fx["seed"])                  # only the HF constructor init uses it; all overwritten
    cfg = build_config(fx["cfg"])
    model = new_model(cfg)
    init_weights(model, fx["seed"])
    rounding = None
    if fx["style"] == "official_bf16":
        rounded, kept = round_to_bf16_except_fp32_kept(model)
        rounding = {"rounded_to_bf16": len(rounded), "kept_fp32": sorted({re.sub(r"layers\.\d+\.", "layers.N.", k) for k in kept})}

    g = torch.Generator().manual_seed(fx["seed"] + 1)
    ids = torch.randint(0, cfg.vocab_size, (1, fx["n_tokens"]), generator=g)
    n, P, chunks = fx["n_tokens"], fx["prefill"], fx["chunks"]
    assert P % 4 != 0 and sum(chunks) == n

    probes = Probes(model)
    ref = run_full(model, ids)
    ties_full = sorted(probes.ties)
    clamp = probes.clamp_summary()
    bias_changed = {str(k): v for k, v in sorted(probes.bias_changed.items())}
    router_min_gap = probes.router_min_gap
    idx_gap, idx_gap_at = probes.index_min_gap, probes.index_min_gap_at
    idx_checked, idx_zero = probes.index_positions_checked, probes.index_boundary_zero
    probes.active = False                           # clamp/bias counters: full run only
    inc = run_incremental(model, ids, P)
    ch = run_chunked(model, ids, chunks)
    ties_all = sorted(probes.ties)
    probes.remove()

    d_inc = check_close(ref, inc, "incremental")
    d_ch = check_close(ref, ch, "chunked")

    if ties_full:
        raise AssertionError(f"{name}: indexer ties straddle the top-k boundary at {ties_full}")
    if ties_all:
        raise AssertionError(f"{name}: indexer ties in incremental/chunked runs at {ties_all}")
    for kind in ("routed", "shared"):
        for key in ("gate_gt_limit", "up_gt_limit", "up_lt_neg_limit"):
            assert clamp[kind][key] > 0, f"{name}: clamp {kind}.{key} never active"
    total_changed = sum(v[0] for v in probes.bias_changed.values())
    assert total_changed > 0, f"{name}: e_score_correction_bias never changes a selection"

    # ---------------- write weights + config ----------------
    extra = {}
    if fx["style"] == "save_pretrained":
        model.save_pretrained(folder, safe_serialization=True)
        tensor_style = "transformers save_pretrained (official-like names under a 'model.' prefix)"
        weights_dtype = "float32"
        m2 = DeepseekV4ForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager",
                                                   experts_implementation="eager").eval()
        extra["reload_from_pretrained_max_abs_diff"] = float((run_full(m2, ids) - ref).abs().max())
        assert extra["reload_from_pretrained_max_abs_diff"] == 0.0
    elif fx["style"] == "module_names_sharded":
        extra["shard_sizes"] = write_module_names_sharded(folder, model, 2)
        tensor_style = "transformers module names (model.state_dict() keys), 2 shards + model.safetensors.index.json"
        weights_dtype = "float32"
        m2 = new_model(build_config(fx["cfg"]))
        m2.load_state_dict(load_module_names_sharded(folder), strict=True)
        extra["reload_state_dict_max_abs_diff"] = float((run_full(m2.eval(), ids) - ref).abs().max())
        assert extra["reload_state_dict_max_abs_diff"] == 0.0
        try:
            m3 = DeepseekV4ForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager",
                                                       experts_implementation="eager").eval()
            extra["hf_from_pretrained_max_abs_diff"] = float((run_full(m3, ids) - ref).abs().max())
        except Exception as e:  # informational only
            extra["hf_from_pretrained_error"] = f"{type(e).__name__}: {e}"[:300]
    elif fx["style"] == "official_bf16":
        off_cfg = official_config(cfg)
        check_official_roundtrip(off_cfg, cfg)
        extra["official_config_roundtrip"] = ("DeepseekV4Config.from_dict(config.json) reproduces layer_types, "
                                              "mlp_layer_types, compress_rates, rope_parameters main+compress and "
                                              "bit-identical inv_freq tables")
        off = to_official_state(model)
        save_file(off, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(off_cfg, f, indent=2)
            f.write("\n")
        tensor_style = "official DeepSeek checkpoint names (embed.weight, layers.N.attn.wq_a.weight, ...), no 'model.' prefix"
        weights_dtype = "bfloat16 (fp32-kept tensors stored as float32)"
        # (1) our own inverse mapping into a fresh model built from the official config
        c2 = DeepseekV4Config.from_pretrained(folder)
        m2 = new_model(c2)
        m2.load_state_dict(from_official_state(m2, load_file(os.path.join(folder, "model.safetensors"))), strict=True)
        extra["reload_own_mapping_max_abs_diff"] = float((run_full(m2.eval(), ids) - ref).abs().max())
        assert extra["reload_own_mapping_max_abs_diff"] == 0.0
        # (2) transformers' own conversion_mapping (official names -> HF modules)
        m3 = DeepseekV4ForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager",
                                                   experts_implementation="eager").eval()
        extra["reload_hf_conversion_max_abs_diff"] = float((run_full(m3, ids) - ref).abs().max())
        assert extra["reload_hf_conversion_max_abs_diff"] == 0.0
        extra["bf16_rounding"] = rounding
        dt = defaultdict(int)
        for k, v in off.items():
            dt[str(v.dtype).replace("torch.", "")] += 1
        extra["official_tensor_dtypes"] = dict(dt)
    else:
        raise ValueError(fx["style"])

    # ---------------- logits + ops ----------------
    logits_path = os.path.join(folder, "logits.f32")
    ref.numpy().astype("<f4").tofile(logits_path)
    if fx["ops"]:
        ops, cache_diff = capture_ops(model, ids, ref)
        extra["use_cache_single_pass_max_abs_diff"] = cache_diff
        save_file(ops, os.path.join(folder, "ops.safetensors"), metadata={"format": "pt"})
        extra["ops"] = {k: [str(v.dtype).replace("torch.", ""), list(v.shape)] for k, v in sorted(ops.items())}

    golden = {
        "fixture": name,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "seed": fx["seed"],
        "ids": ids[0].tolist(),
        "vocab_size": cfg.vocab_size,
        "n_tokens": n,
        "prefill": P,
        "chunks": chunks,
        "hf_incremental_max_abs_diff": d_inc,
        "hf_chunked_max_abs_diff": d_ch,
        "indexer_ties": [list(x) for x in ties_full],
        "weights_dtype": weights_dtype,
        "tensor_names_style": tensor_style,
        "notes": (
            "logits.f32 = transformers DeepseekV4ForCausalLM(ids, use_cache=False).logits[0], float32, "
            "eager attention, eager experts, CPU, TF32 off. incremental = prefill `prefill` tokens with "
            "DynamicCache(config) then one token at a time; chunked = consecutive calls with `chunks` "
            "token counts. Batch 1, no padding, default position_ids. See tools/reference/README.md."
        ),
        "logits_shape": [n, cfg.vocab_size],
        "logits_sha256": sha256(logits_path),
        "max_abs_logit": float(ref.abs().max()),
        "clamp_fractions": clamp,
        "bias_changed_selections": bias_changed,
        "router_min_topk_gap": router_min_gap,
        "indexer_positions_checked": idx_checked,
        "indexer_min_rel_gap_at_k": idx_gap,
        "indexer_min_rel_gap_at": list(idx_gap_at) if idx_gap_at else None,
        "indexer_zero_score_at_k_plus_1": idx_zero,
        **extra,
    }
    with open(os.path.join(folder, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")

    # ---------------- summary ----------------
    sizes = {fn: os.path.getsize(os.path.join(folder, fn)) for fn in sorted(os.listdir(folder))}
    log(f"  layers        {cfg.layer_types}")
    log(f"  mlp           {cfg.mlp_layer_types}  compress_rates {cfg.compress_rates}")
    log(f"  tokens {n}  prefill {P}  chunks {chunks}")
    log(f"  max |logit|   {golden['max_abs_logit']:.4f}")
    log(f"  HF incremental vs full max|diff| {d_inc:.3g}   chunked vs full {d_ch:.3g}")
    log(f"  indexer ties {ties_full} (all runs: {ties_all}); positions checked {idx_checked}; "
        f"min rel gap at k {idx_gap:.3g} at {idx_gap_at}; zero score at k+1: {idx_zero}")
    for kind in ("routed", "shared"):
        c = clamp[kind]
        log(f"  clamp {kind:6s} gate>L {c['gate_gt_limit']:.3%}  up>L {c['up_gt_limit']:.3%}  "
            f"up<-L {c['up_lt_neg_limit']:.3%}  (n={c['n_elements']})")
    log(f"  bias changed top-k selection (layer: [changed, tokens]) {bias_changed}; router min gap {router_min_gap:.3g}")
    for k, v in extra.items():
        if k != "ops":
            log(f"  {k}: {v}")
    log("  files: " + ", ".join(f"{k} {v / 1024:.1f} KiB" for k, v in sizes.items()))
    log(f"  total {sum(sizes.values()) / 1024:.1f} KiB; logits sha256 {golden['logits_sha256']}")
    return {"name": name, "bytes": sum(sizes.values()), "logits_sha256": golden["logits_sha256"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output root, e.g. tests/fixtures/dsv4")
    ap.add_argument("--only", nargs="*", help="fixture names to build (default: all)")
    args = ap.parse_args()

    prepare_reference_run()
    os.makedirs(args.out, exist_ok=True)
    results = []
    for fx in FIXTURES:
        if args.only and fx["name"] not in args.only:
            continue
        results.append(make_fixture(fx, args.out))
    log("\n=== done ===")
    for r in results:
        log(f"  {r['name']:28s} {r['bytes'] / 1024:8.1f} KiB  logits sha256 {r['logits_sha256']}")
    log(f"  total {sum(r['bytes'] for r in results) / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
