// CpuOps' DeepSeek-V4.1 ops (cpu_ops.h): Engram, the KV sources' pooling and publishing, the
// indexer's two-level selection, each the plain math of its reference function, and the small
// array ops of DSpark's chain.
#include <algorithm>
#include <cmath>
#include <span>

#include "frank/core/error.h"
#include "frank/engine/cpu_ops.h"
#include "frank/engine/engram.h"
#include "frank/engine/indexer.h"
#include "frank/engine/indexer_v41.h"
#include "frank/engine/moe.h"
#include "frank/engine/sampling.h"

namespace frank::engine {
namespace {

// The entries token t at `start + t` reaches: those of groups closed by its position, of `n_entries`.
int visible_entries(int64_t start, int64_t t, int ratio, int64_t n_entries) {
  return static_cast<int>(std::min<int64_t>((start + t + 1) / ratio, n_entries));
}

void append_rows(std::vector<float>& to, const Tensor& rows) {
  to.insert(to.end(), rows.data.begin(), rows.data.end());
}

}  // namespace

Tensor CpuOps::moe_v41(const model::V41Config& c, const model::MoeWeights& w, const Tensor& x, const Ids& ids) const {
  return moe_forward(c, w, /*hash_layer=*/false, x, ids, nullptr, MoeVariant{c.gate_temp, /*weight_before_down=*/true});
}

CpuOps::EngramRows CpuOps::engram_rows(const model::EngramLayout& layout, const Ids& ids,
                                       EngramHistory& history) const {
  return engram_hash_ids(layout, ids, history);
}

void CpuOps::engram_add(Tensor& streams, const model::V41EngramWeights& w, const EngramRows& rows,
                        const model::EngramLayout& layout, int slot, const model::CommonConfig& c) const {
  const int64_t columns = layout.columns, stride = static_cast<int64_t>(layout.modulus.size()) * columns;
  for (int64_t t = 0; t < streams.rows(); ++t) {
    const std::span<const int64_t> ids(rows.data() + t * stride + slot * columns, static_cast<size_t>(columns));
    engram_mix(w, engram_gather(w.table, ids), c.hc_mult, c.hidden_size, c.rms_norm_eps, streams.row(t));
  }
}

Tensor CpuOps::pool_groups(V41Source& s, const Tensor& kv, const Tensor* gate, int ratio, int64_t start) const {
  const int64_t hd = kv.cols();
  if (gate == nullptr) return kv;
  s.last_call = {kv.data, gate->data, start, kv.rows()};
  Tensor latents({(start + kv.rows()) / ratio - start / ratio, hd});
  int64_t closed = 0;
  std::vector<float> e(ratio);
  for (int64_t t = 0; t < kv.rows(); ++t) {
    if (!s.add_to_group(kv.row(t), gate->row(t), hd, start + t, ratio)) continue;
    // Per channel, transformers' order: the softmax over the group's gates, then the weighted sum.
    float* latent = latents.row(closed++);
    for (int64_t d = 0; d < hd; ++d) {
      float mx = -INFINITY;
      for (int j = 0; j < ratio; ++j) mx = std::max(mx, s.pending_gate[j * hd + d]);
      float sum = 0.0f;
      for (int j = 0; j < ratio; ++j) sum += e[j] = std::exp(s.pending_gate[j * hd + d] - mx);
      float acc = 0.0f;
      for (int j = 0; j < ratio; ++j) acc += s.pending_kv[j * hd + d] * (e[j] / sum);
      latent[d] = acc;
    }
    s.close_group();
  }
  return latents;
}

void CpuOps::publish(V41Source& s, const Tensor& entries, const Tensor* index_keys) const {
  if (index_keys != nullptr) append_rows(s.index_keys, *index_keys);
  append_rows(s.entries, entries);
  s.n_entries += entries.rows();
}

Tensor CpuOps::index_scores(const Tensor& q, const Tensor& w, const V41Source& keys) const {
  const int heads = static_cast<int>(w.cols()), dim = static_cast<int>(q.cols()) / heads;
  Tensor scores({q.rows(), keys.n_entries});
  for (int64_t t = 0; t < q.rows(); ++t) {
    const auto row = indexer_scores(q.row(t), w.row(t), heads, dim, keys.index_keys.data(), keys.n_entries);
    std::copy(row.begin(), row.end(), scores.row(t));
  }
  return scores;
}

CpuOps::Candidates CpuOps::candidate_blocks(const Tensor& scores, int64_t start, int ratio, int topk_blocks,
                                            int block_size) const {
  Candidates candidates;
  for (int64_t t = 0; t < scores.rows(); ++t)
    candidates.push_back(select_candidate_blocks(std::span<const float>(scores.row(t), scores.cols()),
                                                 visible_entries(start, t, ratio, scores.cols()), topk_blocks,
                                                 block_size));
  return candidates;
}

CpuOps::Selection CpuOps::select_entries(const Tensor& scores, int64_t start, int ratio, const Candidates* within,
                                         int topk) const {
  Selection selection;
  std::vector<uint8_t> mask(scores.cols());
  for (int64_t t = 0; t < scores.rows(); ++t) {
    if (within != nullptr) {
      const auto& candidates = (*within)[t];
      std::fill(mask.begin(), mask.end(), 0);
      std::copy_n(candidates.begin(), std::min(candidates.size(), mask.size()), mask.begin());
    }
    const auto picks = select_topk_entries(std::span<const float>(scores.row(t), scores.cols()),
                                           visible_entries(start, t, ratio, scores.cols()),
                                           within != nullptr ? mask.data() : nullptr, topk);
    selection.emplace_back(picks.begin(), picks.end());
  }
  return selection;
}

Tensor CpuOps::rows(const Tensor& x, int64_t first, int64_t n) const {
  if (first < 0 || n < 0 || first + n > x.rows()) throw Error("rows: outside the array");
  return Tensor({n, x.cols()}, std::vector<float>(x.row(first), x.row(first) + n * x.cols()));
}

Tensor CpuOps::stack_rows(std::span<const Tensor> parts) const {
  const int64_t width = parts.empty() ? 0 : parts.front().cols();
  std::vector<float> data;
  int64_t n = 0;
  for (const Tensor& p : parts) {
    if (p.cols() != width) throw Error("stack_rows: parts of different widths");
    append_rows(data, p);
    n += p.rows();
  }
  return Tensor({n, width}, std::move(data));
}

Tensor CpuOps::concat_cols(const Tensor& a, const Tensor& b) const {
  if (a.rows() != b.rows()) throw Error("concat_cols: arrays of different rows");
  Tensor out({a.rows(), a.cols() + b.cols()});
  for (int64_t t = 0; t < a.rows(); ++t) {
    std::copy_n(a.row(t), a.cols(), out.row(t));
    std::copy_n(b.row(t), b.cols(), out.row(t) + a.cols());
  }
  return out;
}

CpuOps::Ids CpuOps::argmax_rows(const Tensor& logits) const {
  Ids ids;
  for (int64_t t = 0; t < logits.rows(); ++t)
    ids.push_back(argmax(std::span<const float>(logits.row(t), static_cast<size_t>(logits.cols()))));
  return ids;
}

}  // namespace frank::engine
