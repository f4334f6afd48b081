#include "frank/engine/v41_attention.h"

#include <algorithm>
#include <cmath>

#include "frank/cpu/ops.h"
#include "frank/engine/attention.h"
#include "frank/engine/fake_quant.h"
#include "frank/engine/indexer.h"
#include "frank/engine/indexer_v41.h"

namespace frank::engine {
namespace {

constexpr int kWindowQuantBlock = 32;  // window K=V: FP8, one ue8m0 scale per 32 values
constexpr int kEntryQuantBlock = 16;   // compressed entries: FP4, one e4m3 scale per 16 values
constexpr int kIndexQuantBlock = 32;   // indexer queries and keys: FP4, one ue8m0 scale per 32 values

struct Latent {
  std::vector<float> values;  // kv_norm'ed, before RoPE
  int64_t position;           // of the group's first token
};

// Pushes the chunk through a KV source's compressor; returns the groups it closed. Ratio 2 pools a
// group per channel with a softmax over its tokens' gates, in fp32 (transformers' order: the
// softmax, then the weighted sum); ratio 1 takes each token as it is. Then kv_norm.
std::vector<Latent> compress_chunk(const CpuOps& ops, const model::V41Config& c, const model::V41CompressorWeights& w,
                                   int ratio, const Tensor& x, int64_t start, V41SourceState& s) {
  const int hd = c.head_dim;
  const Tensor kv = ops.linear(x, w.kv_proj);
  const Tensor gate = w.gate_proj ? ops.linear(x, *w.gate_proj) : Tensor();
  std::vector<Latent> out;
  for (int64_t t = 0; t < x.rows(); ++t) {
    if (!w.gate_proj) {
      out.push_back({std::vector<float>(kv.row(t), kv.row(t) + hd), start + t});
      continue;
    }
    if (s.pending == 0) s.pending_position = start + t;
    s.pending_kv.insert(s.pending_kv.end(), kv.row(t), kv.row(t) + hd);
    s.pending_gate.insert(s.pending_gate.end(), gate.row(t), gate.row(t) + hd);
    if (++s.pending < ratio) continue;
    Latent latent{std::vector<float>(hd), s.pending_position};
    std::vector<float> e(ratio);
    for (int d = 0; d < hd; ++d) {
      float mx = -INFINITY;
      for (int j = 0; j < ratio; ++j) mx = std::max(mx, s.pending_gate[j * hd + d]);
      float sum = 0.0f;
      for (int j = 0; j < ratio; ++j) sum += e[j] = std::exp(s.pending_gate[j * hd + d] - mx);
      float acc = 0.0f;
      for (int j = 0; j < ratio; ++j) acc += s.pending_kv[j * hd + d] * (e[j] / sum);
      latent.values[d] = acc;
    }
    out.push_back(std::move(latent));
    s.pending = 0;
    s.pending_kv.clear();
    s.pending_gate.clear();
  }
  for (auto& l : out) cpu::rms_norm(l.values.data(), hd, w.norm.data.data(), c.rms_norm_eps);
  return out;
}

// Appends each closed group's indexer key (when the source owns the key projection) and entry:
// key = FP4(rope(k_norm(wk · latent))) from the unrotated latent, entry = FP4(rope(latent)), both at
// the group's first position.
void publish_groups(const model::V41Config& c, const model::V41AttentionWeights& w,
                    const RopeTable& rope, const std::vector<Latent>& latents, V41SourceState& s) {
  const int hd = c.head_dim, kd = c.index_head_dim;
  for (const Latent& l : latents) {
    if (w.indexer && w.indexer->k_proj) {
      std::vector<float> key(kd);
      cpu::linear(l.values.data(), 1, *w.indexer->k_proj, key.data());
      cpu::rms_norm(key.data(), kd, w.indexer->k_norm.data.data(), c.rms_norm_eps);
      rope.apply(key.data(), kd, l.position);
      fake_quant_fp4_ue8m0(key.data(), kd, kIndexQuantBlock);
      s.index_keys.insert(s.index_keys.end(), key.begin(), key.end());
    }
    std::vector<float> entry = l.values;
    rope.apply(entry.data(), hd, l.position);
    fake_quant_fp4_e4m3(entry.data(), hd, kEntryQuantBlock);
    s.entries.insert(s.entries.end(), entry.begin(), entry.end());
    ++s.n_entries;
  }
}

// An index source's selection for every token of the chunk (dsv41-model.md §5.2): FP4 queries
// against the shared keys, each entry visible once its group has closed, the candidate source's
// block mask applied at later index sources, then the top index_topk.
void index_select(const CpuOps& ops, const model::V41Config& c, const model::V41IndexerWeights& w, int layer,
                  const RopeTable& rope, const Tensor& x, const Tensor& q_residual, int64_t start, V41Shared& shared) {
  const bool candidate_source = layer == c.candidate_source_layer;
  const bool uses_candidates = c.candidate_source_layer >= 0 && c.candidate_source_layer < layer && !candidate_source;
  const V41SourceState* keys = shared.keys;
  if (keys == nullptr || keys->n_entries == 0) {
    shared.selection.reset();
    if (candidate_source) shared.candidates.reset();
    return;
  }
  const int heads = c.index_n_heads, kd = c.index_head_dim;
  Tensor q = ops.linear(q_residual, w.q_b_proj);
  ops.rope(q, heads, kd, start, rope, /*inverse=*/false);
  for (int64_t i = 0; i < q.numel(); i += kd) fake_quant_fp4_ue8m0(q.data.data() + i, kd, kIndexQuantBlock);
  Tensor weights = ops.linear(x, w.weights_proj);
  ops.scale(weights, static_cast<float>(std::pow(static_cast<double>(heads), -0.5)));

  const int64_t n_entries = keys->n_entries;
  std::vector<std::vector<int32_t>> selection;
  std::vector<std::vector<uint8_t>> candidates;
  std::vector<uint8_t> mask(n_entries);
  for (int64_t t = 0; t < x.rows(); ++t) {
    const int visible =
        static_cast<int>(std::min<int64_t>((start + t + 1) / shared.entries_ratio, n_entries));
    const auto scores = indexer_scores(q.row(t), weights.row(t), heads, kd, keys->index_keys.data(), n_entries);
    const uint8_t* allowed = nullptr;
    if (candidate_source) {
      candidates.push_back(select_candidate_blocks(scores, visible, c.candidate_topk_blocks, c.candidate_block_size));
    } else if (uses_candidates && shared.candidates) {
      const auto& cand = (*shared.candidates)[t];
      std::fill(mask.begin(), mask.end(), 0);
      std::copy_n(cand.begin(), std::min<size_t>(cand.size(), mask.size()), mask.begin());
      allowed = mask.data();
    }
    selection.push_back(select_topk_entries(scores, visible, allowed, c.index_topk));
  }
  shared.selection = std::move(selection);
  if (candidate_source) shared.candidates = std::move(candidates);
}

// Each token attends, per head, to its window rows (earlier ones from the ring, the chunk's own from
// kv) and the selected entries, with the sink in the softmax. [n, heads * head_dim].
Tensor attend(const model::V41Config& c, const model::V41AttentionWeights& w, const Tensor& q, const Tensor& kv,
              const std::vector<float>& window, int64_t start, const V41Shared& shared) {
  const int H = c.num_heads, hd = c.head_dim, W = c.sliding_window;
  const float scale = static_cast<float>(std::pow(static_cast<double>(hd), -0.5));
  const bool has_entries = shared.entries != nullptr && shared.selection.has_value();
  Tensor heads({q.rows(), int64_t{H} * hd});
  std::vector<const float*> keys;
  for (int64_t t = 0; t < q.rows(); ++t) {
    const int64_t pos = start + t;
    keys.clear();
    for (int64_t p = std::max<int64_t>(0, pos - W + 1); p <= pos; ++p)
      keys.push_back(p < start ? window.data() + (p % W) * hd : kv.row(p - start));
    if (has_entries)
      for (int32_t e : (*shared.selection)[t]) keys.push_back(shared.entries->entries.data() + int64_t{e} * hd);
    for (int h = 0; h < H; ++h)
      attend_with_sink(q.row(t) + int64_t{h} * hd, keys, w.sinks.data[h], hd, scale, heads.row(t) + int64_t{h} * hd);
  }
  return heads;
}

}  // namespace

Tensor v41_attention(const CpuOps& ops, const model::V41Config& c, const model::V41AttentionWeights& w, int layer,
                     const V41Ropes& ropes, const Tensor& x, int64_t start, V41Session& session, V41Shared& shared) {
  const int H = c.num_heads, hd = c.head_dim, W = c.sliding_window;
  const int ratio = c.compress_ratio[layer];
  const RopeTable& rope = ratio > 0 ? ropes.compress : ropes.main;
  const float eps = c.rms_norm_eps;

  // Queries: q_a -> weighted RMSNorm (the q residual, also the indexer's input) -> q_b -> RoPE
  // (no per-head norm in V4.1).
  Tensor q_residual = ops.linear(x, w.q_a_proj);
  ops.rms_norm(q_residual, c.q_lora_rank, &w.q_a_norm, eps);
  Tensor q = ops.linear(q_residual, w.q_b_proj);
  ops.rope(q, H, hd, start, rope, /*inverse=*/false);

  // The single K=V row: weighted RMSNorm, RoPE, then FP8 over all of it (RoPE dims included),
  // before the token attends to itself.
  Tensor kv = ops.linear(x, w.kv_proj);
  ops.norm_rope(kv, 1, hd, &w.kv_norm, eps, start, rope);
  for (int64_t t = 0; t < kv.rows(); ++t) fake_quant_fp8_ue8m0(kv.row(t), hd, kWindowQuantBlock);

  if (ratio > 0) {
    if (w.compressor) {
      V41SourceState& source = *session.sources[layer];
      const auto latents = compress_chunk(ops, c, *w.compressor, ratio, x, start, source);
      publish_groups(c, w, ropes.compress, latents, source);
      shared.entries = &source;
      shared.entries_ratio = ratio;
      if (w.indexer) shared.keys = &source;
    }
    if (w.indexer) index_select(ops, c, *w.indexer, layer, ropes.compress, x, q_residual, start, shared);
  }

  std::vector<float>& window = session.windows[layer];
  V41Shared none;
  Tensor heads = attend(c, w, q, kv, window, start, ratio > 0 ? shared : none);
  // K=V carried RoPE into the values: undo it at the query's position.
  ops.rope(heads, H, hd, start, rope, /*inverse=*/true);
  store_window_rows(window, kv, start, W);
  const Tensor low = ops.grouped_linear(heads, w.o_a_proj, c.o_groups);
  return ops.linear(low, w.o_b_proj);
}

}  // namespace frank::engine
