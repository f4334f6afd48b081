#pragma once
// Building blocks of the top-k selection (topk_select.cuh): order-preserving keys, the sources a
// row's keys come from, a block's share of a row and the passes over it, block scans, bin picking
// and the final sort. One block of kThreads threads runs each of them; "every thread must call it"
// marks those with barriers.
#include <cooperative_groups.h>

#include <cstdint>

namespace frank::cuda::topk_detail {

namespace cg = cooperative_groups;

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kBins = 4096;          // level 0 digit: 12 bits (levels 1 and 2 use the low 1,024 bins)
constexpr int kPool = 4096;          // entries rank 0 can sort at the end: kThreads x 4
constexpr int kGatherAll = kThreads; // rows this short skip the histograms: all go to the pool
constexpr int kSampleChunk = 16384;  // chunks this long sample a floor and keep a list (topk_select.cuh)

using Composite = unsigned long long;

// Monotone map of a float onto uint32: key(a) > key(b) iff a > b; one key for -0.0 and +0.0; 0 for
// NaN and -inf, never selected (every selectable key is >= 0x00800000). Bit operations only, so
// subnormals keep their order whatever the flush-to-zero mode.
__device__ __forceinline__ uint32_t order_key(float x) {
  uint32_t b = __float_as_uint(x);
  if ((b & 0x7fffffffu) > 0x7f800000u || b == 0xff800000u) return 0;  // NaN, -inf
  if (b == 0x80000000u) b = 0;                                         // -0.0 is +0.0
  // Positive floats order like their bits: set the top bit to put them above all negatives.
  // Negative floats order inversely to their bits: flipping all bits reverses that.
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// The rank of an entry: larger is better; equal keys rank by lower index first (the reference's
// order). Every composite is distinct and 0 ranks below all of them.
__device__ __forceinline__ Composite composite(uint32_t key, int index) {
  return (Composite{key} << 32) | static_cast<uint32_t>(~static_cast<uint32_t>(index));
}

__device__ __forceinline__ int composite_index(Composite c) { return static_cast<int>(~static_cast<uint32_t>(c)); }

struct Pick {
  int bin;    // the bin holding the need-th largest entry
  int above;  // entries in the bins above it
  int count;  // entries in it
};

struct Shared {
  uint32_t hist[kBins];       // this block's counts at the current level
  uint32_t merged[2][kBins];  // team-wide counts, by merge round parity (clusters only)
  Composite pool[kPool];      // rank 0: gathered entries, sorted at the end
  uint32_t pool_count;        // rank 0: entries in pool
  uint32_t list_count;        // entries appended to the block's list (may exceed its capacity)
  int warp_sum[kWarps];       // block scan scratch
  Pick pick;
  int quota;                  // tie mode: entries equal to the k-th key this block takes
};

// Asks the copy engine to bring row[lo, hi) into L2 now (its 16-byte-aligned middle, in 16 KB
// pieces), so that the first pass finds it there: a block's own loads keep only 64 KB in flight,
// which at DRAM latency holds one SM far below its share of the bandwidth. A hint only (sm_90 and
// up).
__device__ inline void prefetch_l2(const float* row, int lo, int hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kPiece = 4096;  // floats
  const int a0 = min(hi, lo + static_cast<int>(((16 - (reinterpret_cast<uintptr_t>(row + lo) & 15)) & 15) / 4));
  const int a1 = a0 + (hi - a0) / 4 * 4;
  for (int p = a0 + kPiece * static_cast<int>(threadIdx.x); p < a1; p += kPiece * kThreads) {
    const uint32_t bytes = 4u * static_cast<uint32_t>(min(kPiece, a1 - p));  // a multiple of 16
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(row + p), "r"(bytes) : "memory");
  }
#endif
}

// Where a row's keys come from. Every source gives key(i), the order key of entry i; quad(i), the
// keys of i .. i+3 for i = lo + misalign(lo) + 4j (16-byte aligned in memory where that matters);
// and prefetch(lo, hi), a hint that the chunk [lo, hi) is about to be read.
//
// ScoreRow: fp32 scores in memory, read 16 bytes at a time; kMasked: entries whose mask byte is 0
// are unselectable (key 0), as if their score were -inf.
template <bool kMasked>
struct ScoreRow {
  const float* row;
  const uint8_t* mask;  // kMasked only

  __device__ int misalign(int lo) const { return static_cast<int>((reinterpret_cast<uintptr_t>(row + lo) >> 2) & 3); }
  __device__ uint32_t key(int i) const {
    if constexpr (kMasked)
      if (!__ldg(mask + i)) return 0;
    return order_key(__ldg(row + i));
  }
  __device__ uint4 quad(int i) const {
    const float4 v = __ldg(reinterpret_cast<const float4*>(row + i));
    uint4 k = make_uint4(order_key(v.x), order_key(v.y), order_key(v.z), order_key(v.w));
    if constexpr (kMasked) {
      if (!__ldg(mask + i)) k.x = 0;
      if (!__ldg(mask + i + 1)) k.y = 0;
      if (!__ldg(mask + i + 2)) k.z = 0;
      if (!__ldg(mask + i + 3)) k.w = 0;
    }
    return k;
  }
  __device__ void prefetch(int lo, int hi) const { prefetch_l2(row, lo, hi); }
};

// A block's share of the row, elements [lo, hi): rank r of a team of C owns chunk r, so chunk order
// is index order. [a0, a1) is its quad-aligned middle (16-byte aligned for a ScoreRow), a
// multiple of 4 elements. After the first pass the later passes read, when they can, one of:
// - cache: every key of the chunk, element i at cache[i - base] (base puts a0 on a 16-byte
//   boundary of the cache too); small chunks;
// - list: (key, index) of the entries at or above the sampled floor; large chunks.
template <class Source>
struct Chunk {
  Source src;
  int lo, hi, a0, a1, base;
  uint32_t* cache;
  uint32_t* list_key;
  int* list_index;
  int list_cap, list_n;
};

// region: the block's shared memory after Shared, `slots` 32-bit words.
template <class Source>
__device__ inline Chunk<Source> make_chunk(const Source& src, int n, int rank, int team, uint32_t* region, int slots) {
  Chunk<Source> c{};
  c.src = src;
  const int per = static_cast<int>(((static_cast<long long>(n) + team - 1) / team + 3) & ~3ll);
  c.lo = min(n, rank * per);
  c.hi = min(n, c.lo + per);
  c.a0 = min(c.hi, c.lo + ((4 - src.misalign(c.lo)) & 3));
  c.a1 = c.a0 + (c.hi - c.a0) / 4 * 4;
  c.base = c.a0 > c.lo ? c.a0 - 4 : c.a0;
  if (per >= kSampleChunk) {
    c.list_cap = slots / 2;
    c.list_key = c.list_cap ? region : nullptr;
    c.list_index = reinterpret_cast<int*>(region + c.list_cap);
  } else if (c.hi - c.base <= slots) {
    c.cache = region;
  }
  return c;
}

// Calls f(i, key) for every element of the chunk, in no set order, reading quads (16-byte loads
// for a ScoreRow), kUnroll of them issued before any is used (64 KB in flight per block); kFill
// also stores the keys in the cache. kFromCache reads the cache instead.
template <bool kFromCache, bool kFill, class Source, class F>
__device__ __forceinline__ void sweep(const Chunk<Source>& c, F&& f) {
  constexpr int kUnroll = 4;
  const int t = threadIdx.x;
  auto scalar = [&](int i) {
    uint32_t key;
    if constexpr (kFromCache) {
      key = c.cache[i - c.base];
    } else {
      key = c.src.key(i);
      if constexpr (kFill) c.cache[i - c.base] = key;
    }
    f(i, key);
  };
  if (t < c.a0 - c.lo) scalar(c.lo + t);
  if (t < c.hi - c.a1) scalar(c.a1 + t);
  const int nv = (c.a1 - c.a0) / 4;
  uint4* cv = reinterpret_cast<uint4*>(c.cache + (c.a0 - c.base));
  for (int j0 = 0; j0 < nv; j0 += kUnroll * kThreads) {
    uint4 k4[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = j0 + u * kThreads + t;
      if (j >= nv) continue;
      if constexpr (kFromCache)
        k4[u] = cv[j];
      else
        k4[u] = c.src.quad(c.a0 + 4 * j);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = j0 + u * kThreads + t;
      if (j >= nv) continue;
      if constexpr (kFill) cv[j] = k4[u];
      const int i = c.a0 + 4 * j;
      f(i, k4[u].x);
      f(i + 1, k4[u].y);
      f(i + 2, k4[u].z);
      f(i + 3, k4[u].w);
    }
  }
}

// A later pass: from the list or the cache when the chunk has one, else the source again.
template <class Source, class F>
__device__ __forceinline__ void sweep_again(const Chunk<Source>& c, F&& f) {
  if (c.list_key) {
    for (int j = threadIdx.x; j < c.list_n; j += kThreads) f(c.list_index[j], c.list_key[j]);
  } else if (c.cache) {
    sweep<true, false>(c, f);
  } else {
    sweep<false, false>(c, f);
  }
}

// Exclusive prefix sum of v over the block in thread order; *total gets the block's sum. Every
// thread must call it.
__device__ inline int block_exclusive_scan(int v, int* warp_sum, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int x = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, x, d);
    if (lane >= d) x += y;
  }
  if (lane == 31) warp_sum[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int w = warp_sum[lane];
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += y;
    }
    warp_sum[lane] = w;
  }
  __syncthreads();
  const int before = (warp ? warp_sum[warp - 1] : 0) + x - v;
  *total = warp_sum[kWarps - 1];
  __syncthreads();  // warp_sum may be reused at once
  return before;
}

// Scans histogram h from the top bin down and returns its total; need = need_of(total). When
// 1 <= need <= total, s.pick is the bin holding the need-th largest entry. Every thread must call
// it; s.pick is valid after it returns, until the next call. S: any block's shared memory with
// warp_sum and pick (Shared, or topk_short.cuh's ShortShared).
template <class NeedOf, class S>
__device__ int pick_bin(const uint32_t* h, NeedOf need_of, S& s) {
  const int top = kBins - 1 - 4 * static_cast<int>(threadIdx.x);  // thread order = bins descending
  const int c[4] = {static_cast<int>(h[top]), static_cast<int>(h[top - 1]), static_cast<int>(h[top - 2]),
                    static_cast<int>(h[top - 3])};
  int total;
  int cum = block_exclusive_scan(c[0] + c[1] + c[2] + c[3], s.warp_sum, &total);
  const int need = need_of(total);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    if (cum < need && need <= cum + c[q]) s.pick = Pick{top - q, cum, c[q]};
    cum += c[q];
  }
  __syncthreads();
  return total;
}

// Appends entries to a pool (rank 0's, maybe in another block) or a list: one atomic per warp
// for the lanes that call it together. Returns the entry's slot.
__device__ __forceinline__ uint32_t claim_slot(uint32_t* count) {
  const cg::coalesced_group g = cg::coalesced_threads();
  uint32_t slot = 0;
  if (g.thread_rank() == 0) slot = atomicAdd(count, g.size());
  return g.shfl(slot, 0) + g.thread_rank();
}

// One bitonic step for the pairs (p, p ^ stride) among positions p = E t + e, with the partner's
// value already in `other`: the lower position keeps the larger value in runs that end descending
// ((p & size) == 0), the smaller in the others.
template <int E>
__device__ __forceinline__ void keep(Composite (&v)[E], const Composite (&other)[E], int size, int stride) {
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int p = E * static_cast<int>(threadIdx.x) + e;
    const bool larger = ((p & stride) == 0) == ((p & size) == 0);
    v[e] = larger ? max(v[e], other[e]) : min(v[e], other[e]);
  }
}

// Steps whose pairs lie inside one thread (stride S < E): compile-time indices keep v in registers.
template <int E, int S>
__device__ __forceinline__ void step_in_thread(Composite (&v)[E], int size) {
#pragma unroll
  for (int e = 0; e < E; ++e) {
    if (e & S) continue;
    const int p = E * static_cast<int>(threadIdx.x) + e;
    const Composite a = v[e], b = v[e + S];
    const bool descending = (p & size) == 0;
    v[e] = descending ? max(a, b) : min(a, b);
    v[e + S] = descending ? min(a, b) : max(a, b);
  }
}

// Sorts the m <= kThreads * E entries of pool descending (bitonic, in registers: E per thread)
// and writes the best k_eff indices to out[0, k), then -1 (k <= kThreads * E). Pairs inside a thread swap in
// registers, inside a warp by shuffles; only strides of 32 E and up go through shared memory
// (pool and spare in turn, so one barrier per step), striped (element e of thread t at
// e * kThreads + t) so that a warp's accesses are contiguous. Every thread must call it.
template <int E>
__device__ void sort_and_write(Composite* pool, Composite* spare, int m, int k, int k_eff, int32_t* out) {
  constexpr int kSize = kThreads * E;
  Composite v[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int p = E * static_cast<int>(threadIdx.x) + e;
    v[e] = p < m ? pool[p] : 0;
  }
  __syncthreads();  // pool is reused below
  bool use_spare = false;
  for (int size = 2; size <= kSize; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      if (stride < E) {
        if constexpr (E > 1)
          if (stride == 1) step_in_thread<E, 1>(v, size);
        if constexpr (E > 2)
          if (stride == 2) step_in_thread<E, 2>(v, size);
        continue;
      }
      Composite other[E];
      if (stride < 32 * E) {
#pragma unroll
        for (int e = 0; e < E; ++e) other[e] = __shfl_xor_sync(0xffffffffu, v[e], stride / E);
      } else {
        Composite* b = use_spare ? spare : pool;
        use_spare = !use_spare;
        // stride is a multiple of E: the partner of (t, e) is (t ^ (stride / E), e).
        const int partner = static_cast<int>(threadIdx.x) ^ (stride / E);
#pragma unroll
        for (int e = 0; e < E; ++e) b[e * kThreads + threadIdx.x] = v[e];
        __syncthreads();
#pragma unroll
        for (int e = 0; e < E; ++e) other[e] = b[e * kThreads + partner];
      }
      keep(v, other, size, stride);
    }
  }
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int p = E * static_cast<int>(threadIdx.x) + e;
    if (p < k) out[p] = p < k_eff ? composite_index(v[e]) : -1;
  }
}

}  // namespace frank::cuda::topk_detail
