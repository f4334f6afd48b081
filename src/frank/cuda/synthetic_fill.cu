#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "frank/cuda/synthetic_fill.cuh"

namespace frank::cuda {
namespace {

__device__ uint64_t mix(uint64_t z) {  // SplitMix64's finaliser (frank/core/splitmix64.h)
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Uniform on [-sqrt(3), sqrt(3)) * stddev: variance stddev^2.
template <class T>
__global__ void fill_kernel(T* dst, int64_t count, float stddev, uint64_t seed) {
  const float half_width = 1.7320508f * stddev;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t bits = mix(seed ^ mix(static_cast<uint64_t>(i)));
    const float u = static_cast<float>(bits >> 40) * 0x1.0p-24f;  // [0, 1)
    dst[i] = static_cast<T>((2.0f * u - 1.0f) * half_width);
  }
}

// Word i: 16 bits of the hash of (seed, i); as a sign vector, +-magnitude by its lowest bit.
template <bool kSigns>
__global__ void words_kernel(uint16_t* dst, int64_t count, float magnitude, uint64_t seed) {
  const __half plus = __float2half_rn(magnitude), minus = __hneg(plus);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t bits = mix(seed ^ mix(static_cast<uint64_t>(i)));
    dst[i] = kSigns ? __half_as_ushort(bits & 1 ? minus : plus) : static_cast<uint16_t>(bits >> 48);
  }
}

constexpr int kThreads = 256;

int blocks_for(int64_t count) { return static_cast<int>(std::min<int64_t>((count + kThreads - 1) / kThreads, 4096)); }

template <bool kSigns>
cudaError_t fill_words(uint16_t* dst, int64_t count, float magnitude, uint64_t seed, cudaStream_t stream) {
  if (count < 0 || (count > 0 && dst == nullptr)) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  words_kernel<kSigns><<<blocks_for(count), kThreads, 0, stream>>>(dst, count, magnitude, seed);
  return cudaGetLastError();
}

}  // namespace

cudaError_t fill_random_words(uint16_t* dst, int64_t count, uint64_t seed, cudaStream_t stream) {
  return fill_words<false>(dst, count, 0.0f, seed, stream);
}

cudaError_t fill_random_signs(uint16_t* dst, int64_t count, float magnitude, uint64_t seed, cudaStream_t stream) {
  return fill_words<true>(dst, count, magnitude, seed, stream);
}

cudaError_t fill_uniform(void* dst, WeightType type, int64_t count, float stddev, uint64_t seed, cudaStream_t stream) {
  if (count < 0 || (count > 0 && dst == nullptr)) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  if (type == WeightType::F32)
    fill_kernel<<<blocks_for(count), kThreads, 0, stream>>>(static_cast<float*>(dst), count, stddev, seed);
  else
    fill_kernel<<<blocks_for(count), kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), count, stddev, seed);
  return cudaGetLastError();
}

}  // namespace frank::cuda
