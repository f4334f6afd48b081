#pragma once
// The GPU's achievable read bandwidth, measured by reading a buffer far larger than L2 once
// (16-byte loads, grid-stride, one partial sum per block so nothing is optimised away). Benchmarks
// compare their bytes per second against this number, measured in the same run.
#include <cstdint>

#include <cuda_runtime.h>

namespace frank::cuda {

// Reads `bytes` (a multiple of 16) from `data`; writes one float per block into `sink` (of
// read_probe_blocks() floats).
cudaError_t read_probe(const void* data, int64_t bytes, float* sink, cudaStream_t stream);
int read_probe_blocks();

}  // namespace frank::cuda
