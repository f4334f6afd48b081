#pragma once
// Helpers for the CUDA check tools: stop at the first CUDA error with the call that made it, and
// device buffers that free themselves.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CUDA_OK(expr) ::frank_test::cuda_ok((expr), #expr, __FILE__, __LINE__)

namespace frank_test {

inline void cuda_ok(cudaError_t e, const char* what, const char* file, int line) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, cudaGetErrorString(e));
  std::exit(2);
}

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    CUDA_OK(cudaMalloc(&ptr_, (count ? count : 1) * sizeof(T)));
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return ptr_; }
  size_t size() const { return count_; }

 private:
  T* ptr_ = nullptr;
  size_t count_;
};

// A position in device memory, as the position-taking launchers read it (ops.cuh). at(p) writes p
// (synchronously: after the work already issued on the legacy stream) and returns the pointer.
class DevicePosition {
 public:
  const int64_t* at(int64_t position) {
    CUDA_OK(cudaMemcpy(buffer_.get(), &position, sizeof position, cudaMemcpyHostToDevice));
    return buffer_.get();
  }

 private:
  DeviceBuffer<int64_t> buffer_{1};
};

}  // namespace frank_test
