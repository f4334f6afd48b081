#pragma once
// DeepSeek-V4 attention (dsv4-model.md §4-5) over a chunk of n tokens, written once over a
// backend's ops (`Ops`: CpuOps, the fp32 reference, or cuda::CudaOps; docs/architecture.md lists
// what each op must do). The stateful part is batched: the chunk's tokens are pushed through the
// compressors first (entries are append-only, and token t sees entry w only when
// w < (t+1)/ratio, so pushing first changes nothing), then every token attends to its window and
// entries, then the window ring takes the chunk's rows (one op: a GPU stores them in the kernel
// that finishes the attention).
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "frank/engine/attention.h"

namespace frank::engine {

template <class Ops>
typename Ops::Array attention_forward(Ops& ops, const Attention& a, const typename Ops::Array& x, int64_t start,
                                      typename Ops::LayerState& state) {
  using Array = typename Ops::Array;
  const model::ModelConfig& c = a.config();
  const model::AttentionWeights& w = a.weights();
  const int H = c.num_heads, hd = c.head_dim;
  const float eps = c.rms_norm_eps;

  // Every projection of x at once (one launch on a GPU): q_a, kv, then the compressor's kv and gate,
  // then the indexer compressor's kv and gate and the indexer's head weights, where the layer has them.
  std::vector<const LinearWeight*> from_x = {&w.q_a_proj, &w.kv_proj};
  if (a.compressor()) from_x.insert(from_x.end(), {&w.compressor->kv_proj, &w.compressor->gate_proj});
  const model::IndexerWeights* ix = a.index_compressor() ? &*w.indexer : nullptr;
  if (ix) from_x.insert(from_x.end(), {&ix->compressor.kv_proj, &ix->compressor.gate_proj, &ix->weights_proj});
  std::vector<Array> projected = ops.linears(x, from_x);

  // Queries: q_a -> weighted RMSNorm (the "q residual", also the indexer's input) -> q_b -> per-head
  // unweighted RMSNorm -> RoPE.
  Array q_residual = std::move(projected[0]);
  ops.rms_norm(q_residual, c.q_lora_rank, &w.q_a_norm, eps);
  Array kv = std::move(projected[1]);
  Array comp_kv, comp_gate, index_kv, index_gate, index_w;
  if (a.compressor()) {
    comp_kv = std::move(projected[2]);
    comp_gate = std::move(projected[3]);
  }
  if (ix) {
    const size_t first = a.compressor() ? 4 : 2;
    index_kv = std::move(projected[first]);
    index_gate = std::move(projected[first + 1]);
    index_w = std::move(projected[first + 2]);
  }

  // The single K=V row per token (weighted RMSNorm then RoPE), and the compressor's push.
  const auto kv_path = [&](Ops& o) {
    o.norm_rope(kv, 1, hd, &w.kv_norm, eps, start, a.rope());
    if (a.compressor()) o.compress(state.compressor, *a.compressor(), comp_kv, comp_gate, start);
  };
  // The queries, the K=V row and the indexer's selection need only the projections and meet at
  // attend: a backend may run two chains side by side (ops.concurrently). The side one is the
  // indexer's (compressor push, index queries, scores, top-k: the longest chain of short kernels)
  // where the layer has it, else the K=V row's; the queries' large q_b stays on the main one.
  Array q;
  typename Ops::Selection selected = ops.concurrently(
      [&](Ops& o) -> typename Ops::Selection {
        if (!ix) {
          kv_path(o);
          return {};
        }
        // Inside it, the indexer's keys (its compressor's push; the head weights' scale rides along)
        // and its queries are two chains again, meeting at the scores (on a GPU: a second branch;
        // this chain was the layer's longer one, and the queries' is the longer of the two).
        Array index_q;
        o.concurrently(
            [&](Ops& p) -> typename Ops::Selection {
              p.compress(state.indexer, *a.index_compressor(), index_kv, index_gate, start);
              p.scale(index_w, static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.index_n_heads))));
              return {};
            },
            [&](Ops& p) {
              index_q = p.linear(q_residual, ix->q_b_proj);
              p.rope(index_q, c.index_n_heads, c.index_head_dim, start, a.rope(), /*inverse=*/false);
            });
        return o.index_select(index_q, index_w, state.indexer, *a.index_compressor(), start, c.index_topk);
      },
      [&](Ops& o) {
        q = o.linear(q_residual, w.q_b_proj);
        o.norm_rope(q, H, hd, nullptr, eps, start, a.rope());
        if (ix) kv_path(o);
      });

  // K=V carried RoPE into the values: attend undoes it at the query's position. Then the window
  // ring takes the chunk's rows.
  const Array heads = ops.attend(q, kv, state, a, start, ix ? &selected : nullptr);
  ops.keep_call_record(state, std::move(comp_kv), std::move(comp_gate), std::move(index_kv), std::move(index_gate));

  // Heads are split into o_groups contiguous groups; group g goes through rows
  // [g*o_lora, (g+1)*o_lora) of o_a_proj, the concatenation through o_b_proj.
  const Array low = ops.grouped_linear(heads, w.o_a_proj, c.o_groups);
  return ops.linear(low, w.o_b_proj);
}

}  // namespace frank::engine
