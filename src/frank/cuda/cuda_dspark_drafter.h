#pragma once
// Drafting with V4.1's DSpark drafter on the GPU (CudaDSpark) over a target that leaves its last
// call's features in device memory (DeviceFeatureSource: the V4.1 CUDA verify target), with the
// CPU drafter's bookkeeping (engine::BasicDSparkDrafter): observe only the kept rows, rewind_to
// restores the rings and re-observes the still-kept rows, propose at the anchor. Nothing but the
// drafted ids crosses to the host; the features are read where the target left them, on the
// CudaV41Model's stream, which the target must issue its calls on too.
#include <cstdint>

#include "frank/cuda/cuda_dspark.h"
#include "frank/cuda/device_features.h"
#include "frank/engine/basic_dspark_drafter.h"

namespace frank::cuda {

struct CudaDSparkBackend {
  using Model = CudaV41Model;
  using DSpark = CudaDSpark;
  using State = DeviceDSparkState;
  using Features = DeviceArray<float>;
  using Target = DeviceFeatureSource;
  static const DeviceArray<float>& features(const DeviceFeatureSource& target) { return target.device_features(); }
  static DeviceArray<float> first_rows(const CudaDSpark& dspark, const DeviceArray<float>& x, int64_t n) {
    return dspark.first_rows(x, n);
  }
};

// `target` must outlive the drafter.
using CudaDSparkDrafter = engine::BasicDSparkDrafter<CudaDSparkBackend>;

}  // namespace frank::cuda
