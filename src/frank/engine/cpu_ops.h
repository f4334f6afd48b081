#pragma once
// The CPU reference backend of the shared forward passes (attention_forward.h, decoder_layer.h;
// V4.1: v41_attention_forward.h, v41_decoder_layer.h):
// every op in fp32 with double accumulation, on host Tensors and the host Session state. This is
// the oracle the CUDA ops are checked against, so each op is the plain math, token by token.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "frank/core/tensor.h"
#include "frank/engine/attention.h"
#include "frank/engine/hyper_connection.h"
#include "frank/engine/routing_replay.h"
#include "frank/engine/session.h"
#include "frank/engine/dspark_state.h"
#include "frank/engine/fake_quant.h"
#include "frank/engine/topk_row_dump.h"
#include "frank/engine/v41_session.h"
#include "frank/model/config_v41.h"
#include "frank/model/engram_layout.h"
#include "frank/model/weights.h"
#include "frank/model/weights_v41.h"

namespace frank::engine {

// The window ring keeps the last `window` of the chunk's rows kv [n, dim] (positions start ..):
// position p sits in row p % window.
void store_window_rows(std::vector<float>& ring, const Tensor& kv, int64_t start, int window);

class CpuOps {
 public:
  // `dump`, when given, receives every indexer score row index_select selects from.
  explicit CpuOps(TopkRowDump* dump = nullptr) : dump_(dump) {}

  using Array = Tensor;
  using Ids = std::vector<int32_t>;
  using Mix = std::vector<HyperConnectionMix>;             // one per token
  using Selection = std::vector<std::vector<int64_t>>;     // per token: the chosen compressed entries
  using LayerState = engine::LayerState;
  // DeepSeek-V4.1 (v41_decoder_layer.h): the session (windows[l]: layer l's ring; sources[l]: a KV
  // source's state, with n_entries; engram: the hash look-back), the Engram rows of a call, and
  // the candidate-source layer's per-token entry masks (1 = candidate).
  using V41Session = engine::V41Session;
  using V41Source = V41SourceState;
  using EngramRows = std::vector<int64_t>;               // [n, Engram layers, columns]
  using Candidates = std::vector<std::vector<uint8_t>>;  // per token: per entry
  using DSparkState = engine::DSparkState;               // the drafter's context rings (dspark_forward.h)

  // streams [n, N*D]: every stream of token t is the embedding of ids[t].
  Tensor embed(const Tensor& table, const Ids& ids, int N) const;
  // mHC site: the per-token mixes and the collapsed, normalised sublayer input [n, D].
  std::pair<Mix, Tensor> hc_pre(const model::HyperConnectionWeights& hc, const Tensor& norm, const Tensor& streams,
                                const model::ModelConfig& c) const;
  void hc_post(const Mix& mix, const Tensor& sublayer, Tensor& streams, const model::CommonConfig& c) const;
  // hc_pre's two halves, for V4.1's single-pass mHC: the per-token mappings of one site, and the
  // normalised collapse of rows [first, n) with a site's `pre` (mix null: stream 0 exactly).
  Mix hc_map(const model::HyperConnectionWeights& hc, const Tensor& streams, const model::CommonConfig& c) const;
  Tensor hc_collapse(const Tensor& streams, const Mix* mix, const Tensor& norm, int64_t first,
                     const model::CommonConfig& c) const;
  // hc_collapse without the norm: sum_j pre_j X_j of rows [first, n) (DSpark's h, dsv41-model.md §8).
  Tensor hc_sum(const Tensor& streams, const Mix* mix, int64_t first, const model::CommonConfig& c) const;
  // The mean over the hc_mult streams of every row: [n, D] (DSpark's target features).
  Tensor stream_mean(const Tensor& streams, const model::CommonConfig& c) const;
  // Hyper-head and final norm of rows [first, n): [n - first, D].
  Tensor hyper_head(const model::HyperConnectionWeights& hc, const Tensor& norm, const Tensor& streams, int64_t first,
                    const model::ModelConfig& c) const;

  Tensor linear(const Tensor& x, const LinearWeight& w) const;
  // linear of x through each of ws (a backend may run them as one launch).
  std::vector<Tensor> linears(const Tensor& x, std::span<const LinearWeight* const> ws) const;
  // Each of the N streams of every row of x [n, N*in] through w: [n, N*out].
  Tensor linear_per_stream(const Tensor& x, const LinearWeight& w, int N) const;
  // streams[t][j*D + d] += x[t][d] for each of the N streams (x [n, D]).
  void add_to_streams(Tensor& streams, const Tensor& x, int N) const;
  // Column group g of x (x.cols()/groups wide) through rows [g*R, (g+1)*R) of w, R = w.rows()/groups.
  Tensor grouped_linear(const Tensor& x, const LinearWeight& w, int groups) const;
  // Every `width`-wide piece of x in place (weight null: unweighted).
  void rms_norm(Tensor& x, int width, const Tensor* weight, float eps) const;
  // RoPE on the `heads` pieces of width `dim` of each row t, at position (start + t) * stride.
  void rope(Tensor& x, int heads, int dim, int64_t start, const RopeTable& rope, bool inverse,
            int64_t stride = 1) const;
  // rms_norm of every head piece (width dim), then rope on it: one op, so a backend can fuse them.
  void norm_rope(Tensor& x, int heads, int dim, const Tensor* weight, float eps, int64_t start,
                 const RopeTable& rope) const;
  void scale(Tensor& x, float s) const;
  // V4.1's quantisation-aware rounding (fake_quant.h) of every `width`-wide piece of x in place.
  void fake_quant(Tensor& x, int width, FakeQuant grid, int block) const;

  // Pushes the chunk's projections (positions start ..) through the compressor in order.
  void compress(CompressorState& state, const Compressor& compressor, const Tensor& kv, const Tensor& gate,
                int64_t start) const;
  // Two chains of ops that do not depend on each other, and side's result: the CPU runs main, then
  // side (a GPU backend runs them at the same time: cuda::CudaOps::concurrently).
  template <class Side, class Main>
  Selection concurrently(Side&& side, Main&& main) {
    main(*this);
    return side(*this);
  }
  // The indexer's top k of the entries each token sees (CSA).
  Selection index_select(const Tensor& q, const Tensor& w, const CompressorState& keys, const Compressor& compressor,
                         int64_t start, int k) const;
  // Attention with the sink over each token's window (earlier rows from the ring, the chunk's own
  // from kv) and compressed entries (HCA: all it sees; CSA: `selected`), then the K=V rows' RoPE
  // undone at the query's position (rope inverse): [n, heads * head_dim]. Then the window ring keeps
  // the chunk's last rows.
  Tensor attend(const Tensor& q, const Tensor& kv, LayerState& state, const Attention& a, int64_t start,
                const Selection* selected) const;
  // The compressors' raw projections of this call, for Model::rewind.
  void keep_call_record(LayerState& state, Tensor comp_kv, Tensor comp_gate, Tensor index_kv, Tensor index_gate) const;
  // The next moe() calls of `model`'s layers route to `forced`'s experts (routing_replay.h); both
  // must outlive those calls.
  void replay_routing(const ForcedRouting& forced, const model::ModelWeights& model) {
    forced_ = &forced;
    forced_model_ = &model;
  }

  // Router, routed experts and shared expert; records the routed experts in state.last_call.
  Tensor moe(const model::ModelConfig& c, const model::MoeWeights& w, bool hash_layer, const Tensor& x, const Ids& ids,
             LayerState& state) const;

  // DeepSeek-V4.1 (v41_decoder_layer.h, v41_attention_forward.h; docs/architecture.md).
  // V4's MoE with V4.1's MoeVariant (gate_temp, weight before down); no hash layers, no record.
  Tensor moe_v41(const model::V41Config& c, const model::MoeWeights& w, const Tensor& x, const Ids& ids) const;
  // The Engram rows of the call's tokens (engram_hash_ids); `history` moves on past them.
  EngramRows engram_rows(const model::EngramLayout& layout, const Ids& ids, EngramHistory& history) const;
  // Adds Engram layer slot `slot`'s gated value (engram_gather + engram_mix) to each token's streams.
  void engram_add(Tensor& streams, const model::V41EngramWeights& w, const EngramRows& rows,
                  const model::EngramLayout& layout, int slot, const model::CommonConfig& c) const;
  // Pools the chunk (positions start ..) into the latents [groups, head_dim] of the groups it closes,
  // groups start/ratio .. (start+n)/ratio - 1: with a gate, `ratio` consecutive tokens per group,
  // per channel softmax(gate) · kv in fp32, the open group's rows carried in `source`; without one
  // (ratio 1), each kv row as it is. With a gate, the chunk's raw rows become source.last_call.
  Tensor pool_groups(V41Source& source, const Tensor& kv, const Tensor* gate, int ratio, int64_t start) const;
  // Appends the closed groups' entries [groups, head_dim] and (a key owner) indexer keys.
  void publish(V41Source& source, const Tensor& entries, const Tensor* index_keys) const;
  // Indexer scores [n, keys.n_entries] of each query against every key (indexer_scores).
  Tensor index_scores(const Tensor& q, const Tensor& w, const V41Source& keys) const;
  // The two-level top-k (indexer_v41.h); token t reaches entries < min((start+t+1)/ratio, entries).
  // Level 1: each token's candidate-block mask.
  Candidates candidate_blocks(const Tensor& scores, int64_t start, int ratio, int topk_blocks, int block_size) const;
  // Level 2: each token's top `topk` reachable entries (inside `within` where given; entries past a
  // mask's end are outside it), sorted by index.
  Selection select_entries(const Tensor& scores, int64_t start, int ratio, const Candidates* within, int topk) const;
  // attend's math for V4.1 (heads = q.cols() / head_dim): each token's window rows (earlier ones
  // from `ring`, the chunk's own from kv), then `entries`' rows `selected` (none when null); the
  // output's RoPE undone with `rope` at the query's position, as attend does.
  Tensor attend_v41(const Tensor& q, const Tensor& kv, const std::vector<float>& ring, int64_t start, int window,
                    const Tensor& sinks, const RopeTable& rope, const V41Source* entries,
                    const Selection* selected) const;
  // DSpark's block attention (dsv41-model.md §8): every row of the block at positions start ..
  // attends the ring's rows of positions [start - window, start) (those >= 0) and all of the block's
  // own rows kv (bidirectional); sink, scale and inverse RoPE as attend_v41.
  Tensor attend_block(const Tensor& q, const Tensor& kv, const std::vector<float>& ring, int64_t start, int window,
                      const Tensor& sinks, const RopeTable& rope) const;
  // window_store on a V4.1 layer's ring.
  void window_store(std::vector<float>& ring, const Tensor& kv, int64_t start, int window) const;

  // Small array ops of DSpark's Markov chain (dspark_chain, dspark_forward.h).
  // Rows [first, first + n) of x.
  Tensor rows(const Tensor& x, int64_t first, int64_t n) const;
  // The parts' rows one after another (parts of equal width).
  Tensor stack_rows(std::span<const Tensor> parts) const;
  // [a | b] row by row (a and b of equal rows).
  Tensor concat_cols(const Tensor& a, const Tensor& b) const;
  // The greedy token of every row (engine::argmax: the first maximum).
  Ids argmax_rows(const Tensor& logits) const;

 private:
  TopkRowDump* dump_;
  const ForcedRouting* forced_ = nullptr;
  const model::ModelWeights* forced_model_ = nullptr;
};

}  // namespace frank::engine
