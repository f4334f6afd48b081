#pragma once
// DeviceWeights: the model's weights in device memory, uploaded once on first use and found by the
// address of the host weight (so the shared model code passes the same weight structs to every
// backend). Linear weights are stored as fp32 (exactness tests) or rounded to bf16 (serving; round
// to nearest even, as torch's .to(bfloat16)); everything else stays fp32. FP8/FP4 weights are not
// supported on the GPU yet and are refused with a clear error.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "frank/core/linear_weight.h"
#include "frank/core/tensor.h"
#include "frank/cuda/ops.cuh"
#include "frank/engine/rope.h"
#include "frank/model/weights.h"

namespace frank::cuda {

// "fp32" or "bf16"; throws frank::Error for anything else.
WeightType parse_weight_type(const std::string& text);

class DeviceWeights {
 public:
  DeviceWeights(WeightType linear_type, cudaStream_t stream) : linear_type_(linear_type), stream_(stream) {}
  ~DeviceWeights();
  DeviceWeights(const DeviceWeights&) = delete;
  DeviceWeights& operator=(const DeviceWeights&) = delete;

  struct Linear {
    const void* data;
    WeightType type;
    int64_t rows, cols;
    size_t element_bytes() const { return type == WeightType::BF16 ? 2 : 4; }
  };

  const float* tensor(const Tensor& host);
  const Linear& linear(const LinearWeight& host);
  const float* inv_freq(const engine::RopeTable& rope);
  const int32_t* tid2eid(const model::MoeWeights& moe);
  // Device tables of the routed experts' and (at index E) the shared expert's weights.
  const ExpertTables& experts(const model::MoeWeights& moe);

  WeightType linear_type() const { return linear_type_; }
  size_t bytes() const { return bytes_; }

 private:
  void* upload(const void* src, size_t bytes);

  WeightType linear_type_;
  cudaStream_t stream_;
  std::vector<void*> buffers_;
  size_t bytes_ = 0;
  std::unordered_map<const void*, const void*> plain_;
  std::unordered_map<const void*, Linear> linear_;
  std::unordered_map<const void*, ExpertTables> experts_;
};

}  // namespace frank::cuda
