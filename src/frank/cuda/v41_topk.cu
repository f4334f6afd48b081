// The DeepSeek-V4.1 indexer's two-level top-k (contracts in v41_ops.cuh): the V4 top-k's exact
// radix select (topk_select.cuh's select_row; one 1,024-thread block per row, or for long rows a
// cluster of blocks as topk.cu's version 2) run over three kinds of row, then the picks rewritten
// in ascending index order.
//   candidate_blocks          the row of block keys: a block's key is its best reachable entry's,
//                             the newest reachable entry's block is pinned at +inf;
//   select_entries            the scores up to visible_t, masked or not;
//   select_entries_in_blocks  the chosen blocks' entries one after another (a gathered row).
// Where the CPU reference (engine/indexer_v41.cpp) and these differ in form, not result:
// - The reference ranks by float comparisons (a > b, or a == b and the lower index); select_row
//   ranks by order_key (topk_parts.cuh), which is the same order: +0 and -0 are one key (the
//   reference's == holds for them, so they tie and the lower index wins), subnormals keep their
//   order (bit operations, no flush to zero), -inf is never selected (the reference drops it).
// - NaN: the reference's block maximum (std::max(block, score)) keeps the block's value when the
//   score is NaN, so a NaN never raises a block: here a NaN's key is 0, the same. Its entry-level
//   sort has no defined order for NaN (the comparison is not a strict weak order then); here a
//   NaN entry is never selected, as if it were -inf. Scores are finite or -inf by contract.
// - Level 1 ranks the ceil(visible / block_size) blocks that hold a reachable entry; the reference
//   ranks all ceil(cols / block_size), but the others score -inf and are dropped there.
// - A gathered row lists the chosen blocks in ascending order, so its index order is the entry
//   order and ties break the same way: the fused path picks what the masked path picks.
#include <algorithm>
#include <climits>

#include "frank/cuda/topk.cuh"
#include "frank/cuda/topk_select.cuh"
#include "frank/cuda/topk_team.cuh"
#include "frank/cuda/v41_ops.cuh"

namespace frank::cuda {
namespace {

using namespace topk_detail;

constexpr int kMaxK = kPool;                 // select_row keeps at most its pool's entries
constexpr uint32_t kPinnedKey = 0xff800000u;  // order_key(+inf)

__device__ __forceinline__ int visible_of(const int64_t* start, int t, int ratio, int cols) {
  return static_cast<int>(min(static_cast<long long>((*start + t + 1) / ratio), static_cast<long long>(cols)));
}

// Level 1's row: entry b is block b of `block_size` scores, keyed by its best reachable score
// (order keys are monotone, so the best key is the key of the maximum; 0 when every reachable
// score is -inf or NaN), except the pinned block of the newest reachable entry.
struct BlockMaxRow {
  const float* row;
  int visible, block_size, pinned;

  __device__ int misalign(int) const { return 0; }
  __device__ uint32_t key(int b) const {
    if (b == pinned) return kPinnedKey;
    uint32_t best = 0;
    for (int e = b * block_size, end = min(e + block_size, visible); e < end; ++e)
      best = max(best, order_key(__ldg(row + e)));
    return best;
  }
  __device__ uint4 quad(int b) const { return make_uint4(key(b), key(b + 1), key(b + 2), key(b + 3)); }
  __device__ void prefetch(int lo, int hi) const {
    prefetch_l2(row, lo * block_size, min(hi * block_size, visible));
  }
  __device__ int entry(int b) const { return b; }
};

// Level 2's row inside level 1's blocks: entry i is entry i % block_size of the (i / block_size)th
// chosen block; entries at or past `limit` (min(visible_t, block_cols)) are unselectable.
struct GatheredRow {
  const float* row;
  const int32_t* blocks;
  int block_size, limit;

  __device__ int misalign(int) const { return 0; }
  __device__ int entry(int i) const { return __ldg(blocks + i / block_size) * block_size + i % block_size; }
  __device__ uint32_t key(int i) const {
    const int e = entry(i);
    return e < limit ? order_key(__ldg(row + e)) : 0u;
  }
  __device__ uint4 quad(int i) const { return make_uint4(key(i), key(i + 1), key(i + 2), key(i + 3)); }
  __device__ void prefetch(int, int) const {}  // scattered pieces of 4 * block_size bytes
};

// Level 2's row over the scores themselves: entry indices are entry indices.
template <bool kMasked>
struct EntryRow : ScoreRow<kMasked> {
  __device__ int entry(int i) const { return i; }
};

// Selects the best k of src's n entries into out[0, k) (select_row), then rank 0 rewrites them as
// src.entry(index) in ascending order, then -1: composite(1, x) ranks a lower x first, so the pool's
// sort orders them. Every thread of every block of the team calls it.
template <class Team, class Source>
__device__ void select_ascending(const Team& team, const Source& src, int n, int k, int32_t* out, int slots) {
  extern __shared__ __align__(16) unsigned char smem[];
  Shared& s = *reinterpret_cast<Shared*>(smem);
  select_row(team, src, n, k, out, s, reinterpret_cast<uint32_t*>(smem + kSharedBytes), slots);
  if (team.rank() != 0) return;  // select_row's last team-wide sync is behind: no peer touches s now
  __syncthreads();  // select_row's writes to out are visible to the whole block from here
  if (threadIdx.x == 0) s.pool_count = 0;
  __syncthreads();
  for (int p = threadIdx.x; p < k; p += kThreads) {
    const int32_t picked = out[p];
    if (picked >= 0) s.pool[claim_slot(&s.pool_count)] = composite(1u, src.entry(picked));
  }
  __syncthreads();
  const int m = static_cast<int>(s.pool_count);
  sort_pool(s, m, k, m, out);
}

// The three selections, one row per blockIdx.y; each runs with either team (block_kernel,
// cluster_kernel below).
struct CandidateBlocks {
  const float* scores;
  int cols;
  const int64_t* start;
  int ratio, topk_blocks, block_size;
  int32_t* blocks;

  template <class Team>
  __device__ void operator()(const Team& team, int slots) const {
    const int t = blockIdx.y;
    const int visible = visible_of(start, t, ratio, cols);
    const BlockMaxRow src{scores + static_cast<size_t>(t) * cols, visible, block_size,
                          visible > 0 ? (visible - 1) / block_size : -1};
    select_ascending(team, src, (visible + block_size - 1) / block_size, topk_blocks,
                     blocks + static_cast<size_t>(t) * topk_blocks, slots);
  }
};

template <bool kMasked>
struct SelectEntries {
  const float* scores;
  int cols;
  const int64_t* start;
  int ratio;
  const uint8_t* mask;
  int topk;
  int32_t* selected;

  template <class Team>
  __device__ void operator()(const Team& team, int slots) const {
    const int t = blockIdx.y;
    const size_t row = static_cast<size_t>(t) * cols;
    const EntryRow<kMasked> src{{scores + row, kMasked ? mask + row : nullptr}};
    select_ascending(team, src, visible_of(start, t, ratio, cols), topk, selected + static_cast<size_t>(t) * topk,
                     slots);
  }
};

struct SelectInBlocks {
  const float* scores;
  int cols;
  const int64_t* start;
  int ratio;
  const int32_t* blocks;
  int topk_blocks, block_size, block_cols, topk;
  int32_t* selected;

  template <class Team>
  __device__ void operator()(const Team& team, int slots) const {
    const int t = blockIdx.y;
    const int32_t* chosen = blocks + static_cast<size_t>(t) * topk_blocks;
    // The chosen blocks come first (ascending), then -1.
    int n_chosen = 0;
    for (int j0 = 0; j0 < topk_blocks; j0 += kThreads) {
      const int j = j0 + static_cast<int>(threadIdx.x);
      n_chosen += __syncthreads_count(j < topk_blocks && __ldg(chosen + j) >= 0);
    }
    const GatheredRow src{scores + static_cast<size_t>(t) * cols, chosen, block_size,
                          min(visible_of(start, t, ratio, cols), block_cols)};
    select_ascending(team, src, n_chosen * block_size, topk, selected + static_cast<size_t>(t) * topk, slots);
  }
};

template <class Op>
__global__ void __launch_bounds__(kThreads, 1) block_kernel(Op op, int slots) {
  op(BlockTeam{}, slots);
}

// Only sm_90a builds the cluster team (an sm_120 device runs block_kernel instead).
template <class Op>
__global__ void __launch_bounds__(kThreads, 1) cluster_kernel(Op op, int slots) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
  op(ClusterTeam{}, slots);
#endif
}

template <class Op>
cudaError_t allow_shared(int bytes, bool clusters) {
  cudaError_t e = cudaFuncSetAttribute(block_kernel<Op>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (!e && clusters) e = cudaFuncSetAttribute(cluster_kernel<Op>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  return e;
}

// What a device allows, read and configured once per device (as topk.cu's device_info).
const TeamDevice& config(int device) {
  return team_device(device, cluster_kernel<CandidateBlocks>, [](int bytes, bool clusters) {
    cudaError_t e = allow_shared<CandidateBlocks>(bytes, clusters);
    if (!e) e = allow_shared<SelectEntries<false>>(bytes, clusters);
    if (!e) e = allow_shared<SelectEntries<true>>(bytes, clusters);
    if (!e) e = allow_shared<SelectInBlocks>(bytes, clusters);
    return e;
  });
}

// n rows of up to `length` entries: one block per row, or one cluster of topk_cluster_size(length)
// blocks (topk.cu's choice for V4's rows) where the device runs clusters.
template <class Op>
cudaError_t launch_rows(const Op& op, int n, int length, cudaStream_t stream) {
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device)) return e;
  const TeamDevice& c = config(device);
  if (c.error) return c.error;
  const int team = c.clusters ? topk_cluster_size(length) : 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(team, n);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = static_cast<size_t>(c.shared_bytes());
  config.stream = stream;
  if (team == 1) return cudaLaunchKernelEx(&config, block_kernel<Op>, op, c.slots());
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = team;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, cluster_kernel<Op>, op, c.slots());
}

bool bad_rows(int n, int cols, const int64_t* start, int ratio) {
  return n < 0 || n > 65535 || cols < 0 || start == nullptr || ratio < 1;
}

// Entry e of the row is in a chosen block: blocks [topk_blocks] ascending, then -1 (as +inf).
__global__ void candidate_mask_kernel(const int32_t* blocks, int topk_blocks, int block_size, int block_cols, int cols,
                                      uint8_t* mask) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= cols) return;
  const int32_t* chosen = blocks + static_cast<size_t>(blockIdx.y) * topk_blocks;
  const int b = e / block_size;
  int lo = 0, hi = topk_blocks;  // the first slot whose block is >= b (or -1)
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    const int32_t v = __ldg(chosen + mid);
    if (v >= 0 && v < b)
      lo = mid + 1;
    else
      hi = mid;
  }
  mask[static_cast<size_t>(blockIdx.y) * cols + e] = e < block_cols && lo < topk_blocks && __ldg(chosen + lo) == b;
}

}  // namespace

cudaError_t candidate_blocks(const float* scores, int n, int cols, const int64_t* start, int ratio, int topk_blocks,
                             int block_size, int32_t* blocks, cudaStream_t stream) {
  if (bad_rows(n, cols, start, ratio) || topk_blocks < 1 || topk_blocks > kMaxK || block_size < 1 ||
      static_cast<long long>(cols) + block_size > INT_MAX)  // block ends stay in int
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return launch_rows(CandidateBlocks{scores, cols, start, ratio, topk_blocks, block_size, blocks}, n,
                     (cols + block_size - 1) / block_size, stream);
}

cudaError_t candidate_mask(const int32_t* blocks, int n, int topk_blocks, int block_size, int block_cols, int cols,
                           uint8_t* mask, cudaStream_t stream) {
  if (n < 0 || n > 65535 || topk_blocks < 1 || block_size < 1 || block_cols < 0 || cols < 0)
    return cudaErrorInvalidValue;
  if (n == 0 || cols == 0) return cudaSuccess;
  constexpr int kMaskThreads = 256;
  candidate_mask_kernel<<<dim3((cols + kMaskThreads - 1) / kMaskThreads, n), kMaskThreads, 0, stream>>>(
      blocks, topk_blocks, block_size, block_cols, cols, mask);
  return cudaGetLastError();
}

cudaError_t select_entries(const float* scores, int n, int cols, const int64_t* start, int ratio,
                           const uint8_t* mask, int topk, int32_t* selected, cudaStream_t stream) {
  if (bad_rows(n, cols, start, ratio) || topk < 1 || topk > kMaxK) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (mask) return launch_rows(SelectEntries<true>{scores, cols, start, ratio, mask, topk, selected}, n, cols, stream);
  return launch_rows(SelectEntries<false>{scores, cols, start, ratio, nullptr, topk, selected}, n, cols, stream);
}

cudaError_t select_entries_in_blocks(const float* scores, int n, int cols, const int64_t* start, int ratio,
                                     const int32_t* blocks, int topk_blocks, int block_size, int block_cols,
                                     int topk, int32_t* selected, cudaStream_t stream) {
  if (bad_rows(n, cols, start, ratio) || topk_blocks < 1 || block_size < 1 || block_cols < 0 || topk < 1 ||
      topk > kMaxK || static_cast<long long>(topk_blocks) * block_size > INT_MAX)
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return launch_rows(
      SelectInBlocks{scores, cols, start, ratio, blocks, topk_blocks, block_size, block_cols, topk, selected}, n,
      topk_blocks * block_size, stream);
}

}  // namespace frank::cuda
