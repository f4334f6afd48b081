#!/usr/bin/env python3
"""Golden fixtures for DeepSeek-V4.1-Flash (`deepseek_v41`), produced by HF transformers.

Builds tiny random `DeepseekV41ForCausalLM` models from the transformers PR-branch source (see
dsv41_source.py; float32, eager attention, eager experts, CPU) whose every path is live: Engram layers
over a token map that merges tokens, shared compressed KV (Full / Reuse), shared and re-scored indexers
(Reuse / Reindex), the two-level candidate top-k with fewer candidate blocks than blocks, ratio-2 groups
that close and stay open inside a decode step, the SwiGLU clamps and the rare quantiser branches. Each
model runs four ways (one-shot cached, use_cache=False, prefill + single-token decodes, chunked prefill);
the script checks that transformers agrees with itself, counts with hooks that every claimed path fired,
and writes one folder per fixture:

    <out>/<fixture>/config.json           composite config, released spelling (README.md)
    <out>/<fixture>/model*.safetensors    weights, F32
    <out>/<fixture>/tokenizer.json        the tiny tokenizer the token map comes from
    <out>/<fixture>/reference.safetensors token map, hash tables and ids, Engram inputs/rows/outputs,
                                          rope tables, indexer selections, candidate masks, compressed
                                          cache contents
    <out>/<fixture>/logits.f32            raw little-endian float32 [n_tokens, vocab]
    <out>/<fixture>/golden.json           metadata + checks

Usage:  python tools/reference/make_dsv41_fixtures.py --source /tmp/dsv41-src/deepseek_v41 \\
            --out tests/fixtures/dsv41
See tools/reference/README.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
from collections import defaultdict

import numpy as np
import torch
import torch.nn.functional as F

import safetensors
import transformers
from safetensors.torch import load_file, save_file

import dsv41_source

# --------------------------------------------------------------------------------------
# Fixture definitions
# --------------------------------------------------------------------------------------

# A WordLevel vocabulary whose normalised forms collide (dsv41-reference-notes.md §4): the/The/THE/" the",
# cafe/café/Café, naive/naïve, fish/ﬁsh (NFKC ligature), " "/"\n"/"\t" (the lone-space sentinel path).
WORDS = ["<unk>", "the", "The", "THE", " the", "cafe", "café", "Café", "naive", "naïve", "fish", "\ufb01sh",
         " ", "\n", "\t", "cat", "dog", "sat", "on", "mat", "a", "A", "ran", "fast", "red", "Red", "blue",
         "and", ".", ",", "<pad>"]

COMMON = dict(
    num_key_value_heads=1, head_dim=64, hidden_size=32, num_attention_heads=2, q_lora_rank=16,
    o_groups=2, o_lora_rank=8, n_shared_experts=1, moe_intermediate_size=16,
    hc_mult=4, hc_sinkhorn_iters=20, hc_eps=1e-6, rms_norm_eps=1e-20, swiglu_limit=10.0,
    routed_scaling_factor=1.5, scoring_func="sqrtsoftplus", gate_temp=1.0, norm_topk_prob=True,
    rope_theta=10000.0, compress_rope_theta=160000.0, max_position_embeddings=1048576,
    num_nextn_predict_layers=0, tie_word_embeddings=False, eos_token_id=1,
    yarn=dict(factor=16.0, original_max_position_embeddings=65536, beta_fast=32, beta_slow=1),
)

FIXTURES = [
    dict(
        name="tiny-v41",
        seed=4101,
        # layer roles: 0,1 sliding | 2 ratio-2 Full | 3 ratio-2 Reuse | 4 ratio-1 Full + candidate source
        # (Engram too, like layer 14 of the release) | 5 ratio-1 Reuse | 6 Reindex | 7 Reuse of 6
        cfg=dict(num_hidden_layers=8, qk_rope_head_dim=16, sliding_window=8,
                 compress_ratios=[0, 0, 2, 2, 1, 1, 1, 1], kv_source_layer_ids=[2, 4],
                 index_source_layer_ids=[2, 4, 6], candidate_source_layer_id=4,
                 candidate_topk_blocks=2, candidate_block_size=4,
                 index_n_heads=16, index_head_dim=32, index_topk=3,
                 n_routed_experts=4, num_experts_per_tok=2,
                 engram_layer_ids=[1, 4], engram_vocab_size=64, engram_max_ngram_size=4,
                 engram_n_heads=1, engram_head_dim=32),
        n_tokens=48, prefill=33, chunks=[7, 1, 13, 27],
        style="hf_module_names",
    ),
    dict(
        name="tiny-v41-native",
        seed=4103,
        # layer roles: 0 sliding + Engram | 1 ratio-1 Full | 2 ratio-2 Full + Engram | 3 ratio-2 Reuse |
        # 4 ratio-1 Full + candidate source | 5 Reindex. Rope 32 = the whole index head; 3-grams.
        cfg=dict(num_hidden_layers=6, hidden_size=24, qk_rope_head_dim=32, sliding_window=16,
                 compress_ratios=[0, 1, 2, 2, 1, 1], kv_source_layer_ids=[1, 2, 4],
                 index_source_layer_ids=[1, 2, 4, 5], candidate_source_layer_id=4,
                 candidate_topk_blocks=2, candidate_block_size=4,
                 index_n_heads=16, index_head_dim=32, index_topk=5,
                 n_routed_experts=4, num_experts_per_tok=3,
                 engram_layer_ids=[0, 2], engram_vocab_size=100, engram_max_ngram_size=3,
                 engram_n_heads=1, engram_head_dim=32),
        n_tokens=56, prefill=37, chunks=[1, 5, 2, 9, 11, 3, 25],
        style="native_names",
    ),
]

# Run-to-run tolerance of transformers against itself: fp32 on CPU, different chunkings only change
# GEMM shapes and summation order (~1e-6 relative); 1e-4 * max(1, |logit|) leaves two orders of margin
# and still catches any wrong mask, position or cache entry (those move logits by >1e-2).
SELF_TOLERANCE = 1e-4


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def log(*a):
    print(*a, flush=True)


def prepare_reference_run(source_folder):
    source = dsv41_source.verify_source(source_folder)
    modeling = dsv41_source.register_source(source_folder)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    log(f"transformers {transformers.__version__}, torch {torch.__version__}, safetensors {safetensors.__version__}, "
        f"numpy {np.__version__}, threads {torch.get_num_threads()}")
    return modeling, source


def tiny_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>")


def rope_parameters(c: dict) -> dict:
    partial = c["qk_rope_head_dim"] / c["head_dim"]
    return {
        "main": {"rope_type": "default", "rope_theta": c["rope_theta"], "partial_rotary_factor": partial},
        "compress": {"rope_type": "yarn", "rope_theta": c["compress_rope_theta"], "partial_rotary_factor": partial,
                     "attention_factor": 1.0, **c["yarn"]},
    }


def build_config(modeling, fx, tok, compressed_vocab):
    c = {**COMMON, **fx["cfg"]}
    kw = {k: v for k, v in c.items() if k != "yarn"}
    kw.update(vocab_size=len(tok), pad_token_id=tok.pad_token_id, engram_pad_id=tok.pad_token_id,
              engram_compressed_vocab_size=compressed_vocab, rope_parameters=rope_parameters(c),
              engram_num_embeddings=[0] * len(c["engram_layer_ids"]))
    cfg = modeling.DeepseekV41TextConfig(**kw)
    # table sizes = sum of each layer's primes (EngramLayout); HF does not derive them itself
    layout = modeling.EngramLayout.from_config(cfg)
    cfg.engram_num_embeddings = [sum(p for per in layer for p in per) for layer in layout.primes]
    return modeling.DeepseekV41TextConfig(**{**kw, "engram_num_embeddings": cfg.engram_num_embeddings})


def new_model(modeling, cfg, tok):
    m = modeling.DeepseekV41ForCausalLM._from_config(
        cfg, attn_implementation="eager", experts_implementation="eager", dtype=torch.float32).float().eval()
    assert m.config._attn_implementation == "eager" and m.config._experts_implementation == "eager"
    m.model.bind_tokenizer(tok)
    return m


def randn(g, *shape):
    return torch.randn(*shape, generator=g, dtype=torch.float32)


@torch.no_grad()
def randomise(name: str, t: torch.Tensor, g: torch.Generator):
    """One tensor's re-randomisation rule, chosen by its transformers name (used in sorted-name order)."""
    shape = tuple(t.shape)
    if name.endswith("weight_scale_inv"):
        t.data.fill_(1.0)        # notes W3: HF ignores it for a float table; the loader must too
    elif name.endswith(("e_score_correction_bias", "e_score_correction_bias_vl")):
        t.data.copy_(0.3 * randn(g, *shape))
    elif name.endswith("self_attn.sinks"):
        t.data.copy_(randn(g, *shape))
    elif name.endswith(("attn_hc.fn", "ffn_hc.fn")):
        t.data.copy_(randn(g, *shape) * shape[1] ** -0.5 * 1.5)
    elif name.endswith(("attn_hc.base", "ffn_hc.base")):
        t.data.copy_(0.5 * randn(g, *shape))
    elif name.endswith(("attn_hc.scale", "ffn_hc.scale")):
        t.data.copy_(0.5 + torch.rand(*shape, generator=g))
    elif name.endswith(("engram.q_weight", "engram.k_weight")):
        t.data.copy_(1.0 + 0.3 * randn(g, *shape))
    elif re.search(r"engram_tables\.\d+\.weight$", name):
        t.data.copy_(randn(g, *shape))
    elif "norm" in name and name.endswith(".weight") and t.dim() == 1:
        t.data.copy_(1.0 + 0.1 * randn(g, *shape))
    elif name == "model.embed_tokens.weight":
        t.data.copy_(randn(g, *shape))
    elif name == "lm_head.weight":
        t.data.copy_(randn(g, *shape) * shape[1] ** -0.5 * 2.5)
    elif name.endswith("mlp.experts.gate_up_proj"):             # [E, 2I, D]; gain 6 -> clamps fire
        t.data.copy_(randn(g, *shape) * shape[2] ** -0.5 * 6.0)
    elif name.endswith("mlp.experts.down_proj"):                # [E, D, I]
        t.data.copy_(randn(g, *shape) * shape[2] ** -0.5 * 0.08)
    elif name.endswith(("shared_experts.gate_proj.weight", "shared_experts.up_proj.weight")):
        t.data.copy_(randn(g, *shape) * shape[1] ** -0.5 * 6.0)
    elif name.endswith("shared_experts.down_proj.weight"):
        t.data.copy_(randn(g, *shape) * shape[1] ** -0.5 * 0.08)
    elif name.endswith("compressor.gate_proj.weight"):          # non-uniform pooling softmax
        t.data.copy_(randn(g, *shape) * shape[1] ** -0.5 * 1.5)
    elif name.endswith(".weight") and t.dim() == 2:             # every other linear, incl. o_a_proj
        t.data.copy_(randn(g, *shape) * shape[1] ** -0.5)
    else:
        raise RuntimeError(f"init_weights: no rule for {name} {shape} {t.dtype}")


@torch.no_grad()
def init_weights(model, seed: int):
    """Overwrite every parameter and persistent buffer by sorted name (notes §4 'Init values')."""
    g = torch.Generator().manual_seed(seed)
    sd = model.state_dict(keep_vars=True)
    for name in sorted(sd):
        randomise(name, sd[name], g)

    cfg = model.config
    layers = model.model.layers
    # FP8 window quantiser amax floor (1e-4): one 32-channel block of layer 0's kv_norm ~1e-6
    # (channels 0..31 are outside the RoPE tail, so the block is quantised as it leaves the norm).
    layers[0].self_attn.kv_norm.weight[:32] = 1e-6 * (1.0 + 0.1 * randn(g, 32))
    # FP4 compressed-KV quantiser (16-blocks, e4m3 scales) of the first KV source: block 0 ~1e-3 hits the
    # 6*2^-9 floor, block 1 ~0.02 gives a subnormal e4m3 scale (amax/6 < 2^-6).
    comp = layers[cfg.kv_source_layer_ids[0]].self_attn.compressor
    comp.kv_norm.weight[:16] = 1e-3 * (1.0 + 0.1 * randn(g, 16))
    comp.kv_norm.weight[16:32] = 0.02 * (1.0 + 0.1 * randn(g, 16))


# --------------------------------------------------------------------------------------
# Instrumentation: every path counted with hooks
# --------------------------------------------------------------------------------------


class Probes:
    """Forward hooks (plus counting wrappers around HF's two fake-quant functions, which are plain
    functions, not modules) that count every path, capture indexer selections and check ties."""

    def __init__(self, model, modeling):
        self.model, self.modeling, self.cfg = model, modeling, model.config
        self.handles, self.run = [], None
        self.count = defaultdict(int)
        self.sel = defaultdict(dict)      # run -> {(layer, pos): sorted tuple}
        self.cand = defaultdict(dict)     # run -> {(layer, pos): tuple of candidate entries}
        self.one_shot_scores = {}         # layer -> [T, entries] index scores before any mask
        self.ties, self.min_gap = [], (float("inf"), None)
        self.clamp = defaultdict(lambda: np.zeros(4, dtype=np.int64))
        self.bias_changed = [0, 0]
        self._orig = {n: getattr(modeling, n) for n in ("_fake_quant_fp8_block", "_fake_quant_fp4_block")}
        modeling._fake_quant_fp8_block = self._fp8_counter
        modeling._fake_quant_fp4_block = self._fp4_counter
        for i, layer in enumerate(model.model.layers):
            attn = layer.self_attn
            self.handles.append(layer.mlp.experts.register_forward_pre_hook(self._experts_pre(i)))
            self.handles.append(layer.mlp.shared_experts.register_forward_pre_hook(self._shared_pre(i)))
            self.handles.append(layer.mlp.gate.register_forward_pre_hook(self._router_pre))
            if layer.engram is not None:
                self.handles.append(layer.engram.register_forward_pre_hook(self._engram_pre(i)))
            if attn.compressor is not None:
                self.handles.append(attn.compressor.register_forward_hook(self._compressor_post(i)))
            if attn.indexer is not None:
                self.handles.append(attn.indexer.register_forward_hook(self._indexer_post(i)))
            elif attn.compress_ratio:
                self.handles.append(attn.register_forward_pre_hook(self._reuse_pre(i), with_kwargs=True))

    def remove(self):
        for h in self.handles:
            h.remove()
        for n, f in self._orig.items():
            setattr(self.modeling, n, f)

    # quantiser branches --------------------------------------------------------------
    def _fp8_counter(self, x, block_size=32):
        n = x.shape[-1]
        self.count["fp8.calls"] += 1
        if n % block_size:
            self.count["fp8.skipped_width"] += 1
        else:
            amax = x.float().view(*x.shape[:-1], n // block_size, block_size).abs().amax(-1)
            self.count["fp8.blocks"] += amax.numel()
            self.count["fp8.amax_floor_1e-4"] += int((amax < 1e-4).sum())
        return self._orig["_fake_quant_fp8_block"](x, block_size=block_size)

    def _fp4_counter(self, x, block_size, e4m3_scales=False):
        n = x.shape[-1]
        kind = "fp4_e4m3_16" if e4m3_scales else "fp4_ue8m0_32"
        self.count[f"{kind}.calls"] += 1
        if n % block_size:
            self.count[f"{kind}.skipped_width"] += 1
        else:
            amax = x.float().view(*x.shape[:-1], n // block_size, block_size).abs().amax(-1)
            self.count[f"{kind}.blocks"] += amax.numel()
            if e4m3_scales:
                floor = 6.0 * 2.0 ** -9
                self.count[f"{kind}.amax_floor"] += int((amax < floor).sum())
                self.count[f"{kind}.subnormal_scale"] += int(((amax >= floor) & (amax / 6.0 < 2.0 ** -6)).sum())
                # c10's float->e4m3fn cast gives NaN from 480 up instead of saturating (notes §2.5)
                self.count[f"{kind}.scale_over_448"] += int((amax / 6.0 > 448.0).sum())
            else:
                self.count[f"{kind}.amax_floor"] += int((amax < 6.0 * 2.0 ** -126).sum())
        return self._orig["_fake_quant_fp4_block"](x, block_size, e4m3_scales=e4m3_scales)

    # MoE ----------------------------------------------------------------------------
    def _clamp_count(self, kind, gate, up):
        L = self.cfg.swiglu_limit
        c = self.clamp[kind]
        c += np.array([int((gate > L).sum()), int((up > L).sum()), int((up < -L).sum()), gate.numel()])

    def _experts_pre(self, li):
        def hook(mod, args):
            x, idx, _ = args
            inter = mod.intermediate_dim
            for e in range(mod.num_experts):
                tok, _ = torch.where(idx == e)
                if tok.numel():
                    w = mod.gate_up_proj[e]
                    self._clamp_count("routed", F.linear(x[tok], w[:inter]), F.linear(x[tok], w[inter:]))
        return hook

    def _shared_pre(self, li):
        def hook(mod, args):
            self._clamp_count("shared", mod.gate_proj(args[0]), mod.up_proj(args[0]))
        return hook

    def _router_pre(self, mod, args):
        flat = args[0].reshape(-1, mod.hidden_dim).float()
        scores = mod.score_fn(F.linear(flat, mod.weight.float()) / mod.gate_temp)
        a = (scores + mod.e_score_correction_bias).topk(mod.top_k, dim=-1).indices.sort(-1).values
        b = scores.topk(mod.top_k, dim=-1).indices.sort(-1).values
        self.bias_changed[0] += int((a != b).any(-1).sum())
        self.bias_changed[1] += flat.shape[0]

    # Engram / compressor / Reuse -----------------------------------------------------
    def _engram_pre(self, li):
        def hook(mod, args):
            if args[1] is not None:
                self.count[f"engram.layer{li}.calls"] += 1
        return hook

    def _compressor_post(self, li):
        def hook(mod, args, out):
            seq_len, emitted = args[0].shape[1], int(out[2].sum())
            self.count[f"compressor.layer{li}.entries"] += emitted
            if seq_len == 1 and mod.compress_ratio > 1:
                self.count[f"ratio2.decode_step_{'closes' if emitted else 'stays_open'}"] += 1
        return hook

    def _reuse_pre(self, li):
        def hook(mod, args, kwargs):
            topk = kwargs["shared"].get("topk_idx")
            if topk is not None and bool((topk >= 0).any()):
                self.count[f"reuse.layer{li}.calls_with_picks"] += 1
        return hook

    # indexer -------------------------------------------------------------------------
    def _indexer_post(self, li):
        def hook(mod, args, out):
            hidden, q_residual, _, _, position_ids, _, shared = args
            topk = shared.get("topk_idx")
            mode = "full" if mod.owns_k else "reindex"
            if topk is None:
                self.count[f"indexer.layer{li}.{mode}.calls_without_keys"] += 1
                return
            self.count[f"indexer.layer{li}.{mode}.calls"] += 1
            scores, allowed, cand = self._scores(mod, hidden, q_residual, position_ids, shared)
            if self.run == "one_shot":
                self.one_shot_scores[li] = scores.clone()
            positions = position_ids[0].tolist()
            for s, t in enumerate(positions):
                picks = tuple(sorted(int(v) for v in topk[0, s] if v >= 0))
                self.sel[self.run][(li, t)] = picks
                visible = int(shared["compress_lens"][0, s])
                if cand is not None:
                    # HF's mask also covers not-yet-visible entries of a partly visible block, up to the
                    # call's capacity (so it depends on the chunking); only visible entries matter
                    self.cand[self.run][(li, t)] = tuple(int(v) for v in cand[0, s, :visible].nonzero()[:, 0])
                n_allowed = int(allowed[s].sum())
                k = min(mod.index_topk, topk.shape[-1])
                self._check_selection(li, t, scores[s], allowed[s], picks, k)
                if n_allowed > k:
                    self.count[f"indexer.layer{li}.{mode}.queries_with_real_choice"] += 1
                if mod.uses_candidates and not mod.is_candidate_source and n_allowed < visible:
                    self.count[f"indexer.layer{li}.reindex.queries_pruned_by_candidates"] += 1
                if mod.is_candidate_source and -(-visible // mod.candidate_block_size) > mod.candidate_topk_blocks:
                    self.count[f"indexer.layer{li}.candidate_blocks_fewer_than_blocks"] += 1
        return hook

    @torch.no_grad()
    def _scores(self, mod, hidden, q_residual, position_ids, shared):
        """HF's score arithmetic (DeepseekV41Indexer.forward step 2), for the tie check only."""
        md = self.modeling
        b, s, _ = hidden.shape
        cos, sin = mod.rotary_emb(hidden, position_ids=position_ids, layer_type="compress")
        q = md.apply_rotary_pos_emb(mod.q_b_proj(q_residual).view(b, s, mod.num_heads, mod.head_dim), cos, sin)
        q = self._orig["_fake_quant_fp4_block"](q, block_size=32).float()
        keys = shared["index_k"][:, 0].float()
        w = mod.weights_proj(hidden).float() * mod.heads_scaling
        sc = (torch.einsum("bshd,btd->bsht", q, keys).relu() * mod.softmax_scale * w.unsqueeze(-1)).sum(2)[0]
        ent = torch.arange(sc.shape[-1]).view(1, -1)
        allowed = ent < shared["compress_lens"][0].unsqueeze(-1)
        cand = shared.get("candidates") if mod.uses_candidates or mod.is_candidate_source else None
        if cand is not None and not mod.is_candidate_source:
            allowed = allowed & cand[0]
        return sc, allowed, cand

    def _check_selection(self, li, t, scores, allowed, picks, k):
        vals = scores.masked_fill(~allowed, float("-inf"))
        order = vals.sort(descending=True)
        mine = tuple(sorted(int(i) for i, v in zip(order.indices[:k], order.values[:k]) if v > float("-inf")))
        assert mine == picks, f"layer {li} pos {t}: recomputed selection {mine} != HF {picks}"
        if int(allowed.sum()) > k:
            a, b = float(order.values[k - 1]), float(order.values[k])
            gap = (a - b) / max(1.0, abs(a))
            if gap < 1e-6:
                self.ties.append((li, t, a, b))
            if gap < self.min_gap[0]:
                self.min_gap = (gap, (li, t))


# --------------------------------------------------------------------------------------
# The runs
# --------------------------------------------------------------------------------------


def capture_engram_io(model) -> tuple[dict, list]:
    """Forward hooks on every Engram module: its stream input, gathered table rows and stream output
    (batch 0), the op-level golden for the engine's Engram. Returns (captures by layer, handles)."""
    captured, handles = {}, []
    for i, layer in enumerate(model.model.layers):
        if layer.engram is not None:
            def hook(mod, args, out, i=i):
                captured[i] = {"streams_in": args[0][0].float().clone(), "rows": args[1][0].float().clone(),
                               "streams_out": out[0].float().clone()}
            handles.append(layer.engram.register_forward_hook(hook))
    return captured, handles


@torch.no_grad()
def run_one_shot(model, ids, cache=None):
    cache = cache if cache is not None else dsv41_source.new_cache(model.config)
    return model(ids, past_key_values=cache, use_cache=True).logits[0].float().clone(), cache


@torch.no_grad()
def run_no_cache(model, ids):
    return model(ids, use_cache=False).logits[0].float().clone()


@torch.no_grad()
def run_chunks(model, ids, chunks):
    cache = dsv41_source.new_cache(model.config)
    outs, p = [], 0
    for c in chunks:
        outs.append(model(ids[:, p:p + c], past_key_values=cache, use_cache=True).logits[0])
        p += c
    return torch.cat(outs, 0).float()


def check_close(ref, other, what):
    diff = (ref - other).abs()
    bad = diff > SELF_TOLERANCE * torch.clamp(ref.abs(), min=1.0)
    if bad.any():
        raise AssertionError(f"{what}: transformers disagrees with its one-shot run at {bad.nonzero()[0].tolist()}: "
                             f"max |diff| {diff.max().item():.3g}")
    return float(diff.max())


# --------------------------------------------------------------------------------------
# Writers
# --------------------------------------------------------------------------------------

# HF name -> released-checkpoint name: the reverse of the PR's `deepseek_v41_text` conversion mapping as
# HF's own test spells it (tests/models/deepseek_v41/test_modeling_deepseek_v41.py `_to_native_name`
# @dfcfb77), plus the per-expert split that test does separately.
NATIVE_RENAMES = (
    ("model.layers.", "layers."), ("model.embed_tokens.", "embed."), ("model.norm.", "norm."), ("lm_head.", "head."),
    (".self_attn.", ".attn."), (".mlp.", ".ffn."), (".input_layernorm.", ".attn_norm."),
    (".post_attention_layernorm.", ".ffn_norm."), (".attn_hc.fn", ".hc_attn_fn"), (".attn_hc.base", ".hc_attn_base"),
    (".attn_hc.scale", ".hc_attn_scale"), (".ffn_hc.fn", ".hc_ffn_fn"), (".ffn_hc.base", ".hc_ffn_base"),
    (".ffn_hc.scale", ".hc_ffn_scale"), (".attn.sinks", ".attn.attn_sink"), (".q_a_proj.", ".wq_a."),
    (".q_a_norm.", ".q_norm."), (".q_b_proj.", ".wq_b."), (".attn.kv_proj.", ".attn.wkv."),
    (".compressor.kv_proj.", ".compressor.wkv."), (".compressor.gate_proj.", ".compressor.wgate."),
    (".compressor.kv_norm.", ".compressor.norm."), (".indexer.k_proj.", ".indexer.wk."), (".o_a_proj.", ".wo_a."),
    (".o_b_proj.", ".wo_b."), (".gate.e_score_correction_bias_vl", ".gate.bias_vl"),
    (".gate.e_score_correction_bias", ".gate.bias"), (".shared_experts.gate_proj.", ".shared_experts.w1."),
    (".shared_experts.up_proj.", ".shared_experts.w3."), (".shared_experts.down_proj.", ".shared_experts.w2."),
)


def native_name(name):
    for hf, native in NATIVE_RENAMES:
        name = name.replace(hf, native)
    return re.sub(r"^model\.engram_tables\.(\d+)\.", r"layers.\1.engram.embed.", name)


def to_native_state(model) -> dict:
    """Released names, experts split per expert (w1 = gate rows, w3 = up rows, w2 = down). The F32 Engram
    table carries no `.scale` (the released FP8 table does; a float table is used unscaled, notes W3)."""
    inter = model.config.moe_intermediate_size
    out = {}
    for name, t in model.state_dict().items():
        n = native_name(name)
        if name.endswith("weight_scale_inv"):
            continue
        if name.endswith("mlp.experts.gate_up_proj"):
            base = n[: -len("gate_up_proj")]
            for e in range(t.shape[0]):
                out[f"{base}{e}.w1.weight"] = t[e, :inter].clone()
                out[f"{base}{e}.w3.weight"] = t[e, inter:].clone()
        elif name.endswith("mlp.experts.down_proj"):
            base = n[: -len("down_proj")]
            for e in range(t.shape[0]):
                out[f"{base}{e}.w2.weight"] = t[e].clone()
        else:
            out[n] = t.detach().clone()
    return out


def from_native_state(model, native: dict) -> dict:
    """Our inverse of to_native_state: native tensors -> HF state dict (weight_scale_inv back to 1)."""
    sd = {}
    for name, t in model.state_dict().items():
        n = native_name(name)
        if name.endswith("weight_scale_inv"):
            sd[name] = torch.ones_like(t)
        elif name.endswith("mlp.experts.gate_up_proj"):
            base = n[: -len("gate_up_proj")]
            sd[name] = torch.stack([torch.cat([native[f"{base}{e}.w1.weight"], native[f"{base}{e}.w3.weight"]])
                                    for e in range(t.shape[0])])
        elif name.endswith("mlp.experts.down_proj"):
            base = n[: -len("down_proj")]
            sd[name] = torch.stack([native[f"{base}{e}.w2.weight"] for e in range(t.shape[0])])
        else:
            sd[name] = native[n]
    return sd


def release_config(cfg) -> dict:
    """config.json as the released checkpoint spells it: composite, text params under `text_config`,
    flat `rope_scaling`, `engram_pad_token_id` (HF reads `engram_pad_id`, notes §1)."""
    comp = cfg.rope_parameters["compress"]
    keys = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "head_dim", "q_lora_rank", "qk_rope_head_dim", "o_groups", "o_lora_rank", "rope_theta",
            "compress_rope_theta", "max_position_embeddings", "sliding_window", "compress_ratios",
            "kv_source_layer_ids", "index_source_layer_ids", "candidate_source_layer_id", "candidate_topk_blocks",
            "candidate_block_size", "index_n_heads", "index_head_dim", "index_topk", "moe_intermediate_size",
            "n_routed_experts", "n_shared_experts", "num_experts_per_tok", "scoring_func", "gate_temp",
            "norm_topk_prob", "routed_scaling_factor", "topk_method", "swiglu_limit", "hc_mult",
            "hc_sinkhorn_iters", "hc_eps", "rms_norm_eps", "engram_layer_ids", "engram_vocab_size",
            "engram_num_embeddings", "engram_max_ngram_size", "engram_n_heads", "engram_head_dim",
            "engram_compressed_vocab_size", "num_nextn_predict_layers", "hidden_act", "tie_word_embeddings",
            "pad_token_id", "eos_token_id")
    text = {k: getattr(cfg, k) for k in keys}
    text.update(model_type="deepseek_v41_text", engram_pad_token_id=cfg.engram_pad_id,
                rope_scaling={"rope_type": "yarn", **{k: comp[k] for k in ("factor", "original_max_position_embeddings",
                                                                          "beta_fast", "beta_slow")}})
    return {"architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41", "torch_dtype": "float32",
            "text_config": dict(sorted(text.items()))}


def config_from_release(modeling, rel: dict):
    text = dict(rel["text_config"])
    text.pop("model_type")
    text["engram_pad_id"] = text.pop("engram_pad_token_id")
    return modeling.DeepseekV41TextConfig(**text)


def check_config_roundtrip(modeling, rel, cfg):
    c2 = config_from_release(modeling, rel)
    problems = [k for k in ("layer_types", "compress_ratios", "kv_source_layer_ids", "index_source_layer_ids",
                            "candidate_source_layer_id", "engram_pad_id", "engram_num_embeddings")
                if getattr(c2, k) != getattr(cfg, k)]
    r1, r2 = modeling.DeepseekV41RotaryEmbedding(cfg), modeling.DeepseekV41RotaryEmbedding(c2)
    problems += [f"{lt}_inv_freq" for lt in ("main", "compress")
                 if not torch.equal(getattr(r1, f"{lt}_inv_freq"), getattr(r2, f"{lt}_inv_freq"))]
    if problems:
        raise AssertionError(f"config.json does not reproduce the generating config: {problems}")
    return c2


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def reference_tensors(model, ids, cache, selections, candidates, scores, engram_io, T) -> dict:
    mm, hs = model.model, model.model.engram_hash_state
    out = {
        "ids": ids[0].to(torch.int64),
        "rope.main_inv_freq": mm.rotary_emb.main_inv_freq.float(),
        "rope.compress_inv_freq": mm.rotary_emb.compress_inv_freq.float(),
        "engram.token_map": hs.token_map.to(torch.int64),
        "engram.primes": hs.primes.to(torch.int64),
        "engram.offsets": hs.offsets.to(torch.int64),
        "engram.multipliers": hs.multipliers.to(torch.int64),
        # a direct call without a cache: a call with one would advance the look-back
        "engram.hash_ids": hs(ids, None, None)[0].to(torch.int64),
    }
    for li, io in sorted(engram_io.items()):
        for key, t in io.items():
            out[f"engram.layer{li}.{key}"] = t
    for n, b in model.named_buffers():
        if n.endswith(("main_inv_freq", "compress_inv_freq")) and "original" not in n:
            assert torch.equal(b, out["rope." + n.split(".")[-1]]), n
    for li in model.config.index_source_layer_ids:
        rows = [selections[(li, t)] for t in range(T)]
        k = max(len(r) for r in rows)
        out[f"indexer.layer{li}.topk"] = torch.tensor([list(r) + [-1] * (k - len(r)) for r in rows], dtype=torch.int32)
        out[f"indexer.layer{li}.scores"] = scores[li].float()
    li = model.config.candidate_source_layer_id
    width = T // model.config.compress_ratios[li]
    mask = torch.zeros(T, width, dtype=torch.uint8)
    for t in range(T):
        mask[t, list(candidates[(li, t)])] = 1
    out[f"indexer.layer{li}.candidates"] = mask
    for li in model.config.kv_source_layer_ids:
        layer = cache.layers[li]
        out[f"cache.layer{li}.entries"] = layer.compressed_kv["compressor"][0, 0].float().clone()
        out[f"cache.layer{li}.index_keys"] = layer.compressed_kv["indexer"][0, 0].float().clone()
    return {k: v.contiguous() for k, v in out.items()}


# --------------------------------------------------------------------------------------
# Main per-fixture driver
# --------------------------------------------------------------------------------------


def make_fixture(modeling, source, fx: dict, out_root: str) -> dict:
    name = fx["name"]
    log(f"\n=== {name} ===")
    folder = os.path.join(out_root, name)
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)

    tok = tiny_tokenizer()
    token_map, compressed_vocab = modeling.build_compressed_token_map(tok)
    assert compressed_vocab < len(tok), "the token map must merge tokens"
    torch.manual_seed(fx["seed"])                   # only HF's constructor init uses it; all overwritten
    cfg = build_config(modeling, fx, tok, compressed_vocab)
    model = new_model(modeling, cfg, tok)
    init_weights(model, fx["seed"])

    T, P, chunks = fx["n_tokens"], fx["prefill"], fx["chunks"]
    assert sum(chunks) == T and P % 2 == 1
    g = torch.Generator().manual_seed(fx["seed"] + 1)
    ids = torch.randint(0, len(tok), (1, T), generator=g)
    merged = defaultdict(set)
    for i in ids[0].tolist():
        merged[token_map[i]].add(i)
    merged_used = sorted(sorted(v) for v in merged.values() if len(v) > 1)
    assert merged_used, "the ids must contain two tokens that the Engram token map merges"

    probes = Probes(model, modeling)
    probes.run = "one_shot"
    engram_io, engram_hooks = capture_engram_io(model)
    ref, cache = run_one_shot(model, ids)
    for h in engram_hooks:
        h.remove()
    assert sorted(engram_io) == sorted(cfg.engram_layer_ids), "every Engram layer is captured"
    counts_one_shot = dict(probes.count)
    clamp = {k: v.tolist() for k, v in probes.clamp.items()}
    bias_changed = list(probes.bias_changed)
    probes.run = "no_cache"
    no_cache = run_no_cache(model, ids)
    probes.run = "incremental"
    inc = run_chunks(model, ids, [P] + [1] * (T - P))
    probes.run = "chunked"
    ch = run_chunks(model, ids, chunks)
    probes.remove()
    counts_all = dict(probes.count)

    d_nc, d_inc, d_ch = check_close(ref, no_cache, "use_cache=False"), check_close(ref, inc, "incremental"), \
        check_close(ref, ch, "chunked")
    for run in ("no_cache", "incremental", "chunked"):
        diff = [(k, probes.sel["one_shot"][k], v) for k, v in sorted(probes.sel[run].items())
                if probes.sel["one_shot"][k] != v]
        assert not diff, f"{run}: indexer selections differ from the one-shot run (layer, pos): {diff[:4]}"
        assert probes.cand[run] == probes.cand["one_shot"], f"{run}: candidate masks differ from the one-shot run"
    if probes.ties:
        raise AssertionError(f"{name}: indexer near-ties at the k-th place: {probes.ties[:5]}")
    assert ref.isfinite().all()

    # every claimed path fired (counted over all four runs unless noted)
    c, L = counts_all, cfg.num_hidden_layers
    need = [f"engram.layer{li}.calls" for li in cfg.engram_layer_ids]
    need += [f"compressor.layer{li}.entries" for li in cfg.kv_source_layer_ids]
    need += ["ratio2.decode_step_closes", "ratio2.decode_step_stays_open",
             "fp8.amax_floor_1e-4", "fp4_e4m3_16.amax_floor", "fp4_e4m3_16.subnormal_scale"]
    cs = cfg.candidate_source_layer_id
    need += [f"indexer.layer{cs}.candidate_blocks_fewer_than_blocks"]
    for li in cfg.index_source_layer_ids:
        mode = "full" if li in cfg.kv_source_layer_ids else "reindex"
        need += [f"indexer.layer{li}.{mode}.calls", f"indexer.layer{li}.{mode}.queries_with_real_choice"]
        if mode == "reindex":
            need += [f"indexer.layer{li}.reindex.queries_pruned_by_candidates"]
    need += [f"reuse.layer{li}.calls_with_picks" for li in range(L)
             if cfg.compress_ratios[li] and li not in cfg.index_source_layer_ids]
    missing = [k for k in need if c.get(k, 0) == 0]
    assert not missing, f"{name}: paths that never fired: {missing}"
    for kind in ("fp8", "fp4_e4m3_16", "fp4_ue8m0_32"):
        assert c.get(f"{kind}.skipped_width", 0) == 0, f"{name}: HF skipped {kind} fake-quant (width)"
    assert c.get("fp4_e4m3_16.scale_over_448", 0) == 0, "e4m3 scale would overflow"
    for kind in ("routed", "shared"):
        gate_gt, up_gt, up_lt, _ = clamp[kind]
        assert gate_gt > 0 and up_gt > 0 and up_lt > 0, f"{name}: {kind} SwiGLU clamps never all fire: {clamp[kind]}"
    assert bias_changed[0] > 0, "router bias never changes a selection"

    # ---------------- write ----------------
    extra = {}
    rel = release_config(cfg)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(rel, f, indent=2)
        f.write("\n")
    c2 = check_config_roundtrip(modeling, rel, cfg)
    m2 = new_model(modeling, c2, tok)
    if fx["style"] == "hf_module_names":
        sd = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
        save_file(sd, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
        m2.load_state_dict(load_file(os.path.join(folder, "model.safetensors")), strict=True)
        tensor_style = "transformers module names at dfcfb77 (model.state_dict() keys), F32"
    else:
        save_file(to_native_state(model), os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
        m2.load_state_dict(from_native_state(m2, load_file(os.path.join(folder, "model.safetensors"))), strict=True)
        tensor_style = ("released checkpoint names (layers.N.attn.wq_a.weight, layers.N.ffn.experts.E.w1.weight, "
                        "layers.N.engram.embed.weight, ...), F32, no .scale tensors")
    extra["reload_from_files_max_abs_diff"] = float((run_one_shot(m2, ids)[0] - ref).abs().max())
    assert extra["reload_from_files_max_abs_diff"] == 0.0, "config.json + weights do not reproduce the logits"
    open(os.path.join(folder, "tokenizer.json"), "w").write(tok.backend_tokenizer.to_str(pretty=True) + "\n")
    save_file(reference_tensors(model, ids, cache, probes.sel["one_shot"], probes.cand["one_shot"],
                                probes.one_shot_scores, engram_io, T),
              os.path.join(folder, "reference.safetensors"), metadata={"format": "pt"})
    logits_path = os.path.join(folder, "logits.f32")
    ref.numpy().astype("<f4").tofile(logits_path)

    golden = {
        "fixture": name,
        "source": {"repo": "huggingface/transformers", "files": source},
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "seed": fx["seed"],
        "ids": ids[0].tolist(),
        "vocab_size": cfg.vocab_size,
        "n_tokens": T,
        "prefill": P,
        "chunks": chunks,
        "engram_compressed_vocab_size": compressed_vocab,
        "engram_merged_ids_in_sequence": merged_used,
        "hf_no_cache_max_abs_diff": d_nc,
        "hf_incremental_max_abs_diff": d_inc,
        "hf_chunked_max_abs_diff": d_ch,
        "self_tolerance": f"{SELF_TOLERANCE} * max(1, |logit|)",
        "indexer_min_rel_gap_at_k": probes.min_gap[0],
        "indexer_min_rel_gap_at": list(probes.min_gap[1]) if probes.min_gap[1] else None,
        "path_counts_one_shot": dict(sorted(counts_one_shot.items())),
        "path_counts_all_runs": dict(sorted(counts_all.items())),
        "clamp_counts": {k: dict(zip(("gate_gt_limit", "up_gt_limit", "up_lt_neg_limit", "elements"), v))
                         for k, v in sorted(clamp.items())},
        "bias_changed_selections": bias_changed,
        "weights_dtype": "float32",
        "tensor_names_style": tensor_style,
        "notes": ("logits.f32 = transformers DeepseekV41ForCausalLM(ids, past_key_values=<fresh cache>, "
                  "use_cache=True).logits[0] (one-shot cached run), float32, eager attention + experts, CPU, TF32 "
                  "off. use_cache=False, prefill `prefill` + single-token decodes, and `chunks` agree with it to "
                  "`self_tolerance`, and their indexer selections and candidate masks are identical as sets. "
                  "Batch 1, no padding, default positions. See tools/reference/README.md."),
        "logits_shape": [T, cfg.vocab_size],
        "logits_sha256": sha256(logits_path),
        "max_abs_logit": float(ref.abs().max()),
        **extra,
    }
    with open(os.path.join(folder, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")

    sizes = {fn: os.path.getsize(os.path.join(folder, fn)) for fn in sorted(os.listdir(folder))}
    log(f"  compress_ratios {cfg.compress_ratios} kv {cfg.kv_source_layer_ids} index {cfg.index_source_layer_ids} "
        f"candidates@{cs} engram {cfg.engram_layer_ids} tables {cfg.engram_num_embeddings}")
    log(f"  tokens {T} prefill {P} chunks {chunks}; token map {len(tok)} -> {compressed_vocab}, merged ids {merged_used}")
    log(f"  max|diff| vs one-shot: no-cache {d_nc:.3g}  incremental {d_inc:.3g}  chunked {d_ch:.3g}; "
        f"max |logit| {golden['max_abs_logit']:.3f}")
    log(f"  indexer min rel gap at k {probes.min_gap[0]:.3g} at {probes.min_gap[1]}")
    for k, v in sorted(counts_all.items()):
        log(f"    {k}: {v}")
    log(f"  clamps {clamp}; bias changed {bias_changed}")
    log("  files: " + ", ".join(f"{k} {v / 1024:.1f} KiB" for k, v in sizes.items()))
    return {"name": name, "bytes": sum(sizes.values()), "logits_sha256": golden["logits_sha256"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default="/tmp/dsv41-src/deepseek_v41",
                    help="folder holding the three deepseek_v41 source files (outside the repository)")
    ap.add_argument("--out", required=True, help="output root, e.g. tests/fixtures/dsv41")
    ap.add_argument("--only", nargs="*", help="fixture names to build (default: all)")
    args = ap.parse_args()

    modeling, source = prepare_reference_run(args.source)
    os.makedirs(args.out, exist_ok=True)
    results = [make_fixture(modeling, source, fx, args.out) for fx in FIXTURES
               if not args.only or fx["name"] in args.only]
    log("\n=== done ===")
    for r in results:
        log(f"  {r['name']:20s} {r['bytes'] / 1024:8.1f} KiB  logits sha256 {r['logits_sha256']}")
    log(f"  total {sum(r['bytes'] for r in results) / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
