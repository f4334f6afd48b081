#include "frank/cuda/cuda_model.h"

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

CudaModel::CudaModel(const engine::Model& model, WeightType linear_type, uint64_t synthetic_seed)
    : model_(model), stream_(make_stream()), weights_(linear_type, stream_, synthetic_seed) {}

CudaModel::~CudaModel() {
  cudaStreamSynchronize(stream_);
  cudaStreamDestroy(stream_);
}

DeviceSession CudaModel::new_session() {
  const model::ModelConfig& c = model_.config();
  DeviceSession s;
  s.layers.resize(static_cast<size_t>(c.num_layers));
  for (auto& layer : s.layers) {
    layer.window = DeviceArray<float>({c.sliding_window, c.head_dim}, stream_);
    layer.window.fill_bytes(0);
  }
  return s;
}

DeviceSession CudaModel::synthetic_session(int64_t position, int64_t room, uint64_t seed) {
  DeviceSession s = new_session();
  s.position = position;
  auto random = [&](std::vector<int64_t> shape) {
    DeviceArray<float> a(std::move(shape), stream_);
    check(fill_uniform(a.data(), WeightType::F32, a.numel(), 1.0f, seed++, stream_), "fill_uniform");
    return a;
  };
  auto fill = [&](DeviceCompressor& d, const engine::Compressor& c) {
    d.pending_kv = random({c.ratio(), c.projection_width()});
    d.pending_gate = random({c.ratio(), c.projection_width()});
    if (c.projection_width() == 2 * c.dim()) {
      d.overlap_kv = random({c.ratio(), c.dim()});
      d.overlap_gate = random({c.ratio(), c.dim()});
    }
    d.entries = random({(position + room) / c.ratio() + 1, c.dim()});
  };
  for (size_t l = 0; l < s.layers.size(); ++l) {
    const engine::Attention& a = model_.attention()[l];
    s.layers[l].window = random({model_.config().sliding_window, model_.config().head_dim});
    if (a.compressor()) fill(s.layers[l].compressor, *a.compressor());
    if (a.index_compressor()) fill(s.layers[l].indexer, *a.index_compressor());
  }
  check(cudaStreamSynchronize(stream_), "synthetic session");
  return s;
}

Tensor CudaModel::forward(DeviceSession& session, std::span<const int32_t> ids, engine::Model::Logits logits) {
  model_.check_call(session.position, ids);
  if (ids.empty()) return Tensor({0, model_.config().vocab_size});
  CudaOps ops(weights_, stream_);
  const CudaOps::Ids device_ids = ops.upload_ids(ids);
  const int64_t n = static_cast<int64_t>(ids.size());
  const CudaOps::Array out =
      engine::model_forward(ops, model_.config(), model_.weights(), model_.attention(), session.layers,
                            session.position, device_ids, logits == engine::Model::Logits::Last ? n - 1 : 0,
                            static_cast<CudaOps::Array*>(nullptr));
  Tensor host = ops.download(out);
  session.position += n;
  return host;
}

}  // namespace frank::cuda
