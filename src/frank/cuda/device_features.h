#pragma once
// DeviceFeatureSource: where a GPU drafter reads the target features of the target's last forward
// or verify call without a download — for V4.1's DSpark drafter (dsv41-model.md §8), the mean of the
// streams entering the target's last layers, [tokens, n_targets * hidden], one row per token of the
// call from position last_features_start(). The V4.1 CUDA verify target implements it; a rewind of
// the call keeps the first rows valid.
#include <cstdint>

#include "frank/cuda/device_array.h"

namespace frank::cuda {

class DeviceFeatureSource {
 public:
  virtual ~DeviceFeatureSource() = default;
  virtual const DeviceArray<float>& device_features() const = 0;
  virtual int64_t last_features_start() const = 0;
};

}  // namespace frank::cuda
