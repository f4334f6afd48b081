// The sliding-window ring and attention with a sink (contract in ops.cuh).
//
// attend: one block of kWarps warps per (token, head). The token's keys (window rows, then
// compressed entries) are dealt round-robin to the warps; a warp reads a key once, as float4s
// spread over its lanes, and uses those registers twice: for the logit (q · key, a warp sum) and,
// since K = V, for the weighted sum of values. Each warp keeps an online softmax (running max m,
// normaliser l, accumulator acc rescaled whenever m grows); the block then merges the warps' states
// together with the sink, which joins the max and the normaliser but adds no value. Any number of
// keys works (HCA's entry count grows with the context) with fixed shared memory.
#include <cmath>
#include <cstdint>

#include "frank/cuda/ops.cuh"
#include "frank/cuda/launch.cuh"
#include "frank/cuda/warp_reduce.cuh"

namespace frank::cuda {
namespace {

constexpr int kWarps = 16;
constexpr int kMaxHeadDim = 512;
constexpr int kPerLane = kMaxHeadDim / 128;  // float4s per lane for the widest head

__global__ void window_store_kernel(float* ring, int W, int hd, const float* chunk_kv, int first,
                                    const int64_t* start_at) {
  follow_previous_kernel();
  const int64_t start = *start_at;
  const int t = first + blockIdx.x;
  float* dst = ring + ((start + t) % W) * hd;
  const float* src = chunk_kv + static_cast<int64_t>(t) * hd;
  for (int c = threadIdx.x; c < hd; c += blockDim.x) dst[c] = src[c];
}

// The keys of token t: j < n_window are the window positions lo, lo+1, .., pos; after them the
// compressed entries (all visible ones for HCA, the indexer's selection for CSA).
struct KeyList {
  const float* ring;
  int W;
  const float* chunk_kv;
  int64_t start, lo;
  int n_window;
  const float* entries;
  const int32_t* selected;  // this token's row, or null
  int hd;

  // The row of key j, or null for a selection slot left empty (-1).
  __device__ const float* operator[](int j) const {
    if (j < n_window) {
      const int64_t p = lo + j;
      return p < start ? ring + (p % W) * hd : chunk_kv + (p - start) * hd;
    }
    const int64_t e = selected ? selected[j - n_window] : j - n_window;
    return e < 0 ? nullptr : entries + e * hd;
  }
};

__device__ float4 axpby(float4 x, float a, float4 y, float b) {
  return make_float4(x.x * a + y.x * b, x.y * a + y.y * b, x.z * a + y.z * b, x.w * a + y.w * b);
}

__global__ void __launch_bounds__(kWarps * 32)
    attend_kernel(const float* q, int H, int hd, const float* ring, int W, const float* chunk_kv,
                  const int64_t* start_at, const float* entries, int ratio, const int32_t* selected, int k_sel,
                  const float* sinks, float scale, float* out) {
  follow_previous_kernel();
  const int64_t start = *start_at;
  __shared__ float s_max[kWarps], s_sum[kWarps];
  __shared__ float4 s_acc[kWarps][kMaxHeadDim / 4];

  const int t = blockIdx.x / H, h = blockIdx.x % H;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int hd4 = hd / 4;
  const int64_t pos = start + t;
  KeyList keys{ring, W, chunk_kv, start, pos - W + 1 > 0 ? pos - W + 1 : 0, 0, entries, nullptr, hd};
  keys.n_window = static_cast<int>(pos - keys.lo + 1);
  int n_comp = 0;
  if (ratio > 0) {
    if (selected) keys.selected = selected + static_cast<int64_t>(t) * k_sel;
    n_comp = selected ? k_sel : static_cast<int>((pos + 1) / ratio);
  }

  const int64_t row = (static_cast<int64_t>(t) * H + h) * hd;
  const float4* q4 = reinterpret_cast<const float4*>(q + row);
  float4 qv[kPerLane], acc[kPerLane];
  for (int i = 0; i < kPerLane; ++i) {
    const int c = lane + 32 * i;
    qv[i] = c < hd4 ? q4[c] : make_float4(0.f, 0.f, 0.f, 0.f);
    acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float m = -INFINITY, l = 0.f;
  for (int j = warp; j < keys.n_window + n_comp; j += kWarps) {
    const float* key = keys[j];
    if (!key) continue;
    const float4* k4 = reinterpret_cast<const float4*>(key);
    float4 kv[kPerLane];
    float d = 0.f;
    for (int i = 0; i < kPerLane; ++i) {
      const int c = lane + 32 * i;
      kv[i] = c < hd4 ? k4[c] : make_float4(0.f, 0.f, 0.f, 0.f);
      d += qv[i].x * kv[i].x + qv[i].y * kv[i].y + qv[i].z * kv[i].z + qv[i].w * kv[i].w;
    }
    const float logit = warp_sum(d) * scale;
    if (logit > m) {  // a new max: rescale what is summed so far (by 0 for the first key)
      const float r = expf(m - logit);
      l = l * r + 1.f;
      for (int i = 0; i < kPerLane; ++i) acc[i] = axpby(acc[i], r, kv[i], 1.f);
      m = logit;
    } else {
      const float p = expf(logit - m);
      l += p;
      for (int i = 0; i < kPerLane; ++i) acc[i] = axpby(acc[i], 1.f, kv[i], p);
    }
  }
  if (lane == 0) {
    s_max[warp] = m;
    s_sum[warp] = l;
  }
  for (int i = 0; i < kPerLane; ++i)
    if (lane + 32 * i < hd4) s_acc[warp][lane + 32 * i] = acc[i];
  __syncthreads();

  // Merge: mx = max(sink, every warp's max); each warp's share is scaled by exp(m_w - mx) (0 for a
  // warp that saw no key: m_w = -inf).
  const float sink = sinks[h];
  float mx = sink;
  for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s_max[w]);
  float denom = expf(sink - mx);
  for (int w = 0; w < kWarps; ++w) denom += s_sum[w] * expf(s_max[w] - mx);
  float4* o4 = reinterpret_cast<float4*>(out + row);
  for (int c = threadIdx.x; c < hd4; c += blockDim.x) {
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int w = 0; w < kWarps; ++w) sum = axpby(sum, 1.f, s_acc[w][c], expf(s_max[w] - mx));
    o4[c] = make_float4(sum.x / denom, sum.y / denom, sum.z / denom, sum.w / denom);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

cudaError_t window_store(float* ring, int W, int hd, const float* chunk_kv, int n, const int64_t* start,
                         cudaStream_t stream) {
  if (!ring || !chunk_kv || !start || W < 1 || hd < 1 || n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const int kept = n < W ? n : W;
  if (const cudaError_t e = launch_dependent(window_store_kernel, dim3(kept), dim3(128), 0, stream, ring, W, hd,
                                             chunk_kv, n - kept, start))
    return e;
  return cudaGetLastError();
}

cudaError_t attend(const float* q, int n, int H, int hd, const float* ring, int W, const float* chunk_kv,
                   const int64_t* start, const float* entries, int compress_ratio, const int32_t* selected, int k_sel,
                   const float* sinks, float scale, float* out, cudaStream_t stream) {
  if (!q || !ring || !chunk_kv || !start || !sinks || !out || n < 0 || H < 1 || W < 1 || compress_ratio < 0)
    return cudaErrorInvalidValue;
  // Whole float4s per head row, at most kMaxHeadDim.
  if (hd < 4 || hd > kMaxHeadDim || hd % 4 != 0 || !aligned16(q) || !aligned16(out) || !aligned16(ring) ||
      !aligned16(chunk_kv))
    return cudaErrorInvalidValue;
  if (compress_ratio > 0 && (!entries || !aligned16(entries) || (selected && k_sel < 0))) return cudaErrorInvalidValue;
  if (static_cast<int64_t>(n) * H > INT32_MAX) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (const cudaError_t e =
          launch_dependent(attend_kernel, dim3(n * H), dim3(kWarps * 32), 0, stream, q, H, hd, ring, W, chunk_kv, start,
                           entries, compress_ratio, selected, k_sel, sinks, scale, out))
    return e;
  return cudaGetLastError();
}

}  // namespace frank::cuda
