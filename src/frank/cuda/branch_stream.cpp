#include "frank/cuda/branch_stream.h"

#include "frank/cuda/device_array.h"

namespace frank::cuda {

BranchStream::BranchStream() {
  // The device's greatest priority: where both streams have blocks waiting for a multiprocessor,
  // the branch's go first. Its chains are latency-bound (the CSA indexer's scores and top-k, the
  // K=V row) while the main one streams weights, whose blocks fill in around them: 1.5-3 us a
  // decode step on an H200, and 10 us slower the other way round
  // (bench/results/decode-h200-2026-12-01-s16).
  int least = 0, greatest = 0;
  check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange");
  check(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest), "cudaStreamCreate (branch)");
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
