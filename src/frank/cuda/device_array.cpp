#include "frank/cuda/device_array.h"

#include <fmt/format.h>

#include <cstdio>

namespace frank::cuda {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // a failed call is also the runtime's "last error": clear it, or the next launch reports it
  throw Error(fmt::format("CUDA: {}: {}", what, cudaGetErrorString(e)));
}

void report_failed_free(cudaError_t e, const void* ptr, size_t bytes) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  std::fprintf(stderr, "warning: CUDA: freeing %zu bytes at %p failed: %s\n", bytes, ptr, cudaGetErrorString(e));
}

}  // namespace frank::cuda
