#pragma once
// CudaModel: an engine::Model's forward pass on the GPU — the same model code (model_forward) over
// CudaOps, weights resident in device memory, the session's state (window rings, compressor
// buffers, compressed entries) in device memory. CudaRunner is its SessionRunner for `frank logits`
// and `frank generate --backend cuda`.
//
// Decode and verify steps (calls of up to kGraphTokens tokens) are captured as CUDA graphs and
// replayed: the kernels read the step's position from device memory (ops.cuh), so one graph serves
// every position up to its bound (GraphPolicy::span past where it was captured), after which the
// next call captures a new one. Longer calls (prefill chunks) are issued eagerly. Every call is
// timed with CUDA events (step_times()). Steps with routed experts split between GPU and CPU are
// captured too: the GPU and the host's worker hand layers over through mapped memory
// (cpu_experts.h), and the launcher tells the worker how many hand-overs each launch brings.
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "frank/cuda/branch_stream.h"
#include "frank/cuda/cuda_ops.h"
#include "frank/cuda/device_weights.h"
#include "frank/engine/model.h"
#include "frank/engine/session_runner.h"

namespace frank::cuda {

// The stream a model's calls run on; its memory pool keeps freed stream-ordered memory (every step
// allocates the same arrays again). frank::Error when no CUDA device is available.
cudaStream_t make_stream();

// What a call returns besides advancing the session: the logits of the last or of all of its
// tokens; the residual streams before the hyper-head (what the MTP drafter reads); whether it
// keeps its compressor projections, so that a rewind can keep a prefix of it (a verify step).
struct CallOutputs {
  bool all_logits = false;
  bool streams = false;
  bool record = false;
  bool operator==(const CallOutputs&) const = default;
};

// One captured step: `tokens` ids in, `outputs` out.
struct StepGraph {
  int64_t tokens = 0;
  CallOutputs outputs;
  bool forced_routing = false;  // captured with routing replay: ids.forced_experts written before each replay
  int64_t hand_overs = 0;       // split layers handed to the host's worker (CpuExperts::expect after each launch)
  int64_t end_bound = 0;       // replayable while the step ends at or before this position
  CudaOps::Ids ids;            // the step's input, written before each replay
  DeviceArray<float> logits;   // the step's output, copied here by the graph's last nodes
  DeviceArray<float> streams;  // with outputs.streams
  cudaGraphExec_t exec = nullptr;

  StepGraph() = default;
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;
  ~StepGraph();
};

struct DeviceSession {
  int64_t position = 0;
  DeviceArray<int64_t> position_at;  // [1]: `position` where the kernels read it
  std::vector<DeviceLayerState> layers;
  // Where the last call started when it recorded its projections (CallOutputs::record), else -1:
  // what a rewind (device_checkpoint.h) checks before it replays them.
  int64_t recorded_from = -1;
  int64_t records = 0;  // calls that recorded their projections so far (the record is the last one's)
  std::vector<std::unique_ptr<StepGraph>> graphs;  // they point into `layers`: dropped with them
};

// How long one forward call took on the GPU (CUDA events around its kernels; uploads of new
// weights and the logits' download excluded).
struct StepTime {
  int64_t tokens;
  bool graph;  // replayed (or just captured) as a CUDA graph
  float ms;
};

// When calls are captured as graphs. A graph reserves state and scores the indexer's columns up to
// its bound, so a longer span means fewer captures and slightly more work per step.
struct GraphPolicy {
  bool enabled = true;  // off: every call is issued eagerly (to compare the two)
  int64_t span = 512;   // a graph serves positions up to the next multiple of span past its capture
};

class CudaModel {
 public:
  static constexpr int64_t kGraphTokens = 8;

  // `synthetic_seed` seeds the weights a shape-only host model leaves to the device (DeviceWeights).
  CudaModel(const engine::Model& model, WeightType linear_type, uint64_t synthetic_seed = 0, GraphPolicy graphs = {});
  ~CudaModel();
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  // A session that stores its K=V rows (window rings, attention entries) as `kv` records (ops.cuh).
  DeviceSession new_session(KvFormat kv = KvFormat::F32);
  // A session whose state is random, as if `position` tokens had been consumed (window rings,
  // compressor buffers, compressed entries and index keys of the right sizes), with room for
  // `room` more tokens' entries: what a benchmark at context `position` needs without a prefill.
  // The K=V rows are random fp32 rows stored as `kv` records: sessions of the same seed in two
  // formats hold the same rows, differently rounded.
  DeviceSession synthetic_session(int64_t position, int64_t room, uint64_t seed, KvFormat kv = KvFormat::F32);
  // As engine::Model::forward: logits on the host, [ids.size(), vocab] or [1, vocab] for Logits::Last;
  // `streams`, when given, receives the residual streams before the hyper-head [ids.size(), hc_mult * hidden],
  // and `device_streams` a copy of them in device memory (what the GPU's MTP drafter reads).
  Tensor forward(DeviceSession& session, std::span<const int32_t> ids, engine::Model::Logits logits,
                 Tensor* streams = nullptr, DeviceArray<float>* device_streams = nullptr);
  // A verify step of up to kGraphTokens tokens: all logits and the streams, as forward; the call
  // keeps its compressor projections, so that rewind() (device_checkpoint.h) can keep a prefix of it.
  Tensor verify(DeviceSession& session, std::span<const int32_t> ids, Tensor& streams);
  // The same, with the streams on the host and/or in device memory (either may be null).
  Tensor verify(DeviceSession& session, std::span<const int32_t> ids, Tensor* streams,
                DeviceArray<float>* device_streams);
  // The greedy token after `ids`, chosen on the GPU (argmax_rows): only the token is downloaded.
  int32_t forward_greedy(DeviceSession& session, std::span<const int32_t> ids);

  const engine::Model& model() const { return model_; }
  size_t weight_bytes() const { return weights_.bytes(); }
  DeviceWeights& device_weights() { return weights_; }
  cudaStream_t stream() const { return stream_; }
  // The streams a captured step forks onto (CudaOps::set_branches).
  std::span<const BranchStream> branches() const { return branches_; }
  const std::vector<StepTime>& step_times() const { return step_times_; }
  // Later calls route to the experts `replay` gives them (engine/routing_replay.h; null: the router
  // chooses). Each call takes its tokens' experts and uploads them with its ids, before its kernels.
  void replay_routing(engine::RoutingReplay* replay) { routing_replay_ = replay; }

 private:
  // Runs the call, leaving its logits in device memory (a graph's output buffer, or `eager_out`),
  // and times it; the caller downloads what it needs, then calls finish().
  // The device arrays a call leaves its outputs in (a graph's, or the eager call's own).
  struct Results {
    const DeviceArray<float>* logits = nullptr;
    const DeviceArray<float>* streams = nullptr;
  };
  struct EagerResults {
    DeviceArray<float> logits, streams;
  };
  Results run(DeviceSession& s, std::span<const int32_t> ids, CallOutputs outputs, EagerResults& eager);
  void finish(DeviceSession& s, int64_t tokens, CallOutputs outputs);
  // `forced`: the call's experts under routing replay, else null.
  // The ops of a step whose sizes are taken for positions below `end_bound`: the call record kept
  // when asked, routing replay on, the session state allocated up to the bound, then the branch on
  // (so no op on the branch allocates state). Eager and captured steps alike: the same kernels.
  CudaOps step_ops(DeviceSession& s, int64_t end_bound, CallOutputs outputs, bool keep_routing);
  Results run_eager(DeviceSession& s, std::span<const int32_t> ids, CallOutputs outputs, EagerResults& eager,
                    const engine::ForcedRouting* forced);
  Results replay(DeviceSession& s, std::span<const int32_t> ids, CallOutputs outputs,
                 const engine::ForcedRouting* forced);
  std::unique_ptr<StepGraph> capture(DeviceSession& s, std::span<const int32_t> ids, CallOutputs outputs,
                                     const engine::ForcedRouting* forced);
  Tensor call(DeviceSession& s, std::span<const int32_t> ids, CallOutputs outputs, Tensor* streams,
              DeviceArray<float>* device_streams);

  const engine::Model& model_;
  cudaStream_t stream_ = nullptr;
  // Attention's side chain and, inside it, the indexer's compressor push (attention_forward.h).
  std::array<BranchStream, 2> branches_;
  DeviceWeights weights_;
  GraphPolicy graphs_;
  bool warm_ = false;  // an eager call has run: every weight is in device memory, nothing to upload
  cudaEvent_t begin_ = nullptr, end_ = nullptr;
  std::vector<StepTime> step_times_;
  bool last_graph_ = false;  // the call being run is a graph replay
  engine::RoutingReplay* routing_replay_ = nullptr;
};

class CudaRunner : public engine::SessionRunner {
 public:
  explicit CudaRunner(CudaModel& model, KvFormat kv = KvFormat::F32) : model_(model), session_(model.new_session(kv)) {}
  Tensor forward(std::span<const int32_t> ids, engine::Model::Logits logits) override {
    return model_.forward(session_, ids, logits);
  }
  int32_t forward_greedy(std::span<const int32_t> ids) override { return model_.forward_greedy(session_, ids); }

 private:
  CudaModel& model_;
  DeviceSession session_;
};

}  // namespace frank::cuda
