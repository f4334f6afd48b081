#!/usr/bin/env python3
"""Golden fixture for DeepSeek-V4.1's DSpark drafter, built from transformers' own DeepSeek-V4.1 modules.

transformers has no DSpark class (the PR-branch source ignores `mtp.*` on load), so this script wires the
drafter of docs/dsv41-model.md §8 out of the DeepSeek-V4.1 source's parts (dsv41_source.py; float32, eager
attention and experts, CPU, 2 threads):

    F_t    = concat over the target layers l of mean_k X^l_t[k]   X^l = streams entering layer l after Engram
                                                                  (forward pre-hook on layer l's attn_hc)
    main_x = main_norm(main_proj(F))                              nn.Linear + DeepseekV41RMSNorm
    ctx_s  = FP8(rope_main(kv_norm_s(kv_proj_s(main_x_t)), t))    stage s's own attention weights, every t
    block  = [x_{p+1}, noise x (B-1)] at positions p+1..p+B       shared embedding, hc_mult copies, pre one-hot
    X, pre = DeepseekV41DecoderLayer_s(X, pre) for s = 0..S-1     single-pass mHC, pre carried across stages;
                                                                  keys = ctx_s rows in (p-W, p] + all B block rows
    h      = sum_k pre_k X_k;  base = head(norm(h))               DeepseekV41DecoderLayer.hc_collapse, main head
    logits_j = base_j + markov_head(markov_embed(prev_j));  prev_0 = x_{p+1}, prev_{j+1} = argmax logits_j
    conf_j = sigmoid(confidence([h_j ; markov_embed(prev_j)]))

The main model is the `tiny-v41-native` fixture of make_dsv41_fixtures.py (same config, seed and ids; its
logits are checked bit for bit against <dsv41>/tiny-v41-native/logits.f32), extended by three DSpark stages.
Writes one folder:

    <out>/tiny-v41-dspark/config.json           composite config, release spelling, dspark_* keys
    <out>/tiny-v41-dspark/model.safetensors     main weights + mtp.* under released names, F32
    <out>/tiny-v41-dspark/golden.json           ids, anchors, settings, versions, seeds, choices, checks
    <out>/tiny-v41-dspark/features.f32          little-endian float32 [T, n_targets * hidden]
    <out>/tiny-v41-dspark/draft_logits.f32      little-endian float32 [anchors, B, vocab] (Markov term included)
    <out>/tiny-v41-dspark/draft_base_logits.f32 little-endian float32 [anchors, B, vocab] (without it)
    <out>/tiny-v41-dspark/drafts.i32            little-endian int32 [anchors, B]
    <out>/tiny-v41-dspark/confidence.f32        little-endian float32 [anchors, B]

Usage:  python tools/reference/make_dspark_fixture.py --source /tmp/dsv41-src/deepseek_v41 \\
            --out tests/fixtures/dsv41-dspark
See tools/reference/README.md ("DeepSeek-V4.1 DSpark fixture").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_dsv41_fixtures as base  # noqa: E402  (same folder; nothing runs on import)

import safetensors  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

log = base.log

FIXTURE_NAME = "tiny-v41-dspark"
MAIN = next(fx for fx in base.FIXTURES if fx["name"] == "tiny-v41-native")
# Official text_config keys (configuration_deepseek_v41.py, §1). Targets = the last three main layers, like
# the release's [37, 38, 39]; noise = id 0 ("<unk>", the release uses a reserved id); stage MoE 4 experts top-2.
DSPARK = dict(num_nextn_predict_layers=3, dspark_block_size=5, dspark_noise_token_id=0,
              dspark_target_layer_ids=[3, 4, 5], dspark_markov_rank=8, dspark_n_routed_experts=4,
              dspark_num_experts_per_tok=2)
DSPARK_SEED = 4151                         # the drafter's weights (the main model keeps seed 4103)
# Anchor positions p (the target has processed ids[0..p]). The context window is sliding_window = 16 rows:
# p < 15 sees a partial window, p = 15 exactly a full one, p >= 16 a window that has slid past position 0.
ANCHORS = [0, 6, 14, 15, 16, 23, 37, 46, 54]
SELF_TOL = 1e-5                             # batched vs row-by-row Markov / confidence arithmetic
SPEC_TOL = 1e-4                             # float64 spec re-implementation vs transformers float32
MIN_ARGMAX_GAP = 1e-4                       # relative top-1 gap of every chained draft (robust argmax)

# Keys the stage blocks share with the main model; the rest of the stage config makes one sliding-only layer.
STAGE_KEYS = ("vocab_size", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "q_lora_rank",
              "qk_rope_head_dim", "o_groups", "o_lora_rank", "sliding_window", "moe_intermediate_size",
              "n_shared_experts", "scoring_func", "gate_temp", "norm_topk_prob", "routed_scaling_factor",
              "topk_method", "swiglu_limit", "hc_mult", "hc_sinkhorn_iters", "hc_eps", "rms_norm_eps", "hidden_act",
              "rope_theta", "compress_rope_theta", "max_position_embeddings", "rope_parameters")


def stage_config(modeling, cfg):
    """One DSpark stage as a one-layer DeepSeek-V4.1 config: compress ratio 0 (sliding only, "main" RoPE),
    no Engram, the stage MoE's own expert count and top-k."""
    scfg = modeling.DeepseekV41TextConfig(
        **{k: getattr(cfg, k) for k in STAGE_KEYS}, num_hidden_layers=1, compress_ratios=[0],
        kv_source_layer_ids=[], index_source_layer_ids=[], candidate_source_layer_id=-1, engram_layer_ids=[],
        num_nextn_predict_layers=0, n_routed_experts=cfg.dspark_n_routed_experts,
        num_experts_per_tok=cfg.dspark_num_experts_per_tok)
    scfg._attn_implementation = "eager"
    scfg._experts_implementation = "eager"
    return scfg


class ContextRows:
    """Stands in for the cache of a stage's attention: `update` puts the stage's context rows (already
    windowed, rotated and FP8-rounded) in front of the block's own K=V rows. Nothing is stored."""

    def __init__(self, rows: torch.Tensor):
        self.rows = rows                                            # [1, 1, n, head_dim]

    def update(self, key_states, value_states, layer_idx):
        full = torch.cat([self.rows, key_states], dim=-2)
        return full, full


class DSparkDrafter(nn.Module):
    """§8's drafter. Embedding, head and RoPE tables are the main model's (not owned)."""

    def __init__(self, modeling, cfg, scfg):
        super().__init__()
        self.modeling = modeling
        D, V, r, eps = cfg.hidden_size, cfg.vocab_size, cfg.dspark_markov_rank, cfg.rms_norm_eps
        self.block_size, self.noise, self.window = cfg.dspark_block_size, cfg.dspark_noise_token_id, cfg.sliding_window
        self.main_proj = nn.Linear(len(cfg.dspark_target_layer_ids) * D, D, bias=False)
        self.main_norm = modeling.DeepseekV41RMSNorm(D, eps=eps)
        self.stages = nn.ModuleList(modeling.DeepseekV41DecoderLayer(scfg, 0)
                                    for _ in range(cfg.num_nextn_predict_layers))
        self.norm = modeling.DeepseekV41RMSNorm(D, eps=eps)
        self.markov_embed = nn.Embedding(V, r)
        self.markov_head = nn.Linear(r, V, bias=False)
        self.confidence = nn.Linear(D + r, 1, bias=False)
        for stage in self.stages:
            attn = stage.self_attn
            assert attn.compress_ratio == 0 and attn.rope_layer_type == "main" and stage.engram is None
            assert attn.compressor is None and attn.indexer is None

    def context_kv(self, main, main_x):
        """Every stage's context K=V rows for all target positions t: [1, 1, T, head_dim] per stage."""
        md = self.modeling
        pos = torch.arange(main_x.shape[1]).unsqueeze(0)
        cos, sin = main.model.rotary_emb(main_x, position_ids=pos, layer_type="main")
        out = []
        for stage in self.stages:
            attn = stage.self_attn
            kv = md.apply_rotary_pos_emb(attn.kv_norm(attn.kv_proj(main_x)), cos, sin)
            out.append(md._fake_quant_fp8_block(kv, block_size=32).unsqueeze(1))
        return out

    def backbone(self, main, ctx, first_token: int, p: int, mask=None, lo=None):
        """The stages over the block [x_{p+1}, noise...] at positions p+1..p+B. Context rows lo..p (default:
        the window (p-W, p]); `mask` an optional additive mask over [context rows, block rows].
        Returns (h [B, D], base logits [B, V])."""
        mm, B = main.model, self.block_size
        lo = max(0, p - self.window + 1) if lo is None else lo
        tokens = torch.tensor([[first_token] + [self.noise] * (B - 1)])
        pos = torch.arange(p + 1, p + 1 + B).unsqueeze(0)
        e = mm.embed_tokens(tokens)
        X = e.unsqueeze(2).expand(-1, -1, self.stages[0].attn_hc.hc_mult, -1).contiguous()
        pre = X.new_zeros(*X.shape[:-1], dtype=torch.float32)
        pre[..., 0] = 1.0                                            # one-hot: the first collapse is stream 0
        pe = {"main": mm.rotary_emb(e, position_ids=pos, layer_type="main")}
        for stage, rows in zip(self.stages, ctx):
            X, pre = stage(X, pre, None, None, shared={}, position_embeddings=pe, position_ids=pos,
                           attention_mask=mask, past_key_values=ContextRows(rows[:, :, lo:p + 1]))
        h = self.modeling.DeepseekV41DecoderLayer.hc_collapse(X, pre)[0]
        return h, main.lm_head(self.norm(h))

    def conf(self, h, m):
        return torch.sigmoid(self.confidence(torch.cat([h, m], dim=-1)).float())[..., 0]

    def chain(self, h, base_logits, first_token: int):
        """Greedy semi-autoregressive drafting through the Markov head, one row at a time."""
        prev, drafts, logits, conf = first_token, [], [], []
        for j in range(self.block_size):
            m = self.markov_embed(torch.tensor([prev]))
            lj = base_logits[j:j + 1] + self.markov_head(m)
            conf.append(self.conf(h[j:j + 1], m))
            prev = int(lj.argmax(-1))
            drafts.append(prev)
            logits.append(lj)
        return torch.tensor(drafts), torch.cat(logits), torch.cat(conf)

    def teacher_forced(self, h, base_logits, prevs: torch.Tensor):
        """All rows at once with given Markov inputs prev_0..prev_{B-1} (batched)."""
        m = self.markov_embed(prevs)
        return base_logits + self.markov_head(m), self.conf(h, m)


# --------------------------------------------------------------------------------------
# Weights: re-randomised like the V4.1 fixtures, released names
# --------------------------------------------------------------------------------------


@torch.no_grad()
def init_drafter(drafter, seed: int):
    """make_dsv41_fixtures' rules by transformers name (norms 1+N(0,0.1), sinks, mHC, router bias, expert gains
    that make the clamps fire, linears N(0, fan_in^-1/2)); the Markov table N(0,1) and its head at gain 2 so
    the Markov term moves the argmax; the confidence projection at gain 1/10. bias_vl is zero: the release's
    DSpark gates have none."""
    g = torch.Generator().manual_seed(seed)
    sd = drafter.state_dict(keep_vars=True)
    for name in sorted(sd):
        t = sd[name]
        if name == "markov_embed.weight":
            t.data.copy_(base.randn(g, *t.shape))
        elif name == "markov_head.weight":
            t.data.copy_(base.randn(g, *t.shape) * t.shape[1] ** -0.5 * 2.0)
        elif name == "confidence.weight":                     # gain 1/10: the sigmoid stays off its rails
            t.data.copy_(base.randn(g, *t.shape) * t.shape[1] ** -0.5 * 0.1)
        else:
            base.randomise(name, t, g)
    for stage in drafter.stages:
        stage.mlp.gate.e_score_correction_bias_vl.zero_()


TOP_LEVEL = {  # drafter module name -> released name (S = number of stages)
    "main_proj.weight": "mtp.0.main_proj.weight", "main_norm.weight": "mtp.0.main_norm.weight",
    "norm.weight": "mtp.{last}.norm.weight", "markov_embed.weight": "mtp.{last}.markov_head.embed.weight",
    "markov_head.weight": "mtp.{last}.markov_head.head.weight",
    "confidence.weight": "mtp.{last}.confidence_head.proj.weight",
}


def top_level_names(n_stages: int) -> dict:
    return {k: v.format(last=n_stages - 1) for k, v in TOP_LEVEL.items()}


def stage_stand_in(stage, scfg):
    """A stage seen as layer 0 of a main model, so make_dsv41_fixtures' name mapping applies."""
    return SimpleNamespace(config=scfg,
                           state_dict=lambda: {"model.layers.0." + k: v for k, v in stage.state_dict().items()})


def drafter_native_state(drafter, scfg) -> dict:
    """mtp.{s}.<released layer names> (experts split per expert, no gate.bias_vl) + the top-level tensors."""
    sd = drafter.state_dict()
    out = {n: sd[k].detach().clone() for k, n in top_level_names(len(drafter.stages)).items()}
    for s, stage in enumerate(drafter.stages):
        for k, v in base.to_native_state(stage_stand_in(stage, scfg)).items():
            assert k.startswith("layers.0."), k
            if not k.endswith("ffn.gate.bias_vl"):
                out[f"mtp.{s}.{k[len('layers.0.'):]}"] = v
    return out


def drafter_from_native(drafter, scfg, native: dict) -> dict:
    """Inverse of drafter_native_state: the drafter's state dict (gate.bias_vl back to zero)."""
    top = top_level_names(len(drafter.stages))
    sd = {k: native[n] for k, n in top.items()}
    for s, stage in enumerate(drafter.stages):
        prefix = f"mtp.{s}."
        sub = {"layers.0." + k[len(prefix):]: v for k, v in native.items()
               if k.startswith(prefix) and k not in top.values()}
        sub["layers.0.ffn.gate.bias_vl"] = torch.zeros_like(stage.mlp.gate.e_score_correction_bias_vl)
        for k, v in base.from_native_state(stage_stand_in(stage, scfg), sub).items():
            sd[f"stages.{s}.{k[len('model.layers.0.'):]}"] = v
    return sd


# --------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------


@torch.no_grad()
def run_main_with_features(model, ids, targets):
    """One-shot cached main run; per target layer the mean over the hc streams of what enters the layer's
    first mHC site (= the layer's input after Engram). Also checked against the decoder layer's own input
    where the layer has no Engram."""
    layers = model.model.layers
    cap, layer_in, handles = {}, {}, []
    for li in targets:
        handles.append(layers[li].attn_hc.register_forward_pre_hook(
            lambda m, a, li=li: cap.__setitem__(li, a[0].float().mean(dim=2).clone())))
        handles.append(layers[li].register_forward_pre_hook(
            lambda m, a, li=li: layer_in.__setitem__(li, a[0].float().mean(dim=2).clone())))
    logits, _ = base.run_one_shot(model, ids)
    for h in handles:
        h.remove()
    for li in targets:
        if layers[li].engram is None:
            assert torch.equal(cap[li], layer_in[li]), f"layer {li}: attn_hc input != layer input"
    return logits, torch.cat([cap[li] for li in targets], dim=-1)          # [1, T, n_targets * D]


@torch.no_grad()
def run_drafter(drafter, main, features, ids, anchors):
    main_x = drafter.main_norm(drafter.main_proj(features))
    ctx = drafter.context_kv(main, main_x)
    out = {"h": [], "base": [], "logits": [], "drafts": [], "conf": []}
    for p in anchors:
        first = int(ids[0, p + 1])
        h, base_logits = drafter.backbone(main, ctx, first, p)
        drafts, logits, conf = drafter.chain(h, base_logits, first)
        for k, v in zip(out, (h, base_logits, logits, drafts, conf)):
            out[k].append(v)
    return {k: torch.stack(v) for k, v in out.items()}, ctx


@torch.no_grad()
def self_checks(drafter, main, ctx, ids, anchors, res) -> dict:
    """§11's self-consistency (teacher-forced vs chained Markov inputs) plus the window read two ways."""
    B, W = drafter.block_size, drafter.window
    agree, compared, max_diff, teacher_rows = 0, 0, 0.0, 0
    for a, p in enumerate(anchors):
        h, base_logits, chained, conf = res["h"][a], res["base"][a], res["logits"][a], res["conf"][a]
        first = int(ids[0, p + 1])
        chain_prev = torch.cat([torch.tensor([first]), res["drafts"][a][:-1]])
        # (a) teacher = the chain's own inputs, batched: equal everywhere, and the argmaxes are the drafts
        lt, ct = drafter.teacher_forced(h, base_logits, chain_prev)
        max_diff = max(max_diff, float((lt - chained).abs().max()), float((ct - conf).abs().max()))
        assert torch.equal(lt.argmax(-1), res["drafts"][a]), f"anchor {p}: teacher-forced argmax != drafts"
        # (b) teacher = the sequence's tokens x_{p+1..p+B} (past the end: noise): equal where the chain equals it
        seq = [int(ids[0, i]) if i < ids.shape[1] else drafter.noise for i in range(p + 1, p + 1 + B)]
        lq, cq = drafter.teacher_forced(h, base_logits, torch.tensor(seq))
        for j in range(B):
            if seq[j] == int(chain_prev[j]):
                compared += 1
                d = max(float((lq[j] - chained[j]).abs().max()), float((cq[j] - conf[j]).abs().max()))
                max_diff = max(max_diff, d)
                agree += d <= SELF_TOL
            else:
                teacher_rows += 1
                assert not torch.equal(lq[j], chained[j]), f"anchor {p} row {j}: Markov input has no effect"
    assert max_diff <= SELF_TOL and agree == compared, f"teacher-forced vs chained: max |diff| {max_diff}"
    # (c) the window by masking: all context rows 0..p, the ones at or before p-W masked out
    window_diff, slid = 0.0, 0
    for a, p in enumerate(anchors):
        if p < W:
            continue
        slid += 1
        n = p + 1
        mask = torch.zeros(1, 1, B, n + B)
        mask[..., : n - W] = torch.finfo(torch.float32).min
        h, _ = drafter.backbone(main, ctx, int(ids[0, p + 1]), p, mask=mask, lo=0)
        window_diff = max(window_diff, float((h - res["h"][a]).abs().max()))
    assert slid > 0 and window_diff <= SELF_TOL, f"windowed by slicing vs by masking: {window_diff}"
    return {"teacher_vs_chained_max_abs_diff": max_diff, "teacher_rows_compared_with_sequence_tokens": compared,
            "teacher_rows_where_chain_differs_from_sequence": teacher_rows,
            "window_slice_vs_mask_max_abs_diff_h": window_diff, "anchors_past_window": slid}


# --------------------------------------------------------------------------------------
# Independent check: §8 in plain float64 torch from the released tensors, no transformers module
# --------------------------------------------------------------------------------------


@torch.no_grad()
def spec_drafter(off: dict, cfg, features: torch.Tensor, ids: torch.Tensor, anchors) -> dict:
    """The drafter of dsv41-model.md §3/§4/§7/§8 from `embed.weight`, `head.weight` and `mtp.*` alone.
    float64 throughout, except the FP8 window rounding, which rounds the float32 value like the model."""
    P = {k: v.double() for k, v in off.items()}
    eps, hc_eps, hcm, iters = cfg.rms_norm_eps, cfg.hc_eps, cfg.hc_mult, cfg.hc_sinkhorn_iters
    nh, hd, rd, G, K = cfg.num_attention_heads, cfg.head_dim, cfg.qk_rope_head_dim, cfg.o_groups, \
        cfg.dspark_num_experts_per_tok
    S, B, W, lim = cfg.num_nextn_predict_layers, cfg.dspark_block_size, cfg.sliding_window, cfg.swiglu_limit
    def rms(x, w=None):
        return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps) * (1.0 if w is None else w)

    inv = cfg.rope_theta ** (-torch.arange(0, rd, 2, dtype=torch.float64) / rd)

    def rope(x, pos, sign=1.0):            # x [n, ..., hd], interleaved pairs on the trailing rd dims
        ang = pos.double()[:, None] * inv[None, :]
        c = torch.cos(ang).view(len(pos), *([1] * (x.dim() - 2)), -1)
        s = sign * torch.sin(ang).view(len(pos), *([1] * (x.dim() - 2)), -1)
        a, b = x[..., hd - rd::2], x[..., hd - rd + 1::2]
        return torch.cat([x[..., :hd - rd], torch.stack([a * c - b * s, a * s + b * c], -1).flatten(-2)], -1)

    def fp8(x):                            # ue8m0 scale per 32 channels, e4m3 values
        blocks = x.float().view(*x.shape[:-1], -1, 32)
        scale = torch.exp2(torch.ceil(torch.log2(blocks.abs().amax(-1, keepdim=True).clamp_min(1e-4).double() / 448)))
        q = (blocks.double() / scale).clamp(-448, 448).float().to(torch.float8_e4m3fn).double() * scale
        return q.view(x.shape)

    def site(X, p):                        # (pre, post, comb) of one mHC site; X [n, hc, D]
        m = rms(X.flatten(1)) @ P[p + "_fn"].T
        sc, bs = P[p + "_scale"], P[p + "_base"]
        pre = torch.sigmoid(m[:, :hcm] * sc[0] + bs[:hcm]) + hc_eps
        post = 2 * torch.sigmoid(m[:, hcm:2 * hcm] * sc[1] + bs[hcm:2 * hcm])
        C = torch.softmax((m[:, 2 * hcm:] * sc[2] + bs[2 * hcm:]).view(-1, hcm, hcm), -1) + hc_eps
        C = C / (C.sum(-2, keepdim=True) + hc_eps)
        for _ in range(iters - 1):
            C = C / (C.sum(-1, keepdim=True) + hc_eps)
            C = C / (C.sum(-2, keepdim=True) + hc_eps)
        return pre, post, C

    def swiglu(x, pfx):
        g = (x @ P[pfx + "w1.weight"].T).clamp(max=lim)
        return torch.nn.functional.silu(g) * (x @ P[pfx + "w3.weight"].T).clamp(-lim, lim)

    main_x = rms(features[0].double() @ P["mtp.0.main_proj.weight"].T, P["mtp.0.main_norm.weight"])
    t_all = torch.arange(main_x.shape[0])
    ctx = [fp8(rope(rms(main_x @ P[f"mtp.{s}.attn.wkv.weight"].T, P[f"mtp.{s}.attn.kv_norm.weight"]), t_all))
           for s in range(S)]
    last = f"mtp.{S - 1}."
    out = {"logits": [], "base": [], "drafts": [], "conf": []}
    for p in anchors:
        pos = torch.arange(p + 1, p + 1 + B)
        first = int(ids[0, p + 1])
        X = P["embed.weight"][[first] + [cfg.dspark_noise_token_id] * (B - 1)][:, None, :].expand(-1, hcm, -1)
        pre = torch.zeros(B, hcm, dtype=torch.float64)
        pre[:, 0] = 1.0
        for s in range(S):
            a = f"mtp.{s}."
            preA, post, C = site(X, a + "hc_attn")
            x = rms((pre[:, :, None] * X).sum(1), P[a + "attn_norm.weight"])
            q = (rms(x @ P[a + "attn.wq_a.weight"].T, P[a + "attn.q_norm.weight"]) @ P[a + "attn.wq_b.weight"].T)
            q = rope(q.view(B, nh, hd), pos)
            kv = fp8(rope(rms(x @ P[a + "attn.wkv.weight"].T, P[a + "attn.kv_norm.weight"]), pos))
            keys = torch.cat([ctx[s][max(0, p - W + 1):p + 1], kv])        # window rows + all block rows
            logit = torch.einsum("bhd,jd->bhj", q, keys) * hd ** -0.5
            sink = P[a + "attn.attn_sink"][None, :, None].expand(B, nh, 1)
            prob = torch.softmax(torch.cat([logit, sink], -1), -1)[..., :-1]
            o = rope(torch.einsum("bhj,jd->bhd", prob, keys), pos, -1.0).reshape(B, G, -1)
            wo_a = P[a + "attn.wo_a.weight"].view(G, -1, o.shape[-1])
            y = torch.einsum("bgi,gri->bgr", o, wo_a).reshape(B, -1) @ P[a + "attn.wo_b.weight"].T
            X = post[:, :, None] * y[:, None, :] + torch.einsum("bjk,bjd->bkd", C, X)
            preF, post, C = site(X, a + "hc_ffn")
            x = rms((preA[:, :, None] * X).sum(1), P[a + "ffn_norm.weight"])
            score = torch.sqrt(torch.nn.functional.softplus(x @ P[a + "ffn.gate.weight"].T))
            idx = torch.topk(score + P[a + "ffn.gate.bias"], K, -1).indices
            w = score.gather(1, idx)
            w = w / (w.sum(-1, keepdim=True) + 1e-20) * cfg.routed_scaling_factor
            y = swiglu(x, a + "ffn.shared_experts.") @ P[a + "ffn.shared_experts.w2.weight"].T
            for r in range(B):
                for k in range(K):
                    e = f"{a}ffn.experts.{int(idx[r, k])}."
                    y[r] += ((w[r, k] * swiglu(x[r:r + 1], e)) @ P[e + "w2.weight"].T)[0]   # weight before w2
            X = post[:, :, None] * y[:, None, :] + torch.einsum("bjk,bjd->bkd", C, X)
            pre = preF
        h = (pre[:, :, None] * X).sum(1)
        base_logits = rms(h, P[last + "norm.weight"]) @ P["head.weight"].T
        prev, logits, drafts, conf = first, [], [], []
        for j in range(B):
            m = P[last + "markov_head.embed.weight"][prev]
            lj = base_logits[j] + P[last + "markov_head.head.weight"] @ m
            conf.append(torch.sigmoid(P[last + "confidence_head.proj.weight"] @ torch.cat([h[j], m]))[0])
            prev = int(lj.argmax())
            logits.append(lj)
            drafts.append(prev)
        for k, v in zip(out, (torch.stack(logits), base_logits, torch.tensor(drafts), torch.stack(conf))):
            out[k].append(v)
    return {k: torch.stack(v) for k, v in out.items()}


# --------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------


def release_config(cfg) -> dict:
    rel = base.release_config(cfg)
    rel["text_config"].update({k: getattr(cfg, k) for k in DSPARK})
    rel["text_config"] = dict(sorted(rel["text_config"].items()))
    return rel


def write_f32(folder, name, t):
    t.numpy().astype("<f4").tofile(os.path.join(folder, name))


def make(modeling, source, out_root: str, main_dir: str) -> dict:
    folder = os.path.join(out_root, FIXTURE_NAME)
    log(f"\n=== {FIXTURE_NAME} ===")
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)

    # ---------------- main model: tiny-v41-native + the DSpark keys ----------------
    fx = {**MAIN, "cfg": {**MAIN["cfg"], **DSPARK}}
    tok = base.tiny_tokenizer()
    _, compressed_vocab = modeling.build_compressed_token_map(tok)
    torch.manual_seed(fx["seed"])
    cfg = base.build_config(modeling, fx, tok, compressed_vocab)
    assert all(getattr(cfg, k) == v for k, v in DSPARK.items()), "DSpark keys not taken by the config"
    L, S, B, W = cfg.num_hidden_layers, cfg.num_nextn_predict_layers, cfg.dspark_block_size, cfg.sliding_window
    assert cfg.dspark_target_layer_ids == list(range(L - 3, L)) and cfg.compress_ratios[L:] == [0] * S
    assert 0 <= cfg.dspark_noise_token_id < cfg.vocab_size
    model = base.new_model(modeling, cfg, tok)
    base.init_weights(model, fx["seed"])
    g = torch.Generator().manual_seed(fx["seed"] + 1)
    ids = torch.randint(0, len(tok), (1, fx["n_tokens"]), generator=g)
    T, V, D = ids.shape[1], cfg.vocab_size, cfg.hidden_size
    assert max(ANCHORS) <= T - 2 and any(p < W - 1 for p in ANCHORS) and any(p >= W for p in ANCHORS)

    main_golden = json.load(open(os.path.join(main_dir, "golden.json")))
    assert main_golden["ids"] == ids[0].tolist(), "ids differ from the tiny-v41-native fixture"
    main_logits, features = run_main_with_features(model, ids, cfg.dspark_target_layer_ids)
    ref = np.fromfile(os.path.join(main_dir, "logits.f32"), dtype="<f4").reshape(T, V)
    assert np.array_equal(main_logits.numpy(), ref), "main logits differ from tiny-v41-native"
    main_native = base.to_native_state(model)
    ref_weights = load_file(os.path.join(main_dir, "model.safetensors"))
    assert set(ref_weights) == set(main_native) and all(torch.equal(ref_weights[k], v) for k, v in main_native.items())
    log(f"  main model = {main_dir} bit for bit (logits and weights); features of layers {cfg.dspark_target_layer_ids}")

    # ---------------- drafter ----------------
    scfg = stage_config(modeling, cfg)
    torch.manual_seed(DSPARK_SEED)                   # only the constructors use it; every tensor is overwritten
    drafter = DSparkDrafter(modeling, cfg, scfg).float().eval()
    init_drafter(drafter, DSPARK_SEED)
    probes = base.Probes(SimpleNamespace(config=scfg, model=SimpleNamespace(layers=list(drafter.stages))), modeling)
    res, ctx = run_drafter(drafter, model, features, ids, ANCHORS)
    probes.remove()
    clamp = {k: v.tolist() for k, v in probes.clamp.items()}
    counts = dict(probes.count)
    for kind in ("routed", "shared"):
        assert all(clamp[kind][:3]), f"stage {kind} SwiGLU clamps never all fire: {clamp[kind]}"
    assert probes.bias_changed[0] > 0, "stage gate.bias never changes a selection"
    assert counts.get("fp8.skipped_width", 0) == 0 and counts["fp8.calls"] == S * (1 + len(ANCHORS))

    checks = self_checks(drafter, model, ctx, ids, ANCHORS, res)
    top2 = res["logits"].topk(2, dim=-1).values
    gaps = (top2[..., 0] - top2[..., 1]) / top2[..., 0].abs().clamp(min=1.0)
    markov_flips = int((res["base"].argmax(-1) != res["drafts"]).sum())
    distinct = int(res["drafts"].unique().numel())
    assert float(gaps.min()) > MIN_ARGMAX_GAP, f"a chained draft is a near-tie: {float(gaps.min())}"
    assert markov_flips > 0, "the Markov term never changes a draft"
    assert distinct >= 8, f"drafts vary too little: {distinct} distinct"
    assert all(t.isfinite().all() for t in (res["logits"], res["conf"]))
    conf_margin = float(torch.minimum(res["conf"], 1 - res["conf"]).min())
    assert conf_margin > 1e-3, f"a confidence saturates: {conf_margin}"

    # ---------------- write ----------------
    rel = release_config(cfg)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(rel, f, indent=2)
        f.write("\n")
    c2 = base.check_config_roundtrip(modeling, rel, cfg)
    assert all(getattr(c2, k) == getattr(cfg, k) for k in DSPARK), "config.json loses a DSpark key"
    mtp_native = drafter_native_state(drafter, scfg)
    assert not set(mtp_native) & set(main_native)
    tensors = {**main_native, **mtp_native}
    assert all(v.dtype == torch.float32 for v in tensors.values())
    st_path = os.path.join(folder, "model.safetensors")
    save_file(tensors, st_path, metadata={"format": "pt"})
    write_f32(folder, "features.f32", features[0])
    write_f32(folder, "draft_logits.f32", res["logits"])
    write_f32(folder, "draft_base_logits.f32", res["base"])
    write_f32(folder, "confidence.f32", res["conf"])
    res["drafts"].numpy().astype("<i4").tofile(os.path.join(folder, "drafts.i32"))

    # ---------------- re-read: config.json + model.safetensors alone reproduce every output ----------------
    back = load_file(st_path)
    m2 = base.new_model(modeling, c2, tok)
    m2.load_state_dict(base.from_native_state(m2, {k: v for k, v in back.items() if not k.startswith("mtp.")}),
                       strict=True)
    logits2, features2 = run_main_with_features(m2, ids, c2.dspark_target_layer_ids)
    scfg2 = stage_config(modeling, c2)
    d2 = DSparkDrafter(modeling, c2, scfg2).float().eval()
    d2.load_state_dict(drafter_from_native(d2, scfg2, {k: v for k, v in back.items() if k.startswith("mtp.")}),
                       strict=True)
    res2, _ = run_drafter(d2, m2, features2, ids, ANCHORS)
    assert torch.equal(logits2, main_logits) and torch.equal(features2, features)
    assert all(torch.equal(res2[k], res[k]) for k in res), "the files do not reproduce the drafter outputs"
    spec = spec_drafter(back, c2, features, ids, ANCHORS)
    spec_diff = {k: float((spec[k] - res[k].double()).abs().max()) for k in ("logits", "base", "conf")}
    assert torch.equal(spec["drafts"], res["drafts"]), "float64 spec drafts differ"
    assert max(spec_diff.values()) < SPEC_TOL, f"float64 spec re-implementation differs: {spec_diff}"
    rb = lambda fn, dt, shape: np.fromfile(os.path.join(folder, fn), dtype=dt).reshape(shape)  # noqa: E731
    A = len(ANCHORS)
    assert np.array_equal(rb("features.f32", "<f4", (T, 3 * D)), features[0].numpy())
    assert np.array_equal(rb("draft_logits.f32", "<f4", (A, B, V)), res["logits"].numpy())
    assert np.array_equal(rb("drafts.i32", "<i4", (A, B)), res["drafts"].numpy())

    # ---------------- golden.json ----------------
    files = {
        "features.f32": f"little-endian float32 [{T}, {3 * D}]: per position t, concat over target layers "
                        f"{cfg.dspark_target_layer_ids} of the mean over the {cfg.hc_mult} streams entering the layer "
                        "(after Engram), one-shot cached main run",
        "draft_logits.f32": f"little-endian float32 [{A}, {B}, {V}]: per anchor, row j = base_j + Markov term of "
                            "prev_j (chained greedily)",
        "draft_base_logits.f32": f"little-endian float32 [{A}, {B}, {V}]: head(mtp.{S - 1}.norm(h_j)), no Markov term",
        "drafts.i32": f"little-endian int32 [{A}, {B}]: d_1..d_{B} = argmax of draft_logits rows 0..{B - 1}",
        "confidence.f32": f"little-endian float32 [{A}, {B}]: "
                          "sigmoid(confidence_head.proj([h_j ; markov_embed(prev_j)]))",
    }
    golden = {
        "fixture": FIXTURE_NAME,
        "source": {"repo": "huggingface/transformers", "files": source},
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "safetensors_version": safetensors.__version__,
        "numpy_version": np.__version__,
        "main_fixture": MAIN["name"],
        "seed": MAIN["seed"],
        "dspark_seed": DSPARK_SEED,
        "ids": ids[0].tolist(),
        "vocab_size": V,
        "n_tokens": T,
        "hidden_size": D,
        "hc_mult": cfg.hc_mult,
        "anchors": ANCHORS,
        "block_tokens": {str(p): [int(ids[0, p + 1])] + [cfg.dspark_noise_token_id] * (B - 1) for p in ANCHORS},
        "block_positions": {str(p): list(range(p + 1, p + 1 + B)) for p in ANCHORS},
        "context_positions": {str(p): [max(0, p - W + 1), p] for p in ANCHORS},
        "settings": {**DSPARK, "noise_token": base.WORDS[cfg.dspark_noise_token_id], "context_window": W,
                     "context_window_key": "sliding_window (no separate DSpark key)",
                     "stage_moe_intermediate_size": cfg.moe_intermediate_size,
                     "stage_n_shared_experts": cfg.n_shared_experts},
        "choices": [
            "anchor p: the target has processed ids[0..p]; the block's first token x_{p+1} is ids[p+1] (the sequence "
            "stands for the accepted tokens), not the target's argmax",
            "target features: per target layer, mean over the hc streams of the streams entering the layer after "
            "Engram (forward pre-hook on the layer's attn_hc), concatenated in target-layer order",
            "main_x = main_norm(main_proj(features)); context row t of stage s = FP8(rope_main(kv_norm_s(kv_proj_s("
            "main_x_t)), t)): no attn_norm before kv_proj; written for every target position t",
            f"context window: rows with position in (p-W, p], W = sliding_window = {W}, the same rows for every "
            "block row and stage; the block's own rows all visible to each other (bidirectional); per-head sink "
            "as in the V4.1 attention",
            f"block rows at RoPE positions p+1..p+{B}, 'main' RoPE (rope_theta, no YaRN) for block and context",
            "block input: shared embedding of [x_{p+1}, noise x4], copied to the hc streams, pre one-hot on stream 0; "
            "main_x enters only through the context K=V",
            "single-pass mHC: pre carried from stage to stage; h = sum_k pre_k X_k with the last stage's FFN pre; "
            f"base logits = head(mtp.{S - 1}.norm(h)) with the main model's head",
            "Markov: logits_j = base_j + markov_head(markov_embed(prev_j)); prev_0 = x_{p+1}, prev_{j+1} = "
            "argmax(logits_j) (greedy); the backbone does not depend on the drafts",
            "confidence_j = sigmoid(proj([h_j ; markov_embed(prev_j)])) with h_j before mtp.2.norm, float32",
            "FP8 rounding: only the window K=V (context rows and the block's own rows, ue8m0 per 32 channels, as "
            "transformers' attention does); no other activation is rounded",
            "stage MoE: sqrt-softplus router with gate.bias (no bias_vl), shared expert, same expert width as the "
            "main model",
            f"tensor names: mtp.{{s}}.<released layer names>, mtp.0.main_proj/main_norm, mtp.{S - 1}.norm, "
            f"mtp.{S - 1}.markov_head.embed/head, mtp.{S - 1}.confidence_head.proj (the mtp.{S - 1}. prefix of "
            "the last three is unconfirmed)",
        ],
        "files": files,
        "files_sha256": {fn: base.sha256(os.path.join(folder, fn)) for fn in sorted(files)},
        "mtp_tensors": {k: list(v.shape) for k, v in sorted(mtp_native.items())},
        "n_main_tensors": len(main_native),
        "weights_dtype": "float32",
        "checks": {
            "main_logits_equal_tiny_v41_native": True,
            "main_weights_equal_tiny_v41_native": True,
            **checks,
            "self_tolerance": SELF_TOL,
            "reload_from_config_and_safetensors_bit_identical": True,
            "spec_float64_reimplementation_max_abs_diff": spec_diff,
            "spec_float64_drafts_equal": True,
            "spec_tolerance": SPEC_TOL,
            "min_rel_top1_gap_of_drafts": float(gaps.min()),
            "drafts_changed_by_markov_term": markov_flips,
            "distinct_drafts": distinct,
            "max_abs_draft_logit": float(res["logits"].abs().max()),
            "confidence_range": [float(res["conf"].min()), float(res["conf"].max())],
            "confidence_min_distance_from_0_or_1": conf_margin,
            "stage_clamp_counts": {k: dict(zip(("gate_gt_limit", "up_gt_limit", "up_lt_neg_limit", "elements"), v))
                                   for k, v in sorted(clamp.items())},
            "stage_bias_changed_selections": list(probes.bias_changed),
            "fp8_counts": {k: v for k, v in sorted(counts.items()) if k.startswith("fp8")},
        },
        "notes": ("transformers has no DSpark class; the drafter is wired from the DeepSeek-V4.1 source's "
                  "DeepseekV41DecoderLayer (stage config: one layer, compress ratio 0, dspark expert count/top-k), "
                  "DeepseekV41RMSNorm, rotary, apply_rotary_pos_emb, _fake_quant_fp8_block and nn.Linear/Embedding; "
                  "float32, eager attention and experts, CPU, 2 threads. See tools/reference/README.md."),
    }
    with open(os.path.join(folder, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")

    sizes = {fn: os.path.getsize(os.path.join(folder, fn)) for fn in sorted(os.listdir(folder))}
    log(f"  anchors {ANCHORS}, block {B}, window {W}, noise id {cfg.dspark_noise_token_id}")
    log(f"  drafts {res['drafts'].tolist()}")
    log(f"  checks {json.dumps(golden['checks'])}")
    log("  files: " + ", ".join(f"{k} {v} B" for k, v in sizes.items()))
    log(f"  total {sum(sizes.values()) / 1024:.1f} KiB")
    return sizes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default="/tmp/dsv41-src/deepseek_v41",
                    help="folder holding the three deepseek_v41 source files (outside the repository)")
    ap.add_argument("--out", required=True, help="output root, e.g. tests/fixtures/dsv41-dspark")
    ap.add_argument("--main", default="tests/fixtures/dsv41/tiny-v41-native",
                    help="the tiny-v41-native fixture the main model must reproduce")
    args = ap.parse_args()
    modeling, source = base.prepare_reference_run(args.source)
    os.makedirs(args.out, exist_ok=True)
    make(modeling, source, args.out, args.main)
    log("\n=== done ===")


if __name__ == "__main__":
    main()
