#pragma once
// The DeepSeek-V4.1 text forward pass over a chunk of tokens (dsv41-model.md §3-7), written once
// over a backend's ops like V4's (decoder_layer.h; docs/architecture.md lists what each op must
// do). Per layer: Engram (on its layers), then two single-pass mHC sites (attention, MoE), each
// collapsing the streams with the previous site's `pre`; no hyper-head.
#include <cstdint>
#include <optional>
#include <utility>

#include "frank/engine/v41_attention_forward.h"
#include "frank/model/engram_layout.h"

namespace frank::engine {

// One single-pass mHC site: this site's mapping (its post and comb, and the next site's pre) from
// the streams as they come in; the sublayer reads the streams collapsed with the previous site's
// pre (null: the first site, stream 0) and normalised. Returns this site's mix.
template <class Ops, class Sublayer>
typename Ops::Mix v41_hc_site(Ops& ops, const model::V41Config& c, const model::HyperConnectionWeights& hc,
                              const Tensor& norm, typename Ops::Array& streams, const typename Ops::Mix* previous,
                              Sublayer&& sublayer) {
  typename Ops::Mix mix = ops.hc_map(hc, streams, c);
  const auto output = sublayer(ops.hc_collapse(streams, previous, norm, 0, c));
  ops.hc_post(mix, output, streams, c);
  return mix;
}

// A tap that reads nothing (v41_model_forward's default).
struct V41NoTap {
  template <class Array>
  void operator()(int, const Array&) const {}
};

// Logits of rows [first, n) of the chunk `ids` at positions start .. start+n-1 (start: the
// session's position, which the caller advances). Updates the session's rings, KV sources and
// Engram look-back. `tap(l, streams)` sees each layer's input streams after Engram (what DSpark's
// target features average, dsv41-model.md §8); it must not change them.
template <class Ops, class Tap = V41NoTap>
typename Ops::Array v41_model_forward(Ops& ops, const model::V41Config& c, const model::V41Weights& w,
                                      const model::EngramLayout& engram, const V41Ropes& ropes,
                                      typename Ops::V41Session& session, const typename Ops::Ids& ids, int64_t start,
                                      int64_t first, Tap&& tap = {}) {
  using Mix = typename Ops::Mix;
  // The n-gram rows of every Engram layer, hashed once per call from the look-back and the ids.
  typename Ops::EngramRows rows;
  if (!c.engram.layer_ids.empty()) rows = ops.engram_rows(engram, ids, session.engram);

  typename Ops::Array streams = ops.embed(w.embed, ids, c.hc_mult);
  std::optional<Mix> last;  // the previous site's mix; none before the first site
  V41Shared<Ops> shared;
  for (int l = 0; l < c.num_layers; ++l) {
    const model::V41LayerWeights& L = w.layers[l];
    if (L.engram) ops.engram_add(streams, *L.engram, rows, engram, c.engram.index_of(l), c);
    tap(l, std::as_const(streams));
    Mix attn = v41_hc_site(ops, c, L.attn_hc, L.attn_norm, streams, last ? &*last : nullptr, [&](const auto& x) {
      return v41_attention_forward(ops, c, L.attn, l, ropes, x, start, session, shared);
    });
    last = v41_hc_site(ops, c, L.ffn_hc, L.ffn_norm, streams, &attn,
                       [&](const auto& x) { return ops.moe_v41(c, L.moe, x, ids); });
  }
  // No hyper-head: the last site's pre collapses the streams for the final norm and the head.
  const typename Ops::Array hidden = ops.hc_collapse(streams, last ? &*last : nullptr, w.norm, first, c);
  return ops.linear(hidden, w.head);
}

}  // namespace frank::engine
