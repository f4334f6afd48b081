// l2_prefetch (l2_prefetch.cuh): cp.async.bulk.prefetch.L2 in 64 KB pieces, spread over a warp.
#include <cstdint>

#include "frank/cuda/l2_prefetch.cuh"

namespace frank::cuda {
namespace {

constexpr uint32_t kPiece = 64 * 1024;

__global__ void l2_prefetch_kernel(PrefetchRanges r) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  for (int i = 0; i < r.count; ++i) {
    const auto p = reinterpret_cast<uintptr_t>(r.begin[i]);
    const uintptr_t a0 = (p + 15) / 16 * 16, a1 = (p + r.bytes[i]) / 16 * 16;
    for (uintptr_t q = a0 + uintptr_t{kPiece} * threadIdx.x; q < a1; q += uintptr_t{kPiece} * blockDim.x) {
      const uint32_t bytes = static_cast<uint32_t>(a1 - q < kPiece ? a1 - q : kPiece);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(q), "r"(bytes) : "memory");
    }
  }
#endif
}

}  // namespace

cudaError_t l2_prefetch(const PrefetchRanges& ranges, cudaStream_t stream) {
  if (ranges.count == 0) return cudaSuccess;
  l2_prefetch_kernel<<<1, 32, 0, stream>>>(ranges);
  return cudaGetLastError();
}

}  // namespace frank::cuda
