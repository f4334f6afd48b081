#pragma once
// Host helpers the op-check files share: random data, device copies, NaN poison, and one place to
// wait for an op.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda_util.h"
#include "frank/core/splitmix64.h"

namespace frank_test {

class Random {
 public:
  explicit Random(uint64_t seed) : gen_(seed) {}
  float uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(gen_() >> 40) * 0x1p-24f; }
  std::vector<float> vec(size_t count, float lo, float hi) {
    std::vector<float> v(count);
    for (float& x : v) x = uniform(lo, hi);
    return v;
  }
  uint64_t next() { return gen_(); }
  frank::SplitMix64& gen() { return gen_; }

 private:
  frank::SplitMix64 gen_;
};

template <class T>
void upload(DeviceBuffer<T>& d, const std::vector<T>& h) {
  CUDA_OK(cudaMemcpy(d.get(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}

inline std::vector<float> download(const DeviceBuffer<float>& d) {
  std::vector<float> h(d.size());
  CUDA_OK(cudaMemcpy(h.data(), d.get(), h.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

// All bits set: a NaN, so an element a kernel fails to write fails the check.
inline void poison(DeviceBuffer<float>& d) { CUDA_OK(cudaMemset(d.get(), 0xff, d.size() * sizeof(float))); }

// Waits for the op and stops at a launch or execution error.
inline void finish(cudaError_t launched) {
  CUDA_OK(launched);
  CUDA_OK(cudaDeviceSynchronize());
}

template <class... Args>
std::string format(const char* f, Args... args) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

}  // namespace frank_test
