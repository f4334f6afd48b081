#include "frank/cuda/cuda_model.h"

#include <algorithm>

#include "frank/cuda/synthetic_fill.cuh"
#include "frank/engine/decoder_layer.h"

namespace frank::cuda {
namespace {

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

}  // namespace

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
  s.layers.resize(static_cast<size_t>(c.num_layers));
  for (auto& layer : s.layers) {
    layer.kv = kv_layout(c, kv);
    layer.compressor.entry_format = kv;
    layer.window = DeviceArray<uint8_t>({c.sliding_window, layer.kv.row_bytes}, stream_);
    layer.window.fill_bytes(0);
  }
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

Tensor CudaModel::forward(DeviceSession& session, std::span<const int32_t> ids, engine::Model::Logits logits) {
  model_.check_call(session.position, ids);
  const auto n = static_cast<int64_t>(ids.size());
  if (n == 0) return Tensor({0, model_.config().vocab_size});
  DeviceArray<float> eager_out;
  const DeviceArray<float>& out = run(session, ids, logits == engine::Model::Logits::All, eager_out);
  Tensor host(out.shape());
  out.copy_to_host(host.data.data());
  finish(session, n);
  return host;
}

int32_t CudaModel::forward_greedy(DeviceSession& session, std::span<const int32_t> ids) {
  model_.check_call(session.position, ids);
  if (ids.empty()) throw Error("a greedy step needs at least one token");
  DeviceArray<float> eager_out;
  const DeviceArray<float>& out = run(session, ids, /*all_logits=*/false, eager_out);
  DeviceArray<int32_t> token({1}, stream_);
  check(argmax_rows(out.data(), 1, out.cols(), token.data(), stream_), "argmax_rows");
  int32_t host = 0;
  token.copy_to_host(&host);
  finish(session, static_cast<int64_t>(ids.size()));
  return host;
}

const DeviceArray<float>& CudaModel::run(DeviceSession& s, std::span<const int32_t> ids, bool all_logits,
                                         DeviceArray<float>& eager_out) {
  last_graph_ = graphs_.enabled && warm_ && std::ssize(ids) <= kGraphTokens;
  s.position_at.copy_from_host(&s.position);
  const DeviceArray<float>& out = last_graph_ ? replay(s, ids, all_logits) : run_eager(s, ids, all_logits, eager_out);
  check(cudaEventRecord(end_, stream_), "cudaEventRecord");
  return out;
}

// After the caller's download: waits for the stream, records the call's time, advances the session.
void CudaModel::finish(DeviceSession& s, int64_t tokens) {
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, begin_, end_), "cudaEventElapsedTime");
  step_times_.push_back({tokens, last_graph_, ms});
  warm_ = true;
  s.position += tokens;
}

const DeviceArray<float>& CudaModel::run_eager(DeviceSession& s, std::span<const int32_t> ids, bool all_logits,
                                               DeviceArray<float>& eager_out) {
  const auto n = static_cast<int64_t>(ids.size());
  CudaOps ops(weights_, stream_, {s.position_at.data(), s.position + n});
  check(cudaEventRecord(begin_, stream_), "cudaEventRecord");
  const CudaOps::Ids device_ids = ops.upload_ids(ids);
  eager_out = engine::model_forward(ops, model_.config(), model_.weights(), model_.attention(), s.layers, s.position,
                                    device_ids, all_logits ? 0 : n - 1, static_cast<CudaOps::Array*>(nullptr));
  return eager_out;
}

const DeviceArray<float>& CudaModel::replay(DeviceSession& s, std::span<const int32_t> ids, bool all_logits) {
  const auto n = static_cast<int64_t>(ids.size());
  auto it = std::find_if(s.graphs.begin(), s.graphs.end(), [&](const auto& g) {
    return g->tokens == n && g->all_logits == all_logits && s.position + n <= g->end_bound;
  });
  if (it == s.graphs.end()) {
    std::erase_if(s.graphs, [&](const auto& g) { return g->tokens == n && g->all_logits == all_logits; });
    s.graphs.push_back(capture(s, ids, all_logits));
    it = s.graphs.end() - 1;
  }
  StepGraph& g = **it;
  check(cudaEventRecord(begin_, stream_), "cudaEventRecord");  // after a capture: its host time is not the step's
  g.ids.device.copy_from_host(ids.data());
  check(cudaGraphLaunch(g.exec, stream_), "cudaGraphLaunch");
  return g.logits;
}

std::unique_ptr<StepGraph> CudaModel::capture(DeviceSession& s, std::span<const int32_t> ids, bool all_logits) {
  const auto n = static_cast<int64_t>(ids.size());
  auto g = std::make_unique<StepGraph>();
  g->tokens = n;
  g->all_logits = all_logits;
  g->end_bound = ((s.position + n) / graphs_.span + 1) * graphs_.span;
  // Routing is not kept: last_experts would be memory the graph allocates and does not free.
  CudaOps ops(weights_, stream_, {s.position_at.data(), g->end_bound}, nullptr, /*keep_routing=*/false);
  // Everything the graph's nodes point at exists before the capture: session state up to the
  // bound, the input ids and the output logits.
  for (size_t l = 0; l < s.layers.size(); ++l) ops.prepare(s.layers[l], model_.attention()[l]);
  g->ids = ops.upload_ids(ids);
  g->logits = DeviceArray<float>({all_logits ? n : 1, model_.config().vocab_size}, stream_);

  check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  try {
    const CudaOps::Array out =
        engine::model_forward(ops, model_.config(), model_.weights(), model_.attention(), s.layers, s.position, g->ids,
                              all_logits ? 0 : n - 1, static_cast<CudaOps::Array*>(nullptr));
    check(cudaMemcpyAsync(g->logits.data(), out.data(), out.bytes(), cudaMemcpyDeviceToDevice, stream_),
          "copy logits");
  } catch (...) {
    // End the capture (dropping what was recorded) so the stream can be used again.
    if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
  const cudaError_t made = cudaGraphInstantiate(&g->exec, graph, 0);
  cudaGraphDestroy(graph);
  check(made, "cudaGraphInstantiate");
  return g;
}

}  // namespace frank::cuda
