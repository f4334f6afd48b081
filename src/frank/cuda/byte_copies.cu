// copy_bytes (byte_copies.cuh): one block per copy, 4-byte words when both ends and the length
// allow it (every row the rewind moves is a whole number of floats), bytes otherwise.
#include "frank/cuda/byte_copies.cuh"

namespace frank::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) copy_bytes_kernel(const ByteCopy* copies) {
  const ByteCopy c = copies[blockIdx.x];
  const bool words = (reinterpret_cast<uintptr_t>(c.src) | reinterpret_cast<uintptr_t>(c.dst) | c.bytes) % 4 == 0;
  if (words) {
    const auto* src = reinterpret_cast<const uint32_t*>(c.src);
    auto* dst = reinterpret_cast<uint32_t*>(c.dst);
    for (int64_t i = threadIdx.x; i < c.bytes / 4; i += blockDim.x) dst[i] = src[i];
  } else {
    for (int64_t i = threadIdx.x; i < c.bytes; i += blockDim.x) c.dst[i] = c.src[i];
  }
}

}  // namespace

cudaError_t copy_bytes(const ByteCopy* copies, int count, cudaStream_t stream) {
  if (count < 0 || (count > 0 && copies == nullptr)) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  copy_bytes_kernel<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(copies);
  return cudaGetLastError();
}

}  // namespace frank::cuda
