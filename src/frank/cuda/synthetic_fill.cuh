#pragma once
// Random weights made directly in device memory (synthetic models at real sizes: no host copy,
// no checkpoint). Value i is a uniform deviate of standard deviation `stddev` from a hash of
// (seed, i), so the same seed gives the same weights on every GPU.
#include <cstdint>

#include <cuda_runtime.h>

#include "frank/cuda/ops.cuh"

namespace frank::cuda {

cudaError_t fill_uniform(void* dst, WeightType type, int64_t count, float stddev, uint64_t seed, cudaStream_t stream);

// EXL3 parts (exl3_gemv.h): `count` uniform random uint16 words (any word is a valid trellis word),
// or fp16 values +-magnitude with random signs (sign vectors suh, svh).
cudaError_t fill_random_words(uint16_t* dst, int64_t count, uint64_t seed, cudaStream_t stream);
cudaError_t fill_random_signs(uint16_t* dst, int64_t count, float magnitude, uint64_t seed, cudaStream_t stream);

}  // namespace frank::cuda
