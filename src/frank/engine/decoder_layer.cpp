#include "frank/engine/decoder_layer.h"

#include "frank/cpu/ops.h"
#include "frank/engine/hyper_connection.h"
#include "frank/engine/moe.h"

namespace frank::engine {
namespace {

// One mHC site over a chunk: collapse each token's streams with `pre`, normalise, run the sublayer
// on all tokens, then write its output back into the streams through `post` and `comb`.
template <typename Sublayer>
void hc_site(const model::ModelConfig& c, const model::HyperConnectionWeights& hc, const Tensor& norm, Tensor& streams,
             Sublayer&& sublayer) {
  const int64_t n = streams.rows();
  const int D = c.hidden_size;
  std::vector<HyperConnectionMix> mixes;
  Tensor input({n, int64_t{D}});
  for (int64_t t = 0; t < n; ++t) {
    mixes.push_back(hc_mapping(c, hc, streams.row(t)));
    collapse_streams(streams.row(t), mixes.back().pre, D, input.row(t));
    cpu::rms_norm(input.row(t), D, norm.data.data(), c.rms_norm_eps);
  }
  const Tensor output = sublayer(input);
  for (int64_t t = 0; t < n; ++t) hc_expand(mixes[t], output.row(t), D, streams.row(t));
}

}  // namespace

void decoder_layer(const model::ModelConfig& c, const model::LayerWeights& L, const Attention& attention,
                   bool hash_routed, Tensor& streams, int64_t start, LayerState& state,
                   const std::vector<int32_t>& tokens) {
  hc_site(c, L.attn_hc, L.attn_norm, streams, [&](const Tensor& x) { return attention.forward(x, start, state); });
  state.last_call.experts.clear();
  hc_site(c, L.ffn_hc, L.ffn_norm, streams,
          [&](const Tensor& x) { return moe_forward(c, L.moe, hash_routed, x, tokens, &state.last_call.experts); });
}

}  // namespace frank::engine
