// The sliding-window ring, K=V row encoding and attention with a sink (contract in ops.cuh).
//
// attend: all heads of a token read the same keys (K = V, one row per position), so a warp takes
// G heads at once (G = 4 where H allows): it reads a key once, as float4s spread over its lanes,
// and uses those registers 2G times: for the G logits (q_h · key, warp sums) and, since K = V, for
// the G weighted sums of values. A block of kWarps warps serves (token, G heads, split): the
// token's keys (window rows, then compressed entries) are cut into `splits` contiguous ranges and
// a block's range is dealt round-robin to its warps. Each warp keeps an online softmax per head
// (running max m, normaliser l, accumulator acc rescaled whenever m grows); the block merges its
// warps' states. With one split that merge takes in the sink (which joins the max and the
// normaliser but adds no value) and writes out; otherwise it writes a partial state to scratch and
// merge_kernel combines the splits with the sink. Splitting spreads a decode token's keys over the
// whole GPU (64 heads / G = 16 blocks would leave most SMs idle and read every key 16 times
// through one SM each), and a warp's next key is loaded while it works on the current one. Any
// number of keys works (HCA's entry count grows with the context) with fixed shared memory. Keys
// are read in their stored format (kv_rows.cuh) and dequantised into those registers: the sums
// stay fp32.
//
// attend_block (DSpark's block, v41_ops.cuh) is the same kernel with another key list: every row
// of the block sees the ring's rows of the W positions before the block and all of the block's
// rows, so its keys are the window keys of the block's last row with their first one moved back to
// W before the block's start (AttendArgs::block_rows).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "frank/cuda/kv_rows.cuh"
#include "frank/cuda/launch.cuh"
#include "frank/cuda/ops.cuh"
#include "frank/cuda/rope_pair.cuh"
#include "frank/cuda/warp_reduce.cuh"

namespace frank::cuda {
namespace {

constexpr int kWarps = 4;                    // warps per attend block
constexpr int kMaxHeadDim = 512;
constexpr int kPerLane = kMaxHeadDim / 128;  // float4s per lane for the widest head
constexpr int kMaxSplits = 16;
constexpr int kTargetBlocks = 2 * 132;       // about two blocks per SM of an H200
constexpr int kMergeThreads = kMaxHeadDim / 4;

// Row t of `rows` [*, dim] fp32 encoded into records[slot(t)], slot(t) = (*start_at + t) % W for
// the ring, t for a plain array (W = 0). Every thread of the block calls it.
template <KvFormat F>
__device__ void store_row(uint8_t* records, int W, const KvRowLayout& l, const float* rows, int t,
                          const int64_t* start_at) {
  const int64_t slot = W > 0 ? (*start_at + t) % W : t;
  store_kv_row<F>(rows + static_cast<int64_t>(t) * l.dim, records + slot * l.row_bytes, l);
}

// One block per row: row `first + blockIdx.x`.
template <KvFormat F>
__global__ void store_rows_kernel(uint8_t* records, int W, KvRowLayout l, const float* rows, int first,
                                  const int64_t* start_at) {
  follow_previous_kernel();
  store_row<F>(records, W, l, rows, first + static_cast<int>(blockIdx.x), start_at);
}

// The keys of token t: j < n_window are the window positions lo, lo+1, .., pos; after them the
// compressed entries (all visible ones for HCA, the indexer's selection for CSA).
struct KeyList {
  const uint8_t* ring;
  int W;
  const uint8_t* chunk_rows;
  int64_t start, lo;
  int n_window;
  const uint8_t* entries;
  const int32_t* selected;  // this token's row, or null
  int64_t row_bytes;

  // The stored row of key j, or null for a selection slot left empty (-1).
  __device__ const uint8_t* operator[](int j) const {
    if (j < n_window) {
      const int64_t p = lo + j;
      return p < start ? ring + (p % W) * row_bytes : chunk_rows + (p - start) * row_bytes;
    }
    const int64_t e = selected ? selected[j - n_window] : j - n_window;
    return e < 0 ? nullptr : entries + e * row_bytes;
  }
};

// Heads per warp: 4, 2 or 1, whichever divides H.
int heads_per_warp(int H) { return H % 4 == 0 ? 4 : H % 2 == 0 ? 2 : 1; }

// The most splits attend uses for n tokens of H heads: enough blocks for about kTargetBlocks.
int max_splits(int n, int H) {
  const int64_t blocks = int64_t{n} * (H / heads_per_warp(H));
  const int64_t s = kTargetBlocks / blocks;
  return static_cast<int>(s < 1 ? 1 : s > kMaxSplits ? kMaxSplits : s);
}

struct AttendArgs {
  const float* q;  // [n, H*hd]
  int H, hd;
  KvRowLayout layout;  // of every key (ring, chunk rows, entries)
  const uint8_t* ring;
  int W;
  const uint8_t* chunk_rows;
  const int64_t* start_at;  // the first token's position, in device memory
  const uint8_t* entries;
  int ratio;
  const int32_t* selected;
  int k_sel;
  const float* sinks;
  float scale;
  const float* inv_freq;  // pairs of them: out's RoPE is undone on its last 2 * pairs dims
  int pairs;
  float* out;  // [n, H*hd]
  int splits;
  float* part_acc;  // splits > 1: [(t*H + h)*splits + s][hd]
  float* part_ml;   // splits > 1: [(t*H + h)*splits + s][2]: m, l
  int block_rows;   // 0: each token's causal window; else DSpark's block of that many rows (attend_block)
  // The ring's store after the keys are read (RingStore): rows [store_first, + store_count).
  uint8_t* store_ring;
  const float* store_rows;
  int store_first, store_count;
};

__device__ float4 axpby(float4 x, float a, float4 y, float b) {
  return make_float4(x.x * a + y.x * b, x.y * a + y.y * b, x.z * a + y.z * b, x.w * a + y.w * b);
}

// A query row's float4s of this lane (zeros past hd4).
__device__ void load_row(const float* row, int hd4, float4 (&v)[kPerLane]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int c = lane + 32 * i;
    v[i] = c < hd4 ? reinterpret_cast<const float4*>(row)[c] : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

// A stored key row's float4s of this lane, dequantised (zeros past hd4, or for a missing row).
template <KvFormat F>
__device__ void load_key(const uint8_t* row, const KvRowLayout& layout, float4 (&v)[kPerLane]) {
  const int lane = threadIdx.x % 32, hd4 = layout.dim / 4;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int c = lane + 32 * i;
    v[i] = row && c < hd4 ? load_kv4<F>(row, c, layout) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

// The weight exp(m_i - mx) of a state with max m_i in a merge with max mx; 0 for a state that saw
// no key (m_i = -inf, also when every state is empty).
__device__ float share(float m_i, float mx) { return m_i == -INFINITY ? 0.f : expf(m_i - mx); }

// Merges `count` (<= Max) softmax states (m_i, l_i, acc_i), read through `st`, into (mx, l, acc[c])
// for float4 column c; with the sink, mx includes it and l gains exp(sink - mx). Every state is
// loaded before any is used: from scratch (merge_kernel) that is one trip to L2 for all of them
// instead of one per state, which made the merge latency-bound. The sums keep the states' order.
template <int Max, class States>
__device__ float4 merge_states(const States& st, int count, int c, bool with_sink, float sink, float& mx, float& l) {
  float m[Max], li[Max];
  float4 acc_i[Max];
#pragma unroll
  for (int i = 0; i < Max; ++i)
    if (i < count) m[i] = st.m(i), li[i] = st.l(i), acc_i[i] = st.acc(i, c);
  mx = with_sink ? sink : -INFINITY;
#pragma unroll
  for (int i = 0; i < Max; ++i)
    if (i < count) mx = fmaxf(mx, m[i]);
  l = with_sink ? expf(sink - mx) : 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int i = 0; i < Max; ++i)
    if (i < count) {
      const float w = share(m[i], mx);
      l += li[i] * w;
      acc = axpby(acc, 1.f, acc_i[i], w);
    }
  return acc;
}

// Writes acc / l to out (the final merge).
// Column c (a float4) of head row th = t*H + h of the output: acc / l, with the keys' RoPE undone
// at the token's position when the layout's last 2*pairs dims are rotated (a float4 holds two
// whole pairs: the rotated dims start at a multiple of 4).
__device__ void store_normalised(const AttendArgs& a, int64_t th, int c, float4 acc, float l) {
  float4 v = make_float4(acc.x / l, acc.y / l, acc.z / l, acc.w / l);
  const int first_pair = (a.hd - 2 * a.pairs) / 2, i = 2 * c - first_pair;
  if (i >= 0) {
    const int64_t position = *a.start_at + th / a.H;
    rotate_pair(v.x, v.y, a.inv_freq[i], position, true);
    rotate_pair(v.z, v.w, a.inv_freq[i + 1], position, true);
  }
  reinterpret_cast<float4*>(a.out + th * a.hd)[c] = v;
}

template <int G>
struct WarpStates {  // the block's warps' states for head g, in shared memory
  const float (*m_)[G];
  const float (*l_)[G];
  const float4 (*acc_)[G][kMaxHeadDim / 4];
  int g;
  __device__ float m(int w) const { return m_[w][g]; }
  __device__ float l(int w) const { return l_[w][g]; }
  __device__ float4 acc(int w, int c) const { return acc_[w][g][c]; }
};

template <KvFormat F, int G>
__global__ void __launch_bounds__(kWarps * 32) attend_kernel(AttendArgs a) {
  __shared__ float s_m[kWarps][G], s_l[kWarps][G];
  __shared__ float4 s_acc[kWarps][G][kMaxHeadDim / 4];

  const int groups = a.H / G;
  const int s = blockIdx.x % a.splits, t = blockIdx.x / a.splits / groups;
  const int h0 = blockIdx.x / a.splits % groups * G;
  const int warp = threadIdx.x / 32, hd4 = a.hd / 4;
  const int64_t start = *a.start_at, pos = start + t;
  // Window keys from, to: (pos - W, pos], or for a block [start - W, its last row].
  const int64_t from = a.block_rows > 0 ? start - a.W : pos - a.W + 1;
  const int64_t to = a.block_rows > 0 ? start + a.block_rows - 1 : pos;
  KeyList keys{a.ring,    a.W,       a.chunk_rows, start, from > 0 ? from : 0,
               0,         a.entries, nullptr,      a.layout.row_bytes};
  keys.n_window = static_cast<int>(to - keys.lo + 1);
  int n_comp = 0;
  if (a.ratio > 0) {
    if (a.selected) keys.selected = a.selected + static_cast<int64_t>(t) * a.k_sel;
    n_comp = a.selected ? a.k_sel : static_cast<int>((pos + 1) / a.ratio);
  }
  const int total = keys.n_window + n_comp, per = (total + a.splits - 1) / a.splits;
  const int k0 = s * per, k1 = k0 + per < total ? k0 + per : total;
  // The warp's first key, when it is a window ring row, is asked for before the wait for the
  // previous kernel: the ring holds rows of earlier calls (this call's are stored after attend),
  // and the position was written before the step. The chunk's own rows and the compressed entries
  // (the indexer's choice, entries pushed in this call) are this call's: after the wait.
  const int j0 = k0 + warp;
  const bool ring_first = j0 < k1 && j0 < keys.n_window && keys.lo + j0 < start;
  const uint8_t* next = ring_first ? keys[j0] : nullptr;
  float4 kn[kPerLane];
  if (ring_first) load_key<F>(next, a.layout, kn);
  follow_previous_kernel();

  float4 qv[G][kPerLane], acc[G][kPerLane];
  float m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    load_row(a.q + (static_cast<int64_t>(t) * a.H + h0 + g) * a.hd, hd4, qv[g]);
    m[g] = -INFINITY, l[g] = 0.f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) acc[g][i] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  // Software pipeline: the next key's row is in flight while this one is used.
  if (!ring_first) {
    next = j0 < k1 ? keys[j0] : nullptr;
    load_key<F>(next, a.layout, kn);
  }
  for (int j = j0; j < k1; j += kWarps) {
    const bool present = next != nullptr;
    float4 kv[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) kv[i] = kn[i];
    next = j + kWarps < k1 ? keys[j + kWarps] : nullptr;
    load_key<F>(next, a.layout, kn);
    if (!present) continue;  // a selection slot left empty
    float d[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
      d[g] = 0.f;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i)
        d[g] += qv[g][i].x * kv[i].x + qv[g][i].y * kv[i].y + qv[g][i].z * kv[i].z + qv[g][i].w * kv[i].w;
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float logit = warp_sum(d[g]) * a.scale;
      if (logit > m[g]) {  // a new max: rescale what is summed so far (by 0 for the first key)
        const float r = expf(m[g] - logit);
        l[g] = l[g] * r + 1.f;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) acc[g][i] = axpby(acc[g][i], r, kv[i], 1.f);
        m[g] = logit;
      } else {
        const float p = expf(logit - m[g]);
        l[g] += p;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) acc[g][i] = axpby(acc[g][i], 1.f, kv[i], p);
      }
    }
  }
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (lane == 0) s_m[warp][g] = m[g], s_l[warp][g] = l[g];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if (lane + 32 * i < hd4) s_acc[warp][g][lane + 32 * i] = acc[g][i];
  }
  __syncthreads();

  // The block's merge, one float4 column of one head per thread and step.
  const bool whole = a.splits == 1;  // this block saw all of the token's keys
  for (int idx = threadIdx.x; idx < G * hd4; idx += blockDim.x) {
    const int g = idx / hd4, c = idx % hd4, h = h0 + g;
    float mx, sum;
    const float4 v = merge_states<kWarps>(WarpStates<G>{s_m, s_l, s_acc, g}, kWarps, c, whole, a.sinks[h], mx, sum);
    const int64_t th = static_cast<int64_t>(t) * a.H + h;
    if (whole) {
      store_normalised(a, th, c, v, sum);
    } else {
      const int64_t part = th * a.splits + s;
      reinterpret_cast<float4*>(a.part_acc + part * a.hd)[c] = v;
      if (c == 0) a.part_ml[2 * part] = mx, a.part_ml[2 * part + 1] = sum;
    }
  }
}

struct SplitStates {  // one (token, head)'s split states in scratch
  const float* ml_;
  const float4* acc_;
  int hd4;
  __device__ float m(int s) const { return ml_[2 * s]; }
  __device__ float l(int s) const { return ml_[2 * s + 1]; }
  __device__ float4 acc(int s, int c) const { return acc_[int64_t{s} * hd4 + c]; }
};

// One block per (token, head): the splits' states with the sink, one float4 column per thread.
// Then the first store_count blocks store the ring's rows: every key was read by attend_kernel,
// which this kernel follows, so no token still needs the rows they overwrite.
template <KvFormat F>
__global__ void __launch_bounds__(kMergeThreads) merge_kernel(AttendArgs a) {
  follow_previous_kernel();
  const int64_t th = blockIdx.x;
  const int h = static_cast<int>(th % a.H), hd4 = a.hd / 4;
  const SplitStates st{a.part_ml + 2 * th * a.splits,
                       reinterpret_cast<const float4*>(a.part_acc + th * a.splits * a.hd), hd4};
  for (int c = threadIdx.x; c < hd4; c += blockDim.x) {
    float mx, sum;
    const float4 v = merge_states<kMaxSplits>(st, a.splits, c, true, a.sinks[h], mx, sum);
    store_normalised(a, th, c, v, sum);
  }
  if (th < a.store_count)
    store_row<F>(a.store_ring, a.W, a.layout, a.store_rows, a.store_first + static_cast<int>(th), a.start_at);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// A layout the kernels can read: what engine::kv_row_layout makes, within the widest head.
bool servable(const KvRowLayout& l) {
  return l.dim >= 4 && l.dim <= kMaxHeadDim && l.dim % 4 == 0 && l.rope_dims % 4 == 0 && l.row_bytes > 0 &&
         l.row_bytes % 8 == 0 && l.nope == l.dim - l.rope_dims;
}

cudaError_t store_rows(uint8_t* records, int W, const KvRowLayout& l, const float* rows, int first, int count,
                       const int64_t* start, cudaStream_t stream) {
  return with_kv_format(l.format, [&](auto format) {
    return launch_dependent(store_rows_kernel<decltype(format)::value>, dim3(count), dim3(128), 0, stream, records, W,
                            l, rows, first, start);
  });
}

}  // namespace

cudaError_t kv_encode(const float* rows, int n, const KvRowLayout& layout, uint8_t* records, cudaStream_t stream) {
  if (!rows || !records || n < 0 || !servable(layout)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return store_rows(records, 0, layout, rows, 0, n, nullptr, stream);
}

cudaError_t window_store(uint8_t* ring, int W, const KvRowLayout& layout, const float* chunk_kv, int n,
                         const int64_t* start, cudaStream_t stream) {
  if (!ring || !chunk_kv || !start || W < 1 || n < 0 || !servable(layout)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const int kept = n < W ? n : W;
  return store_rows(ring, W, layout, chunk_kv, n - kept, kept, start, stream);
}

int64_t attend_scratch_floats(int n, int H, int hd) {
  if (n < 1 || H < 1 || hd < 1) return 0;
  const int s = max_splits(n, H);
  return s > 1 ? int64_t{n} * H * s * (hd + 2) : 0;
}

namespace {

// Launches attend_kernel (and merge_kernel) over a's n tokens, after checking what attend and
// attend_block share (the caller checked the rest); a's split and scratch fields are filled in here.
// The ring's store (a's store_* fields) is the merge's, else a launch of its own after attend_kernel.
cudaError_t launch_attend(AttendArgs a, int n, float* scratch, cudaStream_t stream) {
  // Whole float4s per head row, at most kMaxHeadDim; rows 16-byte aligned at their start.
  if (!servable(a.layout) || !aligned16(a.q) || !aligned16(a.out) || !aligned16(a.ring) || !aligned16(a.chunk_rows))
    return cudaErrorInvalidValue;
  const int hd = a.layout.dim;
  if (a.pairs < 0 || (a.pairs > 0 && !a.inv_freq) || 2 * a.pairs > hd || (hd - 2 * a.pairs) % 4 != 0)
    return cudaErrorInvalidValue;
  if (static_cast<int64_t>(n) * a.H * kMaxSplits > INT32_MAX) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  // As many splits as max_splits allows, whatever the key count: the position (so the key count)
  // is known only on the device, and the same launch must serve every position of a graph. A
  // split left without keys adds an empty state to the merge.
  a.splits = max_splits(n, a.H);
  if (a.splits > 1 && (!scratch || !aligned16(scratch))) return cudaErrorInvalidValue;
  const int64_t parts = int64_t{n} * a.H * a.splits;
  a.part_acc = scratch;
  a.part_ml = a.splits > 1 ? scratch + parts * hd : nullptr;
  const int G = heads_per_warp(a.H);
  const dim3 grid(static_cast<unsigned>(parts / G));
  return with_kv_format(a.layout.format, [&](auto format) {
    constexpr KvFormat F = decltype(format)::value;
    const cudaError_t e = G == 4   ? launch_dependent(attend_kernel<F, 4>, grid, dim3(kWarps * 32), 0, stream, a)
                          : G == 2 ? launch_dependent(attend_kernel<F, 2>, grid, dim3(kWarps * 32), 0, stream, a)
                                   : launch_dependent(attend_kernel<F, 1>, grid, dim3(kWarps * 32), 0, stream, a);
    if (e) return e;
    if (a.splits > 1)  // n * H >= store_count blocks
      return launch_dependent(merge_kernel<F>, dim3(static_cast<unsigned>(int64_t{n} * a.H)), dim3(kMergeThreads), 0,
                              stream, a);
    return a.store_count > 0 ? store_rows(a.store_ring, a.W, a.layout, a.store_rows, a.store_first, a.store_count,
                                          a.start_at, stream)
                             : cudaSuccess;
  });
}

}  // namespace

cudaError_t attend(const float* q, int n, int H, const KvRowLayout& layout, const uint8_t* ring, int W,
                   const uint8_t* chunk_rows, const int64_t* start, const uint8_t* entries, int compress_ratio,
                   const int32_t* selected, int k_sel, const float* sinks, float scale, const float* inv_freq,
                   int pairs, float* out, float* scratch, cudaStream_t stream, RingStore store) {
  if (!q || !ring || !chunk_rows || !start || !sinks || !out || n < 0 || H < 1 || W < 1 || compress_ratio < 0)
    return cudaErrorInvalidValue;
  if (compress_ratio > 0 && (!entries || !aligned16(entries) || (selected && k_sel < 0))) return cudaErrorInvalidValue;
  if (store.ring && (store.ring != ring || !store.rows)) return cudaErrorInvalidValue;
  const int kept = store.ring ? std::min(n, W) : 0;  // window_store's rows
  return launch_attend({q, H, layout.dim, layout, ring, W, chunk_rows, start, entries, compress_ratio, selected, k_sel,
                        sinks, scale, inv_freq, pairs, out, 0, nullptr, nullptr, 0, store.ring, store.rows, n - kept,
                        kept},
                       n, scratch, stream);
}

cudaError_t attend_block(const float* q, int n, int H, const KvRowLayout& layout, const uint8_t* ring, int W,
                         const uint8_t* block_rows, const int64_t* start, const float* sinks, float scale,
                         const float* inv_freq, int pairs, float* out, float* scratch, cudaStream_t stream) {
  if (!q || !ring || !block_rows || !start || !sinks || !out || n < 0 || H < 1 || W < 1) return cudaErrorInvalidValue;
  return launch_attend({q, H, layout.dim, layout, ring, W, block_rows, start, nullptr, 0, nullptr, 0, sinks, scale,
                        inv_freq, pairs, out, 0, nullptr, nullptr, n, nullptr, nullptr, 0, 0},
                       n, scratch, stream);
}

}  // namespace frank::cuda
