#include "frank/engine/v41_model.h"

#include "frank/core/error.h"
#include "frank/cpu/ops.h"
#include "frank/engine/cpu_ops.h"
#include "frank/engine/engram.h"
#include "frank/engine/hyper_connection.h"
#include "frank/engine/moe.h"

namespace frank::engine {

V41Model::V41Model(model::LoadedV41Model loaded)
    : config_(std::move(loaded.config)),
      weights_(std::move(loaded.weights)),
      engram_(std::move(loaded.engram)),
      ropes_{RopeTable(config_.rope_main, config_.rope_dim), RopeTable(config_.rope_compress, config_.rope_dim)} {}

void V41Model::check_call(int64_t position, std::span<const int32_t> ids) const {
  engine::check_call(config_, position, ids);
}

Tensor V41Model::forward(V41Session& session, std::span<const int32_t> ids, Model::Logits logits) const {
  check_call(session.position, ids);
  if (session.windows.size() != static_cast<size_t>(config_.num_layers))
    throw Error("session was made for a different model");
  const model::V41Config& c = config_;
  const int N = c.hc_mult, D = c.hidden_size;
  const int64_t n = static_cast<int64_t>(ids.size()), start = session.position;
  const std::vector<int32_t> tokens(ids.begin(), ids.end());
  CpuOps ops;

  // The n-gram rows of every Engram layer, hashed once per call from the look-back and the ids.
  const bool has_engram = !c.engram.layer_ids.empty();
  const std::vector<int64_t> rows = has_engram ? engram_hash_ids(engram_, ids, session.engram) : std::vector<int64_t>();
  const int64_t row_stride = static_cast<int64_t>(c.engram.layer_ids.size()) * engram_.columns;

  Tensor streams = ops.embed(weights_.embed, tokens, N);
  // Single-pass mHC: each site's mapping gives its own post/comb and the next site's pre; the first
  // site collapses stream 0 exactly.
  std::vector<std::vector<float>> pre(n, std::vector<float>(N, 0.0f));
  for (auto& p : pre) p[0] = 1.0f;
  const MoeVariant moe_variant{c.gate_temp, /*weight_before_down=*/true};
  V41Shared shared;
  Tensor input({n, int64_t{D}});
  for (int l = 0; l < c.num_layers; ++l) {
    const model::V41LayerWeights& L = weights_.layers[l];
    if (L.engram) {
      const int k = c.engram.index_of(l);
      for (int64_t t = 0; t < n; ++t) {
        const std::span<const int64_t> ids_t(rows.data() + t * row_stride + int64_t{k} * engram_.columns,
                                             static_cast<size_t>(engram_.columns));
        engram_mix(*L.engram, engram_gather(L.engram->table, ids_t), N, D, c.rms_norm_eps, streams.row(t));
      }
    }
    std::vector<HyperConnectionMix> attn_mix, ffn_mix;
    for (int64_t t = 0; t < n; ++t) {
      attn_mix.push_back(hc_mapping(c, L.attn_hc, streams.row(t)));
      collapse_streams(streams.row(t), pre[t], D, input.row(t));
    }
    ops.rms_norm(input, D, &L.attn_norm, c.rms_norm_eps);
    const Tensor attn_out = v41_attention(ops, c, L.attn, l, ropes_, input, start, session, shared);
    for (int64_t t = 0; t < n; ++t) {
      hc_expand(attn_mix[t], attn_out.row(t), D, streams.row(t));
      ffn_mix.push_back(hc_mapping(c, L.ffn_hc, streams.row(t)));
      collapse_streams(streams.row(t), attn_mix[t].pre, D, input.row(t));
    }
    ops.rms_norm(input, D, &L.ffn_norm, c.rms_norm_eps);
    const Tensor ffn_out = moe_forward(c, L.moe, /*hash_layer=*/false, input, tokens, nullptr, moe_variant);
    for (int64_t t = 0; t < n; ++t) {
      hc_expand(ffn_mix[t], ffn_out.row(t), D, streams.row(t));
      pre[t] = std::move(ffn_mix[t].pre);
    }
  }

  // No hyper-head: the last site's pre collapses the streams for the final norm and the head.
  const int64_t first = logits == Model::Logits::Last ? n - 1 : 0;
  Tensor hidden({n - first, int64_t{D}});
  for (int64_t t = first; t < n; ++t) collapse_streams(streams.row(t), pre[t], D, hidden.row(t - first));
  ops.rms_norm(hidden, D, &weights_.norm, c.rms_norm_eps);
  session.position += n;
  return ops.linear(hidden, weights_.head);
}

}  // namespace frank::engine
