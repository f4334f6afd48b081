#pragma once
// Many small device-to-device copies in one kernel launch: what a verify step's checkpoint and
// rewind move (a few window rows, compressor rows and overlap halves per layer). Issued as one
// cudaMemcpyAsync each they would cost a host API call apiece, hundreds per step.
#include <cuda_runtime.h>

#include <cstdint>

namespace frank::cuda {

struct ByteCopy {
  const uint8_t* src;
  uint8_t* dst;
  int64_t bytes;
};

// Runs copies[0 .. count) (a table in device memory), one thread block per copy. The copies must
// not overlap one another.
cudaError_t copy_bytes(const ByteCopy* copies, int count, cudaStream_t stream);

}  // namespace frank::cuda
