#include "frank/cuda/cuda_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "frank/cuda/synthetic_fill.cuh"
#include "frank/engine/decoder_layer.h"

namespace frank::cuda {

static_assert(CudaModel::kGraphTokens <= CpuExperts::kCapturedTokens,
              "a captured split step's hand-overs need the fixed buffers");

cudaStream_t make_stream() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    throw Error("--backend cuda: no CUDA device is available (use --backend cpu)");
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  // Keep freed stream-ordered memory in the pool: every step allocates the same arrays again.
  cudaMemPool_t pool = nullptr;
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
  uint64_t keep = UINT64_MAX;
  check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
  return s;
}

StepGraph::~StepGraph() {
  if (exec != nullptr) cudaGraphExecDestroy(exec);
}

CudaModel::CudaModel(const engine::Model& model, WeightType linear_type, uint64_t synthetic_seed, GraphPolicy graphs)
    : model_(model), stream_(make_stream()), weights_(linear_type, stream_, synthetic_seed), graphs_(graphs) {
  if (graphs_.span < 1) throw Error("CUDA graphs: the span must be at least one position");
  check(cudaEventCreate(&begin_), "cudaEventCreate");
  check(cudaEventCreate(&end_), "cudaEventCreate");
}

CudaModel::~CudaModel() {
  cudaStreamSynchronize(stream_);
  cudaEventDestroy(begin_);
  cudaEventDestroy(end_);
  cudaStreamDestroy(stream_);
}

DeviceSession CudaModel::new_session(KvFormat kv) {
  const model::ModelConfig& c = model_.config();
  DeviceSession s;
  s.position_at = DeviceArray<int64_t>({1}, stream_);
  for (int l = 0; l < c.num_layers; ++l) s.layers.push_back(new_layer_state(c, kv, stream_));
  return s;
}

DeviceSession CudaModel::synthetic_session(int64_t position, int64_t room, uint64_t seed, KvFormat kv) {
  DeviceSession s = new_session(kv);
  s.position = position;
  auto random = [&](std::vector<int64_t> shape) {
    DeviceArray<float> a(std::move(shape), stream_);
    check(fill_uniform(a.data(), WeightType::F32, a.numel(), 1.0f, seed++, stream_), "fill_uniform");
    return a;
  };
  // Random fp32 rows [rows, dim] stored as records of `format`.
  auto random_records = [&](int64_t rows, int dim, KvFormat format) {
    const KvRowLayout l = engine::kv_row_layout(format, dim, model_.config().rope_dim);
    const DeviceArray<float> values = random({rows, dim});
    DeviceArray<uint8_t> records({rows, l.row_bytes}, stream_);
    check(kv_encode(values.data(), static_cast<int>(rows), l, records.data(), stream_), "kv_encode");
    return records;
  };
  auto fill = [&](DeviceCompressor& d, const engine::Compressor& c) {
    d.pending_kv = random({c.ratio(), c.projection_width()});
    d.pending_gate = random({c.ratio(), c.projection_width()});
    if (c.projection_width() == 2 * c.dim()) {
      d.overlap_kv = random({c.ratio(), c.dim()});
      d.overlap_gate = random({c.ratio(), c.dim()});
    }
    d.entries = random_records((position + room) / c.ratio() + 1, c.dim(), d.entry_format);
  };
  for (size_t l = 0; l < s.layers.size(); ++l) {
    const engine::Attention& a = model_.attention()[l];
    s.layers[l].window = random_records(model_.config().sliding_window, model_.config().head_dim, kv);
    if (a.compressor()) fill(s.layers[l].compressor, *a.compressor());
    if (a.index_compressor()) fill(s.layers[l].indexer, *a.index_compressor());
  }
  check(cudaStreamSynchronize(stream_), "synthetic session");
  return s;
}

Tensor CudaModel::forward(DeviceSession& session, std::span<const int32_t> ids, engine::Model::Logits logits,
                         Tensor* streams, DeviceArray<float>* device_streams) {
  const bool any_streams = streams != nullptr || device_streams != nullptr;
  return call(session, ids, {logits == engine::Model::Logits::All, any_streams, false}, streams, device_streams);
}

Tensor CudaModel::verify(DeviceSession& session, std::span<const int32_t> ids, Tensor& streams) {
  return verify(session, ids, &streams, nullptr);
}

Tensor CudaModel::verify(DeviceSession& session, std::span<const int32_t> ids, Tensor* streams,
                         DeviceArray<float>* device_streams) {
  if (std::ssize(ids) > kGraphTokens)
    throw Error(fmt::format("CUDA verify step of {} tokens: at most {} are recorded", ids.size(), kGraphTokens));
  return call(session, ids, {true, true, true}, streams, device_streams);
}

Tensor CudaModel::call(DeviceSession& session, std::span<const int32_t> ids, CallOutputs outputs, Tensor* streams,
                       DeviceArray<float>* device_streams) {
  model_.check_call(session.position, ids);
  const auto n = static_cast<int64_t>(ids.size());
  const int64_t width = int64_t{model_.config().hc_mult} * model_.config().hidden_size;
  if (n == 0) {
    if (streams != nullptr) *streams = Tensor({0, width});
    if (device_streams != nullptr) *device_streams = DeviceArray<float>({0, width}, stream_);
    return Tensor({0, model_.config().vocab_size});
  }
  EagerResults eager;
  const Results out = run(session, ids, outputs, eager);
  Tensor host(out.logits->shape());
  out.logits->copy_to_host(host.data.data());
  if (streams != nullptr) {
    *streams = Tensor(out.streams->shape());
    out.streams->copy_to_host(streams->data.data());
  }
  // A copy in stream order: a graph's output buffer is overwritten by its next replay.
  if (device_streams != nullptr) *device_streams = *out.streams;
  finish(session, n, outputs);
  return host;
}

int32_t CudaModel::forward_greedy(DeviceSession& session, std::span<const int32_t> ids) {
  model_.check_call(session.position, ids);
  if (ids.empty()) throw Error("a greedy step needs at least one token");
  EagerResults eager;
  const Results out = run(session, ids, {}, eager);
  DeviceArray<int32_t> token({1}, stream_);
  check(argmax_rows(out.logits->data(), 1, out.logits->cols(), token.data(), stream_), "argmax_rows");
  int32_t host = 0;
  token.copy_to_host(&host);
  finish(session, static_cast<int64_t>(ids.size()), {});
  return host;
}

CudaModel::Results CudaModel::run(DeviceSession& s, std::span<const int32_t> ids, CallOutputs outputs,
                                  EagerResults& eager) {
  // A call that goes past a graph's bound may grow the state the graph points at (entries): the
  // graph is dropped. (Without rewinds no later call could replay it anyway.)
  std::erase_if(s.graphs, [&](const auto& g) { return s.position + std::ssize(ids) > g->end_bound; });
  last_graph_ = graphs_.enabled && warm_ && std::ssize(ids) <= kGraphTokens;
  // The GPU cache's copies (expert_cache_slots.h) come from outside the graph: the stream waits for
  // them before it, not at the step's first split layer as an eager step does.
  if (last_graph_) weights_.wait_for_expert_copies();
  s.position_at.copy_from_host(&s.position);
  engine::ForcedRouting forced;
  if (routing_replay_ != nullptr) forced = routing_replay_->take(std::ssize(ids));
  const engine::ForcedRouting* forcing = routing_replay_ != nullptr ? &forced : nullptr;
  const Results out = last_graph_ ? replay(s, ids, outputs, forcing) : run_eager(s, ids, outputs, eager, forcing);
  weights_.end_step();  // the GPU expert cache sees the step's routings (expert_cache_slots.h)
  check(cudaEventRecord(end_, stream_), "cudaEventRecord");
  return out;
}

// After the caller's download: waits for the stream, records the call's time, advances the session.
void CudaModel::finish(DeviceSession& s, int64_t tokens, CallOutputs outputs) {
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, begin_, end_), "cudaEventElapsedTime");
  step_times_.push_back({tokens, last_graph_, ms});
  warm_ = true;
  s.recorded_from = outputs.record ? s.position : -1;
  s.records += outputs.record ? 1 : 0;
  s.position += tokens;
}

CudaOps CudaModel::step_ops(DeviceSession& s, int64_t end_bound, CallOutputs outputs, bool keep_routing) {
  CudaOps ops(weights_, stream_, {s.position_at.data(), end_bound}, nullptr, keep_routing);
  if (outputs.record) ops.record_calls(kGraphTokens);
  ops.replay_routing(model_.weights());
  for (size_t l = 0; l < s.layers.size(); ++l) ops.prepare(s.layers[l], model_.attention()[l]);
  ops.set_branches(branches_);
  return ops;
}

CudaModel::Results CudaModel::run_eager(DeviceSession& s, std::span<const int32_t> ids, CallOutputs outputs,
                                        EagerResults& eager, const engine::ForcedRouting* forced) {
  const auto n = static_cast<int64_t>(ids.size());
  CudaOps ops = step_ops(s, s.position + n, outputs, /*keep_routing=*/true);
  check(cudaEventRecord(begin_, stream_), "cudaEventRecord");
  const CudaOps::Ids device_ids = ops.upload_ids(ids, forced);
  eager.logits = engine::model_forward(ops, model_.config(), model_.weights(), model_.attention(), s.layers,
                                       s.position, device_ids, outputs.all_logits ? 0 : n - 1,
                                       outputs.streams ? &eager.streams : nullptr);
  return {&eager.logits, &eager.streams};
}

CudaModel::Results CudaModel::replay(DeviceSession& s, std::span<const int32_t> ids, CallOutputs outputs,
                                     const engine::ForcedRouting* forced) {
  const auto n = static_cast<int64_t>(ids.size());
  const bool forcing = forced != nullptr;
  auto same_kind = [&](const auto& g) { return g->tokens == n && g->outputs == outputs && g->forced_routing == forcing; };
  auto it = std::find_if(s.graphs.begin(), s.graphs.end(),
                         [&](const auto& g) { return same_kind(g) && s.position + n <= g->end_bound; });
  if (it == s.graphs.end()) {
    std::erase_if(s.graphs, same_kind);
    s.graphs.push_back(capture(s, ids, outputs, forced));
    it = s.graphs.end() - 1;
  }
  StepGraph& g = **it;
  check(cudaEventRecord(begin_, stream_), "cudaEventRecord");  // after a capture: its host time is not the step's
  g.ids.device.copy_from_host(ids.data());
  if (forcing) g.ids.forced_experts.copy_from_host(forced->experts.data());
  check(cudaGraphLaunch(g.exec, stream_), "cudaGraphLaunch");
  if (g.hand_overs > 0) weights_.cpu_experts()->expect(g.hand_overs);  // the host's worker serves its split layers
  return {&g.logits, &g.streams};
}

std::unique_ptr<StepGraph> CudaModel::capture(DeviceSession& s, std::span<const int32_t> ids, CallOutputs outputs,
                                              const engine::ForcedRouting* forced) {
  const auto n = static_cast<int64_t>(ids.size());
  const model::ModelConfig& c = model_.config();
  auto g = std::make_unique<StepGraph>();
  g->tokens = n;
  g->outputs = outputs;
  g->forced_routing = forced != nullptr;
  g->end_bound = ((s.position + n) / graphs_.span + 1) * graphs_.span;
  // Routing is not kept: last_experts would be memory the graph allocates and does not free.
  // Everything the graph's nodes point at exists before the capture: session state up to the
  // bound and the call record (step_ops), the input ids (and forced experts) and the outputs.
  CudaOps ops = step_ops(s, g->end_bound, outputs, /*keep_routing=*/false);
  g->ids = ops.upload_ids(ids, forced);
  g->logits = DeviceArray<float>({outputs.all_logits ? n : 1, c.vocab_size}, stream_);
  if (outputs.streams) g->streams = DeviceArray<float>({n, int64_t{c.hc_mult} * c.hidden_size}, stream_);

  CpuExperts* cpu = weights_.cpu_experts();
  const int64_t hand_overs = cpu != nullptr ? cpu->captured() : 0;
  check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  try {
    CudaOps::Array streams;
    const CudaOps::Array out =
        engine::model_forward(ops, c, model_.weights(), model_.attention(), s.layers, s.position, g->ids,
                              outputs.all_logits ? 0 : n - 1, outputs.streams ? &streams : nullptr);
    check(cudaMemcpyAsync(g->logits.data(), out.data(), out.bytes(), cudaMemcpyDeviceToDevice, stream_),
          "copy logits");
    if (outputs.streams)
      check(cudaMemcpyAsync(g->streams.data(), streams.data(), streams.bytes(), cudaMemcpyDeviceToDevice, stream_),
            "copy streams");
  } catch (...) {
    // End the capture (dropping what was recorded) so the stream can be used again.
    if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
  g->hand_overs = cpu != nullptr ? cpu->captured() - hand_overs : 0;
  // Node priorities: the branch stream's kernels keep theirs (branch_stream.h).
  const cudaError_t made = cudaGraphInstantiate(&g->exec, graph, cudaGraphInstantiateFlagUseNodePriority);
  cudaGraphDestroy(graph);
  check(made, "cudaGraphInstantiate");
  return g;
}

}  // namespace frank::cuda
