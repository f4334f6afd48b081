#pragma once
// The teams of blocks that select one row (topk_select.cuh's select_row): one block alone, or a
// thread-block cluster (sm_90a) whose blocks share histograms and rank 0's pool through distributed
// shared memory. Used by topk.cu and v41_topk.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>

#include "frank/cuda/topk_parts.cuh"

namespace frank::cuda::topk_detail {

// A selecting block's shared memory: Shared, then a region for the chunk's key cache or list.
constexpr int kCacheChunk = 32768;  // largest chunk whose keys stay in shared memory (128 KB)
constexpr size_t kSharedBytes = (sizeof(Shared) + 15) & ~size_t{15};  // the region follows Shared

// The team of one block (topk.cu's version 1).
struct BlockTeam {
  __device__ int rank() const { return 0; }
  __device__ int size() const { return 1; }
  __device__ void sync() const { __syncthreads(); }
  __device__ const uint32_t* merge(Shared& s, int) const {
    __syncthreads();
    return s.hist;
  }
  __device__ const uint32_t* peer_hist(Shared& s, int) const { return s.hist; }
  __device__ uint32_t* pool_count(Shared& s) const { return &s.pool_count; }
  __device__ Composite* pool(Shared& s) const { return s.pool; }
};

// The team of a cluster (topk.cu's version 2). Only sm_90a builds it (sm_120 runs one block instead).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
struct ClusterTeam {
  __device__ int rank() const { return static_cast<int>(cg::this_cluster().block_rank()); }
  __device__ int size() const { return static_cast<int>(cg::this_cluster().num_blocks()); }
  __device__ void sync() const { cg::this_cluster().sync(); }
  // Adds this block's non-zero bins into merged[round & 1] of every block (most bins are empty:
  // scores cluster in a few exponents), then syncs the cluster. The other parity buffer was last
  // read by this block's previous resolve and peers add to it only after this sync, so it is
  // cleared here for the next round.
  __device__ const uint32_t* merge(Shared& s, int round) const {
    cg::cluster_group cluster = cg::this_cluster();
    __syncthreads();
    uint32_t* merged = s.merged[round & 1];
    const int team = size(), me = rank();
    for (int j = threadIdx.x; j < kBins; j += kThreads) {
      const uint32_t v = s.hist[j];
      if (v)
        for (int q = 0; q < team; ++q) atomicAdd(cluster.map_shared_rank(merged, (me + q) % team) + j, v);
    }
    for (int j = threadIdx.x; j < kBins; j += kThreads) s.merged[(round + 1) & 1][j] = 0;
    cluster.sync();
    return merged;
  }
  __device__ const uint32_t* peer_hist(Shared& s, int r) const { return cg::this_cluster().map_shared_rank(s.hist, r); }
  __device__ uint32_t* pool_count(Shared& s) const { return cg::this_cluster().map_shared_rank(&s.pool_count, 0); }
  __device__ Composite* pool(Shared& s) const { return cg::this_cluster().map_shared_rank(s.pool, 0); }
};
#endif

// What a device gives the selecting kernels: the largest chunk a block keeps in shared memory beside
// Shared, and whether the sm_90a cluster kernels have a body in the code this device runs.
struct TeamDevice {
  cudaError_t error = cudaSuccess;
  bool clusters = false;
  int cache_chunk = 0;
  // Region words after Shared: a cached chunk plus its 4 of alignment slack.
  int slots() const { return cache_chunk + 4; }
  int shared_bytes() const { return static_cast<int>(kSharedBytes) + 4 * slots(); }
};

// `device` read once, then allow(shared_bytes, clusters) lets the caller's kernels take that much
// dynamic shared memory; the result is kept (one table per caller: `Allow` is its own lambda).
// `cluster_kernel` is any of the caller's cluster kernels: its binaryVersion says whether the
// device runs sm_90a code.
template <class Kernel, class Allow>
const TeamDevice& team_device(int device, Kernel* cluster_kernel, Allow allow) {
  constexpr int kMaxDevices = 64;
  static std::once_flag once[kMaxDevices];
  static TeamDevice info[kMaxDevices];
  static const TeamDevice bad{cudaErrorInvalidDevice};
  if (device < 0 || device >= kMaxDevices) return bad;
  std::call_once(once[device], [&] {
    TeamDevice& d = info[device];
    int optin = 0;
    d.error = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (d.error) return;
    if (static_cast<size_t>(optin) < kSharedBytes + 64) {
      d.error = cudaErrorNotSupported;  // pre-Hopper/Blackwell shared memory
      return;
    }
    // Region words left by Shared; a cached chunk needs up to 4 more for alignment slack.
    const int words = static_cast<int>((static_cast<size_t>(optin) - kSharedBytes) / 4) & ~3;
    d.cache_chunk = std::min(kCacheChunk, words - 4);
    cudaFuncAttributes cluster{};
    d.error = cudaFuncGetAttributes(&cluster, cluster_kernel);
    if (d.error) return;
    d.clusters = cluster.binaryVersion == 90;
    d.error = allow(d.shared_bytes(), d.clusters);
  });
  return info[device];
}

}  // namespace frank::cuda::topk_detail
