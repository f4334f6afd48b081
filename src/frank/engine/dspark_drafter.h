#pragma once
// Drafting with V4.1's DSpark drafter (dspark.h) over the CPU reference target (CpuV41VerifyTarget
// made with_features): BasicDSparkDrafter's bookkeeping (basic_dspark_drafter.h) on host Tensors.
#include <cstdint>

#include "frank/engine/basic_dspark_drafter.h"
#include "frank/engine/dspark.h"
#include "frank/engine/v41_verify_target.h"

namespace frank::engine {

struct CpuDSparkBackend {
  using Model = const V41Model;
  using DSpark = engine::DSpark;
  using State = DSparkState;
  using Features = Tensor;
  using Target = CpuV41VerifyTarget;
  static const Tensor& features(const CpuV41VerifyTarget& target) { return target.last_features(); }
  static Tensor first_rows(const DSpark& dspark, const Tensor& x, int64_t n);
};

// `target` must have been made with_features and outlive the drafter.
using DSparkDrafter = BasicDSparkDrafter<CpuDSparkBackend>;

}  // namespace frank::engine
