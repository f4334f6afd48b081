#pragma once
// The selection of a short row (topk.cu's version 3): one block holds the row's keys in registers,
// kShortPerThread at most per thread, entry i = e * kThreads + t in thread t's key[e]. The same
// exact radix select as select_row (topk_select.cuh: levels of 12, 10 and 10 key bits, a gather
// into a pool once the k-th key's bin is small enough, tie mode after the full key), but:
// - every level after the first load reads registers, not memory, and the block needs ~25 KB of
//   shared memory (one histogram, a pool of 1,024 entries, the sort's second buffer laid over the
//   histogram) instead of select_row's 96 KB or more;
// - entries get their pool slots from one block scan, in thread order, instead of one atomic claim
//   per entry, whose returns come one after another;
// - the pool is kept in two parts, the entries above the k-th key's bin (`above` of them, all
//   selected) and those in it (`eq`), and each part is sorted by its own group of threads at the
//   same time: a bitonic sort's cost grows with its width (a power of two) and its steps with the
//   square of log2(width) (H200, N(0, 1) scores: 430 + 117 entries take 5,360 cycles in two
//   parts, 9,640 sorted whole at width 1,024; bench/results/decode-h200-2026-12-02-s17). A level
//   is refined until both parts fit the block this way; where they never can (k > 512), the pool
//   is sorted whole once it holds at most 1,024 entries (or tie mode takes exactly k of them).
#include "frank/cuda/topk_select.cuh"

namespace frank::cuda::topk_detail {

constexpr int kShortPerThread = 16;
constexpr int kShortMax = kThreads * kShortPerThread;  // the longest short row: 16,384 entries
constexpr int kShortPool = kThreads;                   // >= kTopKMaxK: one entry a thread to sort

struct ShortShared {
  union {
    uint32_t hist[kBins];         // this level's counts
    Composite spare[kShortPool];  // the sorts' second buffer, once no histogram is read
  };
  Composite pool[kShortPool];  // gathered entries: [0, above) above the k-th key's bin, then the bin's
  int warp_sum[kWarps];        // block scan scratch
  Pick pick;
};

// The width a group sorts `count` entries at: a power of two, at least a warp.
__device__ __forceinline__ int group_width(int count) { return max(32, 1 << (32 - __clz(max(count, 1) - 1))); }

// Appends key[e] (entry e * kThreads + t) to the pool for every bit e set in take[part]: part 0
// at pool + *count0, which grows by what was pushed (the same in every thread), part 1 at
// pool + first1 (only the last gather fills it). Slots come from one block scan of both parts'
// counts (16 bits each), so the pool's layout does not depend on timing. (One atomic per warp on
// each part's counter was ~500 cycles faster in session 17's run 6, with the sort of that run;
// not measured with this one.) Every thread of the block calls it.
template <int E>
__device__ __forceinline__ void push_parts(const uint32_t (&key)[E], const uint32_t (&take)[2], ShortShared& s,
                                           int* count0, int first1) {
  int total;
  const int before = block_exclusive_scan(__popc(take[0]) | __popc(take[1]) << 16, s.warp_sum, &total);
  int slot[2] = {*count0 + (before & 0xffff), first1 + (before >> 16)};
#pragma unroll
  for (int e = 0; e < E; ++e)
#pragma unroll
    for (int part = 0; part < 2; ++part)
      if (take[part] >> e & 1u) s.pool[slot[part]++] = composite(key[e], e * kThreads + static_cast<int>(threadIdx.x));
  *count0 += total & 0xffff;
}

// Sorts v, one entry for each of the kWidth threads of a group (t their rank), descending across
// the group: bitonic, shuffles inside a warp, larger strides through a and b in turn (one barrier
// a step: a buffer is written again only after the next step's barrier) with the group's own named
// barrier kBar. kWidth is a constant so that the steps unroll (a loop over a run-time width takes
// about twice as long).
template <int kBar, int kWidth>
__device__ __forceinline__ Composite sort_group(Composite v, int t, Composite* a, Composite* b) {
  bool use_b = false;
#pragma unroll
  for (int size = 2; size <= kWidth; size <<= 1)
#pragma unroll
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      Composite other;
      if (stride < 32) {
        other = __shfl_xor_sync(0xffffffffu, v, stride);
      } else {
        Composite* buf = use_b ? b : a;
        use_b = !use_b;
        buf[t] = v;
        asm volatile("bar.sync %0, %1;" ::"n"(kBar), "n"(kWidth) : "memory");
        other = buf[t ^ stride];
      }
      const bool larger = ((t & stride) == 0) == ((t & size) == 0);
      v = larger ? max(v, other) : min(v, other);
    }
  return v;
}

// sort_group for a group of `width` threads, a power of two from 32 to kThreads / 2.
template <int kBar>
__device__ Composite sort_group(Composite v, int t, int width, Composite* a, Composite* b) {
  switch (width) {
    case 32:
      return sort_group<kBar, 32>(v, t, a, b);
    case 64:
      return sort_group<kBar, 64>(v, t, a, b);
    case 128:
      return sort_group<kBar, 128>(v, t, a, b);
    case 256:
      return sort_group<kBar, 256>(v, t, a, b);
    default:
      return sort_group<kBar, kThreads / 2>(v, t, a, b);
  }
}

// Sorts the pool's two parts ([0, above) and [above, above + eq), widths wa + wb <= kThreads, so
// each at most kThreads / 2) at once, threads [0, wa) and [wa, wa + wb), and writes out[p] for
// p < k_eff. Every thread of the block calls it.
__device__ inline void sort_parts(ShortShared& s, int above, int eq, int k_eff, int32_t* out) {
  const int t = threadIdx.x, wa = group_width(above), wb = group_width(eq);
  const bool in_a = t < wa, in_b = !in_a && t < wa + wb;
  const int rank = in_a ? t : t - wa;  // in the thread's group
  const int count = in_a ? above : eq, first = in_a ? 0 : above;
  Composite v = (in_a || in_b) && rank < count ? s.pool[first + rank] : 0;
  __syncthreads();  // every entry is in registers: the groups' buffers may overlap the pool's parts
  if (!in_a && !in_b) return;
  const int lo = in_a ? 0 : wa, width = in_a ? wa : wb;
  v = in_a ? sort_group<1>(v, rank, width, s.pool + lo, s.spare + lo)
           : sort_group<2>(v, rank, width, s.pool + lo, s.spare + lo);
  const int p = first + rank;
  if (rank < count && p < k_eff) out[p] = composite_index(v);
}

// Selects row[0, n) -> out[0, k) for n <= E * kThreads, k <= kTopKMaxK. Every thread of the block
// calls it.
template <int E>
__device__ void select_short(const float* row, int n, int k, int32_t* out, ShortShared& s) {
  const int t = threadIdx.x;
  uint32_t key[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int i = e * kThreads + t;
    key[e] = i < n ? order_key(__ldg(row + i)) : 0u;  // past the row: unselectable
  }
  auto clear_hist = [&] {
    for (int j = t; j < kBins; j += kThreads) s.hist[j] = 0;
  };
  clear_hist();
  __syncthreads();
#pragma unroll
  for (int e = 0; e < E; ++e)
    if (key[e]) atomicAdd(&s.hist[key[e] >> 20], 1u);
  __syncthreads();
  Decision d{};
  resolve(s.hist, 0, k, d, s);
  int pushed = 0;  // entries in the pool's first part
  for (int j = d.k_eff + t; j < k; j += kThreads) out[j] = -1;  // fewer selectable entries than k
  if (d.k_eff == 0) return;
  for (int level = 0;; ++level) {
    const Level lv(level, d.prefix);
    // Both parts sorted at once where their groups fit the block; else one sort of the whole
    // pool once no level can make them fit (the entries above only grow) or none is left.
    const bool split = group_width(d.above) + group_width(d.eq) <= kThreads;
    const bool never_split = group_width(d.above) > kThreads - 32;
    if (split || ((never_split || level == 2) && d.above + d.eq <= kShortPool)) {
      // Gather: this level's entries above the prefix into part 0 (after those earlier levels
      // pushed), the candidates sharing it into part 1.
      uint32_t take[2] = {0, 0};  // above the prefix, sharing it
#pragma unroll
      for (int e = 0; e < E; ++e) {
        if (!key[e] || !lv.in_parent(key[e])) continue;
        const uint32_t p = lv.digit(key[e]);
        if (p >= d.prefix) take[p == d.prefix] |= 1u << e;
      }
      push_parts(key, take, s, &pushed, d.above);
      __syncthreads();  // both parts are complete; the histogram is read no more
      if (split)
        sort_parts(s, d.above, d.eq, d.k_eff, out);
      else
        sort_and_write<1>(s.pool, s.spare, d.above + d.eq, k, d.k_eff, out);
      return;
    }
    if (level == 2) {
      // The full k-th key T = d.prefix, and too many entries equal it: all above T, then the
      // first k_eff - above entries equal to T in index order (e, then t), ranked by block scans.
      const uint32_t t_key = d.prefix;
      const int quota = d.k_eff - d.above;
      int taken = 0;
      uint32_t take[2] = {0, 0};
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const bool equal = key[e] == t_key;
        int total;
        const int rank = taken + block_exclusive_scan(equal, s.warp_sum, &total);
        if ((key[e] > t_key && lv.in_parent(key[e])) || (equal && rank < quota)) take[0] |= 1u << e;
        taken += total;
      }
      push_parts(key, take, s, &pushed, 0);
      __syncthreads();  // the k_eff entries are in the pool; the histogram is read no more
      sort_and_write<1>(s.pool, s.spare, d.k_eff, k, d.k_eff, out);
      return;
    }
    // Refine: push the entries this level resolved as above, count the next digit of the rest.
    clear_hist();
    __syncthreads();
    const int next_sh = level_shift(level + 1);
    uint32_t take[2] = {0, 0};
#pragma unroll
    for (int e = 0; e < E; ++e) {
      if (!key[e] || !lv.in_parent(key[e])) continue;
      const uint32_t p = lv.digit(key[e]);
      if (p > d.prefix)
        take[0] |= 1u << e;
      else if (p == d.prefix)
        atomicAdd(&s.hist[(key[e] >> next_sh) & 1023u], 1u);
    }
    push_parts(key, take, s, &pushed, 0);
    __syncthreads();
    resolve(s.hist, level + 1, k, d, s);
  }
}

}  // namespace frank::cuda::topk_detail
