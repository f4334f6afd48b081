#pragma once
// Indexer top-k on the GPU: for each row of scores, the indices of the k highest, best first.
//
// The contract is frank::engine::top_k_indices (src/frank/engine/indexer.h), bit for bit:
// - order: higher score first; equal scores by lower index first, so the lowest indices win a tie
//   at the k-th place;
// - -0.0 and +0.0 are equal (compared as one value, so their order is by index);
// - NaN (any sign or payload) and -inf entries are never selected; +inf is the highest score;
//   subnormals are ordinary values (no flush to zero);
// - a row with fewer than k selectable entries returns them all: the rest of its k output slots
//   hold -1.
//
// Three kernels with that one contract (numbered as in llm.c's dev/cuda):
//   1  one 1,024-thread block per row;
//   2  each row spread over a thread-block cluster (sm_90) whose blocks share histograms through
//      distributed shared memory. On a GPU without the sm_90a cluster code (sm_120) it runs 1.
//   3  rows of up to kTopKShortMax entries on one block that keeps the row in registers and needs
//      a quarter of version 1's shared memory (a decode step's CSA row at up to 64K of context);
//      longer rows as version 2.
#include <cstdint>

#include <cuda_runtime.h>

namespace frank::cuda {

inline constexpr int kTopKMaxK = 1024;      // the largest k (DeepSeek-V4-Pro keeps 1,024)
inline constexpr int kTopKMaxCluster = 8;   // the largest portable cluster
inline constexpr int kTopKShortMax = 16384; // the longest row version 3 keeps in registers

// scores: device [rows, n] row-major fp32; out: device [rows, k] int32. Needs 1 <= k <= kTopKMaxK,
// 0 <= n < 2^31 and rows < 65,536. cluster_size (version 2, and version 3's long rows): blocks per
// row, a power of two up to kTopKMaxCluster; 0 picks topk_cluster_size(n). Asynchronous on stream;
// returns the launch error, or cudaErrorInvalidValue for arguments outside the contract.
cudaError_t topk(int version, const float* scores, int rows, int n, int k, int32_t* out, cudaStream_t stream,
                 int cluster_size = 0);

// The cluster size version 2 uses for rows of length n (1 where a cluster cannot pay off).
int topk_cluster_size(int n);

}  // namespace frank::cuda
