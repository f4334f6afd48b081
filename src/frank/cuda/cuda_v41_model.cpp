#include "frank/cuda/cuda_v41_model.h"

#include "frank/core/error.h"
#include "frank/cuda/stream_mean.cuh"
#include "frank/engine/v41_decoder_layer.h"

namespace frank::cuda {

CudaV41Model::CudaV41Model(const engine::V41Model& model, WeightType linear_type)
    : model_(model), stream_(make_stream()), weights_(linear_type, stream_) {
  check(cudaEventCreate(&begin_), "cudaEventCreate");
  check(cudaEventCreate(&end_), "cudaEventCreate");
}

CudaV41Model::~CudaV41Model() {
  cudaStreamSynchronize(stream_);
  cudaEventDestroy(begin_);
  cudaEventDestroy(end_);
  cudaStreamDestroy(stream_);
}

DeviceV41Session CudaV41Model::new_session() {
  const model::V41Config& c = model_.config();
  DeviceV41Session s;
  s.position_at = DeviceArray<int64_t>({1}, stream_);
  for (int l = 0; l < c.num_layers; ++l) {
    s.windows.emplace_back(std::vector<int64_t>{c.sliding_window, c.head_dim}, stream_);
    s.windows.back().fill_bytes(0);  // as the CPU session's rings start
  }
  s.sources.resize(c.num_layers);
  for (int l : c.kv_source_layers) s.sources[l].emplace().ratio = c.compress_ratio[l];
  if (!c.engram.layer_ids.empty()) s.engram = engine::engram_fresh_history(model_.engram());
  return s;
}

Tensor CudaV41Model::forward(DeviceV41Session& s, std::span<const int32_t> ids, engine::Model::Logits logits,
                             DeviceArray<float>* features) {
  const model::V41Config& c = model_.config();
  engine::check_call(c, s.position, ids);
  if (s.windows.size() != static_cast<size_t>(c.num_layers)) throw Error("session was made for a different model");
  if (features != nullptr && !c.dspark) throw Error("the model has no DSpark drafter to read features for");
  const auto n = static_cast<int64_t>(ids.size());
  s.position_at.copy_from_host(&s.position);
  CudaV41Ops ops(weights_, stream_, {s.position_at.data(), s.position + n});
  ops.set_fused_candidates(fused_candidates_);
  ops.set_mhc_overlap(mhc_overlap_ ? &side_ : nullptr);
  ops.set_call_record_limit(c.sliding_window);  // a longer call cannot be rewound
  check(cudaEventRecord(begin_, stream_), "cudaEventRecord");
  const CudaOps::Ids device_ids = ops.upload_ids(ids);
  const int64_t D = c.hidden_size;
  if (features != nullptr)
    *features = DeviceArray<float>({n, D * static_cast<int64_t>(c.dspark->target_layers.size())}, stream_);
  // Each target layer's stream mean goes to its column block of the features (V41Model::forward's tap).
  auto tap = [&](int layer, const DeviceArray<float>& streams) {
    if (features == nullptr) return;
    const auto& targets = c.dspark->target_layers;
    for (size_t k = 0; k < targets.size(); ++k)
      if (targets[k] == layer)
        check(stream_mean(streams.data(), n, c.hc_mult, c.hidden_size, features->data() + static_cast<int64_t>(k) * D,
                          features->cols(), stream_),
              "stream_mean");
  };
  const DeviceArray<float> out =
      engine::v41_model_forward(ops, c, model_.weights(), model_.engram(), model_.ropes(), s, device_ids, s.position,
                                logits == engine::Model::Logits::Last ? n - 1 : 0, tap);
  check(cudaEventRecord(end_, stream_), "cudaEventRecord");
  Tensor host = ops.download(out);  // waits for the stream
  float ms = 0;
  check(cudaEventElapsedTime(&ms, begin_, end_), "cudaEventElapsedTime");
  step_times_.push_back({n, false, ms});
  s.position += n;
  return host;
}

}  // namespace frank::cuda
