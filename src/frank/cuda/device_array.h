#pragma once
// DeviceArray: a shaped array in device memory, allocated and freed in the order of one CUDA
// stream (cudaMallocAsync / cudaFreeAsync: no device-wide synchronisation, and capturable in a
// graph). Copies are deep and stream-ordered too. CUDA errors become frank::Error.
#include <cuda_runtime.h>

#include <algorithm>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "frank/core/error.h"
#include "frank/core/tensor.h"

namespace frank::cuda {

// Throws frank::Error naming `what` when e is not cudaSuccess.
void check(cudaError_t e, const char* what);
// A destructor cannot throw: a failed free is printed to stderr (and cleared, so the next launch
// does not report it as its own).
void report_failed_free(cudaError_t e, const void* ptr, size_t bytes);

template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(std::vector<int64_t> shape, cudaStream_t stream) : shape_(std::move(shape)), stream_(stream) {
    if (numel() > 0) check(cudaMallocAsync(reinterpret_cast<void**>(&ptr_), bytes(), stream_), "cudaMallocAsync");
  }
  DeviceArray(const DeviceArray& o) : DeviceArray(o.shape_, o.stream_) { copy_from_device(o); }
  DeviceArray& operator=(const DeviceArray& o) {
    if (this != &o) {
      DeviceArray copy(o);
      swap(copy);
    }
    return *this;
  }
  DeviceArray(DeviceArray&& o) noexcept { swap(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    DeviceArray moved(std::move(o));
    swap(moved);
    return *this;
  }
  ~DeviceArray() {
    if (ptr_ != nullptr) report_failed_free(cudaFreeAsync(ptr_, stream_), ptr_, bytes());
  }

  void swap(DeviceArray& o) noexcept {
    std::swap(shape_, o.shape_);
    std::swap(ptr_, o.ptr_);
    std::swap(stream_, o.stream_);
  }

  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const { return shape_.empty() ? 0 : Tensor::count(shape_); }
  int64_t rows() const { return shape_.empty() ? 0 : shape_.front(); }
  int64_t cols() const { return shape_.empty() || rows() == 0 ? 0 : numel() / rows(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * sizeof(T); }
  bool empty() const { return numel() == 0; }
  cudaStream_t stream() const { return stream_; }
  // Frees on `stream` from now on: only where `stream` is ordered after every use on the old one
  // (a branch's array handed back after the branch joined it: CudaOps::concurrently).
  void follow_stream(cudaStream_t stream) { stream_ = stream; }

  void copy_from_host(const T* src) {
    if (!empty()) check(cudaMemcpyAsync(ptr_, src, bytes(), cudaMemcpyHostToDevice, stream_), "upload");
  }
  void copy_to_host(T* dst) const {
    if (!empty()) check(cudaMemcpyAsync(dst, ptr_, bytes(), cudaMemcpyDeviceToHost, stream_), "download");
  }
  void copy_from_device(const DeviceArray& o) {
    if (!empty()) check(cudaMemcpyAsync(ptr_, o.ptr_, bytes(), cudaMemcpyDeviceToDevice, stream_), "device copy");
  }
  // All bytes to `byte` (0xff gives -1 in every int32).
  void fill_bytes(int byte) {
    if (!empty()) check(cudaMemsetAsync(ptr_, byte, bytes(), stream_), "cudaMemsetAsync");
  }

 private:
  std::vector<int64_t> shape_;
  T* ptr_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// Grows `a` to at least `rows` rows of `cols`, keeping its contents (doubling, so state that grows
// with a session, such as compressed entries, is copied O(log n) times), stream-ordered.
template <class T>
void reserve_rows(DeviceArray<T>& a, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (a.rows() >= rows && !a.empty()) return;
  DeviceArray<T> bigger({std::max<int64_t>({rows, 2 * a.rows(), 1}), cols}, stream);
  if (!a.empty())
    check(cudaMemcpyAsync(bigger.data(), a.data(), a.bytes(), cudaMemcpyDeviceToDevice, stream), "grow rows");
  a = std::move(bigger);
}

}  // namespace frank::cuda
