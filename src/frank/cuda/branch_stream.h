#pragma once
// BranchStream: a second stream that a step forks onto and joins back from, so that two chains of
// kernels that do not depend on each other run at the same time: V4's attention chains and shared
// expert (CudaOps::set_branches) and V4.1's mHC overlap (CudaV41Ops::set_mhc_overlap). Captured into a
// graph, the fork and the join become its edges: the replayed step holds two branches there.
// The branch stream has the device's greatest priority, and kernels launched on it carry that
// priority into captured graphs (launch.cuh): the branch's latency-bound chains get the
// multiprocessors first (measured for V4's decode step; branch_stream.cpp).
#include <cuda_runtime.h>

namespace frank::cuda {

class BranchStream {
 public:
  BranchStream();  // frank::Error when the stream or its events cannot be made
  ~BranchStream();
  BranchStream(const BranchStream&) = delete;
  BranchStream& operator=(const BranchStream&) = delete;

  cudaStream_t stream() const { return stream_; }
  // The branch stream waits for everything issued to `from` so far.
  void fork(cudaStream_t from) const;
  // The branch's end: what the next wait() waits for (everything issued to it so far).
  void finish() const;
  // `into` waits for the branch up to its last finish().
  void wait(cudaStream_t into) const;
  // The event finish() records: for a wait inside a call that takes events (moe_routed_experts).
  cudaEvent_t finished_event() const { return finished_; }
  // finish() then wait(into).
  void join(cudaStream_t into) const {
    finish();
    wait(into);
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t forked_ = nullptr, finished_ = nullptr;
};

}  // namespace frank::cuda
