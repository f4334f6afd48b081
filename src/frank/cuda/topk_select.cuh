#pragma once
// The per-row selection behind both top-k kernels (topk.cu). A *team* of blocks selects one row: a
// single block (version 1) or a thread-block cluster (version 2); rank r reads chunk r.
//
// Exact radix select on the order-preserving keys of topk_parts.cuh:
// 1. Level 0 counts the top 12 key bits of the row; the team-wide histogram gives the bin holding
//    the k-th best key. Levels 1 and 2 count the next 10 bits among the keys in that bin, and so
//    on. After a level with prefix p (the bits resolved so far), `above` keys have a larger
//    prefix (all selected) and `eq` keys share p (the k-th best is among them).
// 2. As soon as above + eq fits the pool (4,096 entries), one more pass gathers every entry with
//    prefix >= p into rank 0's pool, which sorts them by composite (key, then lower index) and
//    keeps the best k.
// 3. If even the full key T leaves above + eq too large (a mass of equal scores), the entries
//    equal to T are taken in index order: rank r takes the first max(0, need - e_<r) of its own,
//    where need = k - above and e_<r counts the equal entries of the ranks before it.
// 4. Long chunks first sample 1,024 entries spread over the whole row (the same ones in every
//    block) and take as floor the level-0 bin that a safe margin more than k/n of the sample
//    reaches; level 0 then counts, and lists, only entries at or above the floor, and
//    the later levels read that short list instead of the row. If fewer than k entries reach
//    the floor (a misleading sample), level 0 runs again without it.
// Rows of at most 1,024 entries skip all this: every selectable entry goes to the pool.
// The result does not depend on the team size, the sample, or the order in which threads gather.
#include "frank/cuda/topk_parts.cuh"

namespace frank::cuda::topk_detail {

__device__ __forceinline__ int level_shift(int level) { return level == 0 ? 20 : level == 1 ? 10 : 0; }
__device__ __forceinline__ int level_bits(int level) { return level == 0 ? 12 : 10; }

// A level's view of the keys: digit(key) is the key's bits resolved once this level is (key >> its
// shift), and only keys in the bin the earlier levels chose (the prefix's parent; every key at
// level 0) take part in it.
struct Level {
  int shift, parent_shift;
  uint32_t parent;
  __device__ Level(int level, uint32_t prefix)
      : shift(level_shift(level)),
        parent_shift(level == 0 ? 32 : level_shift(level - 1)),
        parent(level == 0 ? 0u : prefix >> level_bits(level)) {}
  __device__ uint32_t digit(uint32_t key) const { return key >> shift; }
  __device__ bool in_parent(uint32_t key) const { return parent_shift == 32 || (key >> parent_shift) == parent; }
};

// What the last resolved level decided; the same in every thread of the team.
struct Decision {
  uint32_t prefix;  // the key bits resolved so far (the k-th best key's)
  int above;        // entries with a larger prefix: all selected (pushed to rank 0's pool
                    // by the pass after the level that resolved them)
  int eq;           // entries sharing the prefix
  int k_eff;        // k clamped to the selectable entries
};

// Sorts rank 0's pool of m entries and writes the best k_eff indices to out[0, k), then -1: the
// width covers both m and k. The merged histograms are no longer read by anyone: they are the
// sort's second buffer. Every thread of the block must call it.
__device__ inline void sort_pool(Shared& s, int m, int k, int k_eff, int32_t* out) {
  const int width = max(m, k);
  Composite* spare = reinterpret_cast<Composite*>(s.merged);
  if (width <= kThreads)
    sort_and_write<1>(s.pool, spare, m, k, k_eff, out);
  else if (width <= 2 * kThreads)
    sort_and_write<2>(s.pool, spare, m, k, k_eff, out);
  else
    sort_and_write<4>(s.pool, spare, m, k, k_eff, out);
}

// Resolves `level` from the team-wide histogram h: extends d's prefix by the bin holding the
// (k_eff - above)-th best entry. Level 0 sets k_eff = min(k, counted entries). S as for pick_bin.
template <class S>
__device__ inline void resolve(const uint32_t* h, int level, int k, Decision& d, S& s) {
  const uint32_t parent = level == 0 ? 0u : d.prefix;
  const int above = level == 0 ? 0 : d.above;
  int k_eff = level == 0 ? 0 : d.k_eff;
  pick_bin(
      h,
      [&](int total) {
        if (level == 0) k_eff = min(k, total);
        return k_eff - above;
      },
      s);
  d.k_eff = k_eff;
  if (k_eff == 0) return;
  d.prefix = (parent << level_bits(level)) | static_cast<uint32_t>(s.pick.bin);
  d.above = above + s.pick.above;
  d.eq = s.pick.count;
}

// The level-0 bin that about want = mu + 3 sqrt(mu) + 5 of 1,024 sampled entries reach, where
// mu = 1,024 k / n is how many of them the k best would hold: fewer than k entries reach it only
// if the sample holds want of the k best (for mu = 0.5, Poisson odds below 1e-7; then level 0
// runs again). A low want keeps the list short. 1 (count everything) when the sample holds fewer.
template <class Source>
__device__ inline uint32_t sample_floor(const Source& src, int n, int k, Shared& s) {
  for (int j = threadIdx.x; j < kBins; j += kThreads) s.hist[j] = 0;
  __syncthreads();
  const uint32_t key = src.key(static_cast<int>(static_cast<long long>(n) * threadIdx.x / kThreads));
  if (key) atomicAdd(&s.hist[key >> 20], 1u);
  __syncthreads();
  const float mu = static_cast<float>(kThreads) * static_cast<float>(k) / static_cast<float>(n);
  const int want = min(kThreads, static_cast<int>(ceilf(mu + 3.0f * sqrtf(mu) + 5.0f)));
  const int total = pick_bin(s.hist, [=](int) { return want; }, s);
  return total >= want ? static_cast<uint32_t>(s.pick.bin) : 1u;
}

// Tie mode after level 2: T is the k-th best key. Pushes the entries above T that level 2 resolved
// and this block's quota of entries equal to T, lowest indices first (tiles of 4 per thread in
// index order, ranked by a block scan).
template <class Team, class Source>
__device__ void take_ties(const Team& team, const Chunk<Source>& c, uint32_t t_key, int quota, Shared& s) {
  const uint32_t parent = t_key >> 10;
  uint32_t* pool_count = team.pool_count(s);
  Composite* pool = team.pool(s);
  auto push = [&](uint32_t key, int i) { pool[claim_slot(pool_count)] = composite(key, i); };
  int taken = 0;
  for (int tile = c.lo; tile < c.hi; tile += 4 * kThreads) {
    const int i0 = tile + 4 * static_cast<int>(threadIdx.x);
    uint32_t key[4];
    int equal = 0;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int i = i0 + q;
      key[q] = i < c.hi ? (c.cache ? c.cache[i - c.base] : c.src.key(i)) : 0u;
      equal += key[q] == t_key;
      if (key[q] > t_key && (key[q] >> 10) == parent) push(key[q], i);
    }
    int total;
    int rank = taken + block_exclusive_scan(equal, s.warp_sum, &total);
#pragma unroll
    for (int q = 0; q < 4; ++q)
      if (key[q] == t_key) {
        if (rank < quota) push(t_key, i0 + q);
        ++rank;
      }
    taken += total;
  }
}

// Selects one row: the keys src gives for entries [0, n) -> out[0, k), k <= kPool. Every thread of
// every block of the team calls it; only rank 0 writes out, and all of its threads return together.
// Team provides rank(), size(), sync() (all threads of the team), merge(s, round) (the team-wide
// sum of s.hist; round counts merges, for buffer parity), peer_hist(s, r) and rank 0's pool(s)
// and pool_count(s). region: `slots` words of shared memory for the chunk's cache or list.
template <class Team, class Source>
__device__ void select_row(const Team& team, const Source& src, int n, int k, int32_t* out, Shared& s,
                           uint32_t* region, int slots) {
  const int t = threadIdx.x;
  Chunk<Source> c = make_chunk(src, n, team.rank(), team.size(), region, slots);
  if (n > kGatherAll) src.prefetch(c.lo, c.hi);
  uint32_t* pool_count = team.pool_count(s);
  Composite* pool = team.pool(s);
  auto push = [&](uint32_t key, int i) { pool[claim_slot(pool_count)] = composite(key, i); };
  if (t == 0) s.pool_count = 0;
  for (int j = t; j < kBins; j += kThreads) s.merged[0][j] = 0;
  team.sync();  // from here peers may add to this block's merged[0] and pool

  int k_eff;
  if (n <= kGatherAll) {
    // A short row: gather every selectable entry.
    sweep<false, false>(c, [&](int i, uint32_t key) {
      if (key) push(key, i);
    });
    team.sync();
    k_eff = min(k, static_cast<int>(s.pool_count));
  } else {
    int round = 0;
    Decision d{};
    uint32_t floor_bin = c.list_key ? sample_floor(src, n, k, s) : 1u;
    for (;;) {
      for (int j = t; j < kBins; j += kThreads) s.hist[j] = 0;
      if (t == 0) s.list_count = 0;
      __syncthreads();
      auto count0 = [&](int i, uint32_t key) {
        const uint32_t bin = key >> 20;
        if (bin < floor_bin) return;  // also every unselectable entry (key 0)
        atomicAdd(&s.hist[bin], 1u);
        if (c.list_key) {
          const uint32_t slot = claim_slot(&s.list_count);
          if (slot < static_cast<uint32_t>(c.list_cap)) {
            c.list_key[slot] = key;
            c.list_index[slot] = i;
          }
        }
      };
      if (c.cache)
        sweep<false, true>(c, count0);
      else
        sweep<false, false>(c, count0);
      resolve(team.merge(s, round++), 0, k, d, s);
      if (floor_bin == 1 || d.k_eff == k) break;
      floor_bin = 1;  // the floor was too high: count everything
    }
    if (c.list_key) {
      c.list_n = static_cast<int>(s.list_count);
      if (c.list_n > c.list_cap) c.list_key = nullptr;  // overflowed: read the row again
    }
    if (d.k_eff == 0) {
      if (team.rank() == 0)
        for (int j = t; j < k; j += kThreads) out[j] = -1;
      return;  // no block touches another's memory after the merge's sync
    }
    for (int level = 0;; ++level) {
      const Level lv(level, d.prefix);
      if (d.above + d.eq <= kPool) {
        // Gather: everything with prefix >= d.prefix (those above and the candidates).
        sweep_again(c, [&](int i, uint32_t key) {
          if (key && lv.digit(key) >= d.prefix && lv.in_parent(key)) push(key, i);
        });
        break;
      }
      if (level == 2) {
        // The full k-th key T = d.prefix, and too many entries equal it.
        if (t == 0) {
          int before = 0;
          for (int r = 0; r < team.rank(); ++r) before += static_cast<int>(team.peer_hist(s, r)[d.prefix & 1023]);
          const int mine = static_cast<int>(s.hist[d.prefix & 1023]);
          s.quota = max(0, min(d.k_eff - d.above - before, mine));
        }
        __syncthreads();
        take_ties(team, c, d.prefix, s.quota, s);
        break;
      }
      // Refine: push the entries this level resolved as above, count the next digit of the rest.
      for (int j = t; j < kBins; j += kThreads) s.hist[j] = 0;
      __syncthreads();
      const int next_sh = level_shift(level + 1);
      sweep_again(c, [&](int i, uint32_t key) {
        if (!key || !lv.in_parent(key)) return;
        const uint32_t p = lv.digit(key);
        if (p > d.prefix)
          push(key, i);
        else if (p == d.prefix)
          atomicAdd(&s.hist[(key >> next_sh) & 1023u], 1u);
      });
      resolve(team.merge(s, round++), level + 1, k, d, s);
    }
    k_eff = d.k_eff;
    team.sync();
  }
  if (team.rank() != 0) return;
  sort_pool(s, static_cast<int>(s.pool_count), k, k_eff, out);
}

}  // namespace frank::cuda::topk_detail
