#pragma once
// OpProfile: the GPU time of each op of eagerly issued steps, for "where does the step's time go"
// (`frank bench decode --per-op`). An event pair is recorded around every outermost op (an op that
// calls another, like moe calling linear, is timed as one); totals are summed per op name.
#include <cuda_runtime.h>

#include <string>
#include <utility>
#include <vector>

namespace frank::cuda {

class OpProfile {
 public:
  OpProfile() = default;
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;
  ~OpProfile();

  void begin(const std::string& name, cudaStream_t stream);
  void end(cudaStream_t stream);
  // Microseconds per op name, in first-seen order, and calls; waits for the recorded events.
  struct Total {
    std::string name;
    double us = 0;
    int calls = 0;
  };
  std::vector<Total> totals() const;
  void clear();

 private:
  struct Record {
    std::string name;
    cudaEvent_t start, stop;
  };
  std::vector<Record> records_;
  int depth_ = 0;
};

// Times the enclosing scope as one op when a profile is attached.
class ScopedOp {
 public:
  ScopedOp(OpProfile* profile, const std::string& name, cudaStream_t stream) : profile_(profile), stream_(stream) {
    if (profile_ != nullptr) profile_->begin(name, stream_);
  }
  ~ScopedOp() {
    if (profile_ != nullptr) profile_->end(stream_);
  }
  ScopedOp(const ScopedOp&) = delete;
  ScopedOp& operator=(const ScopedOp&) = delete;

 private:
  OpProfile* profile_;
  cudaStream_t stream_;
};

}  // namespace frank::cuda
