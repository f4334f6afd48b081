#pragma once
// The last block of a group finishes what the group's blocks started, in the same kernel: each
// block writes its part to global memory, then counts itself in the group's arrival counter; the
// block that makes the count complete sees every other block's part and finishes. This saves the
// launch and the grid-completion wait of a finishing kernel. Counters are static device memory,
// one per group, left at zero by every launch (atomicInc wraps), so the kernels sharing a set of
// counters must not run concurrently (kernels on one stream never do).
#include <cuda_runtime.h>

namespace frank::cuda {

// True in the last of the `blocks` blocks counting in `arrivals` (every other block's writes are
// then visible to it); every thread of a block gets the same answer. Fences on both sides of the
// count: the block's writes are made visible before it, and the last block reads the others' after
// it (thread 0's count and fence order the whole block's later reads through the barrier).
__device__ __forceinline__ bool arrived_last(unsigned* arrivals, unsigned blocks) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicInc(arrivals, blocks - 1) == blocks - 1;  // the last arrival wraps the count to 0
    __threadfence();
  }
  __syncthreads();
  return last;
}

}  // namespace frank::cuda
