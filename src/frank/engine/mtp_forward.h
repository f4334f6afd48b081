#pragma once
// The MTP block's forward pass (dsv4-model.md §7), written once over a backend's ops like the main
// model (decoder_layer.h): engine::MtpBlock runs it over CpuOps, cuda::CudaMtpBlock over CudaOps.
// For the n slots at positions position .. position+n-1:
//   e  = RMSNorm_enorm(embed[next_tokens[t]])
//   X  = e_proj(e) on every stream + h_proj(RMSNorm_hnorm(H_t[j])) per stream j
//   X  = decoder layer (sliding attention, scored MoE) on X
//   logits = head · RMSNorm_norm(hyper_head_mtp(X))
#include <cstdint>

#include "frank/engine/decoder_layer.h"
#include "frank/model/weights.h"

namespace frank::engine {

// `streams`: the slots' main-model streams H [n, hc_mult * hidden] on entry, the block's output
// streams X (before its hyper-head; what a chained slot reads as its H) on return. `state` is the
// block's own layer state (its window ring). Returns the logits [n, vocab].
template <class Ops>
typename Ops::Array mtp_forward(Ops& ops, const model::ModelConfig& c, const model::ModelWeights& w,
                                const model::MtpWeights& m, const Attention& attention, typename Ops::Array& streams,
                                int64_t position, typename Ops::LayerState& state,
                                const typename Ops::Ids& next_tokens) {
  const int D = c.hidden_size, N = c.hc_mult;
  typename Ops::Array e = ops.embed(w.embed, next_tokens, 1);
  ops.rms_norm(e, D, &m.enorm, c.rms_norm_eps);
  const typename Ops::Array e_proj = ops.linear(e, m.e_proj);
  ops.rms_norm(streams, D, &m.hnorm, c.rms_norm_eps);  // every stream of every slot on its own
  streams = ops.linear_per_stream(streams, m.h_proj, N);
  ops.add_to_streams(streams, e_proj, N);
  decoder_layer(ops, c, m.block, attention, /*hash_routed=*/false, streams, position, state, next_tokens);
  const typename Ops::Array hidden = ops.hyper_head(m.hc_head, m.norm, streams, 0, c);
  return ops.linear(hidden, w.head);
}

}  // namespace frank::engine
