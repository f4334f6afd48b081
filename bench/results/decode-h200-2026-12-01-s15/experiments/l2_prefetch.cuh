#pragma once
// Asks the L2 for byte ranges of device memory (weights a later kernel of the step will read), so
// that their reads from device memory overlap a stretch of latency-bound kernels instead of
// following it. A hint only: no result depends on it.
#include <cuda_runtime.h>

#include <cstddef>

namespace frank::cuda {

inline constexpr int kMaxPrefetchRanges = 8;

struct PrefetchRanges {
  const void* begin[kMaxPrefetchRanges] = {};
  size_t bytes[kMaxPrefetchRanges] = {};
  int count = 0;
};

// One small launch that hands the copy engine the ranges' 16-byte-aligned parts (sm_90 and up;
// elsewhere it does nothing).
cudaError_t l2_prefetch(const PrefetchRanges& ranges, cudaStream_t stream);

}  // namespace frank::cuda
