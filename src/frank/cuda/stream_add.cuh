#pragma once
// Adding one row to every residual stream of a token (the MTP block's input, engine/mtp_forward.h:
// the projected embedding of the next token goes onto each projected main stream). Asynchronous
// on `stream`, no allocation (ops.cuh's contract).
#include <cstdint>

#include <cuda_runtime.h>

namespace frank::cuda {

// streams[t*N*D + j*D + d] += x[t*D + d] for t < n, j < N, d < D (fp32, one rounding each:
// engine::CpuOps::add_to_streams).
cudaError_t add_to_streams(float* streams, const float* x, int64_t n, int N, int D, cudaStream_t stream);

}  // namespace frank::cuda
