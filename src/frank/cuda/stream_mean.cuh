#pragma once
// The mean of a token's residual streams (DeepSeek-V4.1 DSpark's target features, dsv41-model.md §8:
// the streams entering a target layer, averaged). Asynchronous on `stream`, no allocation (ops.cuh's
// contract).
#include <cstdint>

#include <cuda_runtime.h>

namespace frank::cuda {

// out[t*ldo + d] = (sum_j streams[t*N*D + j*D + d]) / N for t < n, d < D: fp32 sums in stream order,
// then one division, bit for bit engine::CpuOps::stream_mean. ldo >= D lets the caller write one
// column block of a wider row (one target layer's block of the features).
cudaError_t stream_mean(const float* streams, int64_t n, int N, int D, float* out, int64_t ldo, cudaStream_t stream);

}  // namespace frank::cuda
