#include "frank/cuda/op_profile.h"

#include <algorithm>

#include "frank/cuda/device_array.h"

namespace frank::cuda {

OpProfile::~OpProfile() { clear(); }

void OpProfile::clear() {
  for (auto& r : records_) {
    cudaEventDestroy(r.start);
    cudaEventDestroy(r.stop);
  }
  records_.clear();
}

void OpProfile::begin(const std::string& name, cudaStream_t stream) {
  if (depth_++ > 0) return;
  Record r{name, nullptr, nullptr};
  check(cudaEventCreate(&r.start), "cudaEventCreate");
  check(cudaEventCreate(&r.stop), "cudaEventCreate");
  check(cudaEventRecord(r.start, stream), "cudaEventRecord");
  records_.push_back(r);
}

void OpProfile::end(cudaStream_t stream) {
  if (--depth_ > 0) return;
  check(cudaEventRecord(records_.back().stop, stream), "cudaEventRecord");
}

std::vector<OpProfile::Total> OpProfile::totals() const {
  std::vector<Total> out;
  for (const auto& r : records_) {
    check(cudaEventSynchronize(r.stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, r.start, r.stop), "cudaEventElapsedTime");
    auto it = std::find_if(out.begin(), out.end(), [&](const Total& t) { return t.name == r.name; });
    if (it == out.end()) it = out.insert(out.end(), Total{r.name});
    it->us += ms * 1e3;
    ++it->calls;
  }
  return out;
}

}  // namespace frank::cuda
