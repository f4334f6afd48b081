#pragma once
// One DeepSeek-V4 decoder layer over a chunk of tokens, written once over a backend's ops and
// shared by the main model and the MTP block: an mHC site around attention, then one around the
// MoE (dsv4-model.md §3-6).
#include <cstdint>

#include "frank/engine/attention_forward.h"
#include "frank/model/weights.h"

namespace frank::engine {

// One mHC site: collapse each token's streams with `pre`, normalise, run the sublayer on all
// tokens, then write its output back into the streams through `post` and `comb`.
template <class Ops, class Sublayer>
void hc_site(Ops& ops, const model::ModelConfig& c, const model::HyperConnectionWeights& hc, const Tensor& norm,
             typename Ops::Array& streams, Sublayer&& sublayer) {
  auto [mix, input] = ops.hc_pre(hc, norm, streams, c);
  const auto output = sublayer(input);
  ops.hc_post(mix, output, streams, c);
}

// streams: [n, hc_mult * hidden] for the tokens at positions start..start+n-1, updated in place.
template <class Ops>
void decoder_layer(Ops& ops, const model::ModelConfig& c, const model::LayerWeights& L, const Attention& attention,
                   bool hash_routed, typename Ops::Array& streams, int64_t start, typename Ops::LayerState& state,
                   const typename Ops::Ids& ids) {
  hc_site(ops, c, L.attn_hc, L.attn_norm, streams,
          [&](const typename Ops::Array& x) { return attention_forward(ops, attention, x, start, state); });
  hc_site(ops, c, L.ffn_hc, L.ffn_norm, streams,
          [&](const typename Ops::Array& x) { return ops.moe(c, L.moe, hash_routed, x, ids, state); });
}

// The whole model on a chunk: every stream starts as the token embedding, then the layers, then
// the hyper-head, final norm and head for rows [first, n). `streams_out`, when given, receives the
// streams before the hyper-head (what the MTP drafter reads). `at_layer(l)` runs before layer l and
// at_layer(num_layers) before the head (a benchmark records its timing events there).
template <class Ops, class Layers, class AtLayer = void (*)(int)>
typename Ops::Array model_forward(Ops& ops, const model::ModelConfig& c, const model::ModelWeights& w,
                                  const std::vector<Attention>& attention, Layers& layers, int64_t start,
                                  const typename Ops::Ids& ids, int64_t first, typename Ops::Array* streams_out,
                                  AtLayer&& at_layer = [](int) {}) {
  typename Ops::Array streams = ops.embed(w.embed, ids, c.hc_mult);
  for (int l = 0; l < c.num_layers; ++l) {
    at_layer(l);
    decoder_layer(ops, c, w.layers[l], attention[l], c.hash_routed[l], streams, start, layers[l], ids);
  }
  at_layer(c.num_layers);
  if (streams_out != nullptr) *streams_out = streams;
  const typename Ops::Array hidden = ops.hyper_head(w.hc_head, w.norm, streams, first, c);
  return ops.linear(hidden, w.head);
}

}  // namespace frank::engine
