// Indexer top-k kernels (contract in topk.cuh; the selection itself in topk_select.cuh).
//   version 1: one 1,024-thread block per row.
//   version 2: one thread-block cluster of C blocks per row (sm_90a). Each block reads 1/C of the
//              row, so a long row is read by C SMs at once; histograms are summed into every
//              block's shared memory with remote atomics (distributed shared memory), and the
//              gathered entries go to rank 0's pool the same way.
//   version 3: rows of up to 16,384 entries on one 1,024-thread block that holds the row's keys in
//              registers and ~25 KB of shared memory (topk_short.cuh); longer rows as version 2.
// Shared memory per block of versions 1 and 2: Shared (80 KB), then a region for the chunk's key
// cache or list.
#include <cooperative_groups.h>

#include <algorithm>

#include "frank/cuda/launch.cuh"
#include "frank/cuda/topk.cuh"
#include "frank/cuda/topk_select.cuh"
#include "frank/cuda/topk_short.cuh"
#include "frank/cuda/topk_team.cuh"

namespace frank::cuda {
namespace {

using namespace topk_detail;

__global__ void __launch_bounds__(kThreads, 1)
    topk_block_kernel(const float* scores, int n, int k, int32_t* out, int slots) {
  extern __shared__ __align__(16) unsigned char smem[];
  Shared& s = *reinterpret_cast<Shared*>(smem);
  const size_t row = blockIdx.y;
  select_row(BlockTeam{}, ScoreRow<false>{scores + row * n, nullptr}, n, k, out + row * k, s,
             reinterpret_cast<uint32_t*>(smem + kSharedBytes), slots);
}

__global__ void __launch_bounds__(kThreads, 1)
    topk_cluster_kernel(const float* scores, int n, int k, int32_t* out, int slots) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
  extern __shared__ __align__(16) unsigned char smem[];
  Shared& s = *reinterpret_cast<Shared*>(smem);
  const size_t row = blockIdx.y;
  select_row(ClusterTeam{}, ScoreRow<false>{scores + row * n, nullptr}, n, k, out + row * k, s,
             reinterpret_cast<uint32_t*>(smem + kSharedBytes), slots);
#endif
}

// E keys a thread: rows of up to E * kThreads entries.
template <int E>
__global__ void __launch_bounds__(kThreads, 1) topk_short_kernel(const float* scores, int n, int k, int32_t* out) {
  __shared__ ShortShared s;
  const size_t row = blockIdx.y;
  select_short<E>(scores + row * n, n, k, out + row * k, s);
}

// A launch of kThreads-thread blocks carrying the stream's priority (launch.cuh), the first of
// `attributes` when it has one.
cudaLaunchConfig_t launch_config(dim3 grid, size_t shared_bytes, cudaStream_t stream,
                                 cudaLaunchAttribute (&attributes)[2]) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = stream_priority(stream, attributes[0]) ? 1 : 0;
  return config;
}

cudaError_t launch_short(const float* scores, int rows, int n, int k, int32_t* out, cudaStream_t stream) {
  cudaLaunchAttribute attributes[2]{};
  const cudaLaunchConfig_t config = launch_config(dim3(1, rows), 0, stream, attributes);
  if (n <= 4 * kThreads) return cudaLaunchKernelEx(&config, topk_short_kernel<4>, scores, n, k, out);
  if (n <= 8 * kThreads) return cudaLaunchKernelEx(&config, topk_short_kernel<8>, scores, n, k, out);
  static_assert(kShortPerThread == 16 && kShortMax == kTopKShortMax);
  return cudaLaunchKernelEx(&config, topk_short_kernel<16>, scores, n, k, out);
}

// What a device allows, read and configured once per device.
const TeamDevice& device_info(int device) {
  return team_device(device, topk_cluster_kernel, [](int bytes, bool clusters) {
    cudaError_t e = cudaFuncSetAttribute(topk_block_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (!e && clusters) e = cudaFuncSetAttribute(topk_cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    return e;
  });
}

// As make_chunk (topk_parts.cuh) splits a row.
int chunk_of(int n, int team) { return static_cast<int>(((static_cast<long long>(n) + team - 1) / team + 3) & ~3ll); }

// Region words for a team of this size (make_chunk decides its use the same way): all there is
// for a long chunk's list, the chunk plus alignment slack for a cache, none for a row gathered
// whole (one pass) or a chunk that does not fit.
int region_slots(const TeamDevice& d, int n, int team) {
  const int chunk = chunk_of(n, team);
  if (n <= kGatherAll) return 0;
  if (chunk >= kSampleChunk) return d.slots();
  return chunk <= d.cache_chunk ? chunk + 4 : 0;
}

cudaError_t launch(const TeamDevice& d, int team, const float* scores, int rows, int n, int k, int32_t* out,
                   cudaStream_t stream) {
  const int slots = region_slots(d, n, team);
  cudaLaunchAttribute attributes[2]{};
  cudaLaunchConfig_t config =
      launch_config(dim3(team, rows), kSharedBytes + 4 * static_cast<size_t>(slots), stream, attributes);
  if (team == 1) return cudaLaunchKernelEx(&config, topk_block_kernel, scores, n, k, out, slots);
  cudaLaunchAttribute& cluster = attributes[config.numAttrs++];
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = team;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  return cudaLaunchKernelEx(&config, topk_cluster_kernel, scores, n, k, out, slots);
}

}  // namespace

int topk_cluster_size(int n) {
  // At least 4,096 elements per block: below that a block's share is one load per thread and the
  // cluster barriers cost more than the reading they spread.
  int team = 1;
  while (team < kTopKMaxCluster && n / (2 * team) >= 4096) team *= 2;
  return team;
}

cudaError_t topk(int version, const float* scores, int rows, int n, int k, int32_t* out, cudaStream_t stream,
                 int cluster_size) {
  const bool pow2 = cluster_size >= 0 && (cluster_size & (cluster_size - 1)) == 0;
  if (rows < 0 || rows > 65535 || n < 0 || k < 1 || k > kTopKMaxK || !pow2 || cluster_size > kTopKMaxCluster)
    return cudaErrorInvalidValue;
  if (version < 1 || version > 3) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (version == 3 && n <= kShortMax) return launch_short(scores, rows, n, k, out, stream);
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device)) return e;
  const TeamDevice& d = device_info(device);
  if (d.error) return d.error;
  int team = 1;
  if (version >= 2 && d.clusters) team = cluster_size ? cluster_size : topk_cluster_size(n);
  return launch(d, team, scores, rows, n, k, out, stream);
}

}  // namespace frank::cuda
