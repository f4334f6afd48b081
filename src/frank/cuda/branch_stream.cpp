#include "frank/cuda/branch_stream.h"

#include "frank/cuda/device_array.h"

namespace frank::cuda {

BranchStream::BranchStream() {
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate (branch)");
  // Timing off: the events only order the two streams.
  check(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming), "cudaEventCreate (fork)");
  check(cudaEventCreateWithFlags(&finished_, cudaEventDisableTiming), "cudaEventCreate (branch end)");
}

BranchStream::~BranchStream() {
  cudaStreamSynchronize(stream_);
  cudaEventDestroy(forked_);
  cudaEventDestroy(finished_);
  cudaStreamDestroy(stream_);
}

void BranchStream::fork(cudaStream_t from) const {
  check(cudaEventRecord(forked_, from), "fork (record)");
  check(cudaStreamWaitEvent(stream_, forked_, 0), "fork (wait)");
}

void BranchStream::finish() const { check(cudaEventRecord(finished_, stream_), "branch end (record)"); }

void BranchStream::wait(cudaStream_t into) const {
  check(cudaStreamWaitEvent(into, finished_, 0), "branch end (wait)");
}

}  // namespace frank::cuda
