#pragma once
// The CUDA backend of the shared forward pass (engine/attention_forward.h, decoder_layer.h): the
// same ops as engine::CpuOps, on device arrays and a device-resident session, each one or a few
// kernel launches of frank/cuda/ops.cuh on one stream. Nothing here waits for the GPU, except moe()
// in a layer with CPU-homed routed experts (DeviceWeights::cpu_experts, cpu_experts.h).
#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "frank/cuda/branch_stream.h"
#include "frank/cuda/device_array.h"
#include "frank/cuda/device_weights.h"
#include "frank/cuda/op_profile.h"
#include "frank/engine/attention.h"
#include "frank/engine/routing_replay.h"
#include "frank/model/config.h"
#include "frank/model/weights.h"

namespace frank::cuda {

// A compressor's state on the device (CompressorBuffers' storage); its counters follow from the
// session position. Entries grow by doubling, stream-ordered, as records of `entry_format`
// (ops.cuh): the session's K=V format for the attention compressor, fp32 for the indexer's keys.
struct DeviceCompressor {
  DeviceArray<float> pending_kv, pending_gate, overlap_kv, overlap_gate;
  DeviceArray<uint8_t> entries;  // [capacity, record bytes]
  KvFormat entry_format = KvFormat::F32;
};

// The K=V row layout of a layer's window ring and attention entries in `format`.
KvRowLayout kv_layout(const model::ModelConfig& c, KvFormat format);
// The records a compressor's entries are kept as: the session's K=V format for attention entries,
// fp32 for the indexer's keys (DeviceCompressor::entry_format).
KvRowLayout entry_layout(const DeviceCompressor& s, const engine::Compressor& comp);

// The compressors' raw per-token projections of the last call that recorded them (a verify step):
// what a rewind pushes through the compressors again to keep a prefix of that call
// (engine::CallRecord). Fixed capacity, so that a captured graph can copy into it.
struct DeviceCallRecord {
  DeviceArray<float> compressor_kv, compressor_gate;  // [capacity, projection width]
  DeviceArray<float> indexer_kv, indexer_gate;        // CSA layers
};

struct DeviceLayerState {
  KvRowLayout kv;                // the records of the window ring and compressor.entries (kv_layout)
  DeviceArray<uint8_t> window;   // [sliding_window, kv.row_bytes] ring: position p in row p % window
  DeviceCompressor compressor, indexer;
  DeviceArray<int32_t> last_experts;  // [tokens, experts_per_token]: the routed experts of the last call
  DeviceCallRecord last_call;
};

// A layer's state before its first token: an empty window ring of `format` records (zeros), no
// compressor buffers yet (CudaOps::prepare allocates them).
DeviceLayerState new_layer_state(const model::ModelConfig& c, KvFormat format, cudaStream_t stream);

// The bytes ops must read from device memory — weights, and session state (window rows, entries,
// index keys) — counted on the host as the ops are issued (activations are not counted). Routed
// experts are not counted here: which ones a step reads is known only after it ran (last_experts).
struct Traffic {
  double weight_bytes = 0, state_bytes = 0;
};

// Where a step's kernels read its first position — device memory, written before the step runs —
// and the bound its host-side sizes are taken for: no token of the step is at `end_bound` or past
// it. Eagerly issued, end_bound is the step's own end; a captured graph (CudaModel) takes a later
// bound, so that it can be replayed at every position up to it.
struct StepPosition {
  const int64_t* device;
  int64_t end_bound;
};

class CudaOps {
 public:
  using Array = DeviceArray<float>;
  struct Ids {
    std::vector<int32_t> host;
    DeviceArray<int32_t> device;
    // Routing replay: [num_layers, n, experts_per_token], the experts moe() routes each token to in
    // each layer of the model (replay_routing); empty: the router chooses.
    DeviceArray<int32_t> forced_experts;
  };
  using Mix = DeviceArray<float>;         // [n, 2N + N*N]: pre | post | comb per token
  using Selection = DeviceArray<int32_t>;  // [n, index_topk], -1 past the entries a token sees
  using LayerState = DeviceLayerState;

  // `keep_routing`: moe() keeps each call's routed experts in LayerState::last_experts. Off while a
  // step is captured as a graph: a graph that allocates memory it does not free cannot be replayed.
  CudaOps(DeviceWeights& weights, cudaStream_t stream, StepPosition position, Traffic* traffic = nullptr,
          bool keep_routing = true)
      : w_(weights), stream_(stream), position_(position), traffic_(traffic), keep_routing_(keep_routing) {}

  // Allocates the layer's compressor buffers and reserves its entries for every position below
  // end_bound, so that no op of a step up to that bound allocates session state (a graph captured
  // afterwards must not). compress() calls it too.
  void prepare(LayerState& state, const engine::Attention& a) const;

  // Calls of up to `tokens` tokens keep their compressor projections in LayerState::last_call (0:
  // they are dropped). prepare() then allocates the record too.
  void record_calls(int64_t tokens) { record_tokens_ = tokens; }

  // Later concurrently() calls run their side chain on branches[0] (none: in order on the stream),
  // a concurrently() inside that side chain its own on branches[1], and so on (one inside the main
  // chain would use branches[0] again: correct, but in order with the side chain); moe() runs its
  // shared expert on branches[0]. Only for steps whose session state prepare() has allocated up to
  // the bound (CudaModel's steps): an op on a branch stream must not allocate state that later
  // steps use on this one. The streams must outlive the ops.
  void set_branches(std::span<const BranchStream> branches) { branches_ = branches; }

  // `main` on this stream and `side` beside it on the next branch stream, both given these ops
  // (side: a copy that issues to the branch stream, with the branches after it), then joined;
  // without a branch, main then side in order. side's result (the indexer's selection) is freed on
  // this stream afterwards. Arrays side allocates itself die inside it or are that result; arrays
  // of this stream that side uses must outlive the call (their free on this stream would not wait
  // for the branch's kernels).
  template <class Side, class Main>
  Selection concurrently(Side&& side, Main&& main) {
    if (branches_.empty()) {
      main(*this);
      return side(*this);
    }
    const BranchStream& branch = branches_.front();
    branch.fork(stream_);
    CudaOps beside = *this;
    beside.stream_ = branch.stream();
    beside.branches_ = branches_.subspan(1);
    Selection selected = side(beside);
    main(*this);
    branch.join(stream_);
    selected.follow_stream(stream_);
    return selected;
  }

  // Times every op into `profile` (eager steps only: events are not captured into graphs here).
  void set_profile(OpProfile* profile) { profile_ = profile; }
  // Counts the bytes of later ops into `traffic` (null: none).
  void set_traffic(Traffic* traffic) { traffic_ = traffic; }

  // With `forced`, its experts are uploaded too (Ids::forced_experts), before the step's kernels.
  Ids upload_ids(std::span<const int32_t> ids, const engine::ForcedRouting* forced = nullptr) const;
  // moe() of `model`'s layers routes to Ids::forced_experts where the ids carry them.
  void replay_routing(const model::ModelWeights& model) { forced_model_ = &model; }
  Tensor download(const Array& a) const;  // waits for the stream

  Array embed(const Tensor& table, const Ids& ids, int N) const;
  std::pair<Mix, Array> hc_pre(const model::HyperConnectionWeights& hc, const Tensor& norm, const Array& streams,
                               const model::ModelConfig& c) const;
  void hc_post(const Mix& mix, const Array& sublayer, Array& streams, const model::CommonConfig& c) const;
  Array hyper_head(const model::HyperConnectionWeights& hc, const Tensor& norm, const Array& streams, int64_t first,
                   const model::ModelConfig& c) const;

  // The ops below take the host's `start` as the shared model code passes it; their kernels read
  // the position from StepPosition::device instead (the same value, unless a graph is replayed).
  Array linear(const Array& x, const LinearWeight& w) const;
  // One launch for up to kMaxLinearOutputs weights of one type (cuda::linears), else one each.
  std::vector<Array> linears(const Array& x, std::span<const LinearWeight* const> ws) const;
  Array linear_per_stream(const Array& x, const LinearWeight& w, int N) const;
  void add_to_streams(Array& streams, const Array& x, int N) const;
  Array grouped_linear(const Array& x, const LinearWeight& w, int groups) const;
  void rms_norm(Array& x, int width, const Tensor* weight, float eps) const;
  // Row t at position (start + t) * stride: the kernels take start * stride from StepPosition::device
  // (stride 1: the step's position; V4.1's groups: that position rounded down to a group's first).
  void rope(Array& x, int heads, int dim, int64_t start, const engine::RopeTable& rope, bool inverse,
            int64_t stride = 1) const;
  void norm_rope(Array& x, int heads, int dim, const Tensor* weight, float eps, int64_t start,
                 const engine::RopeTable& rope) const;
  void scale(Array& x, float s) const;

  void compress(DeviceCompressor& state, const engine::Compressor& compressor, const Array& kv, const Array& gate,
                int64_t start) const;
  Selection index_select(const Array& q, const Array& w, const DeviceCompressor& keys,
                         const engine::Compressor& compressor, int64_t start, int k) const;
  // The window ring's store is the attention's last kernel's (cuda::RingStore).
  Array attend(const Array& q, const Array& kv, LayerState& state, const engine::Attention& a, int64_t start,
               const Selection* selected) const;
  // Copies the call's projections into state.last_call when calls are recorded (record_calls).
  void keep_call_record(LayerState& state, Array comp_kv, Array comp_gate, Array index_kv, Array index_gate) const;
  // Pushes the first `keep` recorded tokens of the last call through the layer's compressors again
  // (engine::Attention::replay), from the compressor state before that call, at the position
  // StepPosition::device holds.
  void replay_call(LayerState& state, const engine::Attention& a, int64_t keep) const;
  Array moe(const model::ModelConfig& c, const model::MoeWeights& w, bool hash_layer, const Array& x, const Ids& ids,
            LayerState& state) const;

 protected:
  // moe() for either family's config: router (logits / gate_temp), routed experts (hash layers: by
  // tid2eid) and the shared expert; keeps the routing in *last_experts when given and kept.
  Array moe_forward(const model::CommonConfig& c, const model::MoeWeights& w, bool hash_layer, const Array& x,
                    const Ids& ids, float gate_temp, DeviceArray<int32_t>* last_experts) const;
  void count(double weight_bytes, double state_bytes) const;
  void prepare(DeviceCompressor& state, const engine::Compressor& compressor) const;
  void compress(DeviceCompressor& state, const engine::Compressor& compressor, const float* kv, const float* gate,
                int64_t n, int64_t start) const;

  DeviceWeights& w_;
  cudaStream_t stream_;
  StepPosition position_;
  Traffic* traffic_;
  bool keep_routing_;
  int64_t record_tokens_ = 0;
  OpProfile* profile_ = nullptr;
  const model::ModelWeights* forced_model_ = nullptr;
  std::span<const BranchStream> branches_;
};

}  // namespace frank::cuda
