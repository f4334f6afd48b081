// Session 17 experiment: where a version-3 top-k of one 8,192-entry row spends its time. A copy
// of select_short (topk_short.cuh) with clock64 stamps by thread 0 after each phase; graphs of
// back-to-back launches (empty kernels, the kernel itself; median per launch); the pool's sort
// alone, whole (sort_and_write<1>) against in two parts at once (sort_parts).
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>
#include "frank/cuda/topk_short.cuh"
using namespace frank::cuda::topk_detail;
#define STAMP(i) do { if (threadIdx.x == 0) st[i] = clock64(); } while (0)
namespace frank::cuda::topk_detail {
template <int E>
__device__ void traced_short(const float* row, int n, int k, int32_t* out, ShortShared& s, long long* st) {
  const int t = threadIdx.x;
  STAMP(0);
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
  STAMP(1);
#pragma unroll
  for (int e = 0; e < E; ++e)
    if (key[e]) atomicAdd(&s.hist[key[e] >> 20], 1u);
  __syncthreads();
  STAMP(2);
  Decision d{};
  resolve(s.hist, 0, k, d, s);
  STAMP(3);
  int pushed[2] = {0, 0};  // entries in each part of the pool
  for (int j = d.k_eff + t; j < k; j += kThreads) out[j] = -1;  // fewer selectable entries than k
  if (d.k_eff == 0) return;
  for (int level = 0;; ++level) {
    const int sh = level_shift(level);
    // Only entries in the parent bin (level > 0) take part in this level.
    const int parent_sh = level == 0 ? 32 : level_shift(level - 1);
    const uint32_t parent = level == 0 ? 0u : d.prefix >> level_bits(level);
    auto in_parent = [=](uint32_t key) { return parent_sh == 32 || (key >> parent_sh) == parent; };
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
        if (!key[e] || !in_parent(key[e])) continue;
        const uint32_t p = key[e] >> sh;
        if (p >= d.prefix) take[p == d.prefix] |= 1u << e;
      }
      push_parts(key, take, s, &pushed[0], d.above, &pushed[1]);
      __syncthreads();  // both parts are complete; the histogram is read no more
      STAMP(4);
      if (t == 0) st[8] = d.above, st[9] = d.eq;
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
        if ((key[e] > t_key && in_parent(key[e])) || (equal && rank < quota)) take[0] |= 1u << e;
        taken += total;
      }
      push_parts(key, take, s, &pushed[0], 0, &pushed[1]);
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
      if (!key[e] || !in_parent(key[e])) continue;
      const uint32_t p = key[e] >> sh;
      if (p > d.prefix)
        take[0] |= 1u << e;
      else if (p == d.prefix)
        atomicAdd(&s.hist[(key[e] >> next_sh) & 1023u], 1u);
    }
    push_parts(key, take, s, &pushed[0], 0, &pushed[1]);
    __syncthreads();
    resolve(s.hist, level + 1, k, d, s);
  }
}

}
template <int E>
__global__ void __launch_bounds__(kThreads, 1) traced(const float* row, int n, int k, int32_t* out, long long* st) {
  __shared__ ShortShared s;
  traced_short<E>(row, n, k, out, s, st);
}
template <int E>
__global__ void __launch_bounds__(kThreads, 1) plain(const float* row, int n, int k, int32_t* out) {
  __shared__ ShortShared s;
  select_short<E>(row, n, k, out, s);
}
__global__ void empty_kernel() {}

// The pool sort alone on random composites: whole (above + eq entries) or in two parts.
template <bool kParts>
__global__ void __launch_bounds__(kThreads, 1) sort_only(const Composite* in, int above, int eq, int k, int32_t* out, long long* st) {
  __shared__ ShortShared s;
  for (int j = threadIdx.x; j < above + eq; j += kThreads) s.pool[j] = in[j];
  __syncthreads();
  const long long t0 = clock64();
  if (kParts) sort_parts(s, above, eq, k, out); else sort_and_write<1>(s.pool, s.spare, above + eq, k, k, out);
  if (threadIdx.x == 0) st[0] = clock64() - t0;  // thread 0 sorts in part 0 (the wider one here)
}
template <bool kParts>
long long sort_cycles(const Composite* in, int above, int eq, int k, int32_t* out, long long* st) {
  std::vector<long long> v;
  for (int r = 0; r < 21; ++r) {
    sort_only<kParts><<<1, kThreads>>>(in, above, eq, k, out, st);
    long long h; cudaMemcpy(&h, st, 8, cudaMemcpyDeviceToHost); v.push_back(h);
  }
  std::sort(v.begin(), v.end());
  return v[10];
}

template <class Launch>
float graph_us(Launch launch, int reps) {
  cudaStream_t st; cudaStreamCreate(&st);
  cudaGraph_t g; cudaGraphExec_t x;
  cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
  for (int i = 0; i < reps; ++i) launch(st);
  cudaStreamEndCapture(st, &g);
  cudaGraphInstantiate(&x, g, 0);
  cudaGraphLaunch(x, st); cudaStreamSynchronize(st);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> v;
  for (int r = 0; r < 9; ++r) {
    cudaEventRecord(a, st); cudaGraphLaunch(x, st); cudaEventRecord(b, st); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); v.push_back(ms * 1000 / reps);
  }
  std::sort(v.begin(), v.end());
  return v[4];
}

int main() {
  const int n = 8192, k = 512;
  std::vector<float> h(n);
  std::mt19937 rng(7); std::normal_distribution<float> nd;
  for (float& x : h) x = nd(rng);
  float* row; int32_t* out; long long* st;
  cudaMalloc(&row, n * 4); cudaMalloc(&out, k * 4); cudaMalloc(&st, 16 * 8);
  cudaMemcpy(row, h.data(), n * 4, cudaMemcpyHostToDevice);
  std::vector<std::vector<long long>> d(5);
  long long above = 0, eq = 0;
  for (int r = 0; r < 21; ++r) {
    traced<8><<<1, kThreads>>>(row, n, k, out, st);
    long long hs[16]; cudaMemcpy(hs, st, sizeof hs, cudaMemcpyDeviceToHost);
    for (int i = 1; i < 5; ++i) d[i].push_back(hs[i] - hs[i - 1]);
    d[0].push_back(hs[4] - hs[0]);
    above = hs[8], eq = hs[9];
  }
  const char* names[5] = {"start to sort", "clear hist (and the keys' loads)", "level-0 atomics", "resolve level 0", "gather, two parts"};
  std::printf("n=%d k=%d: N(0,1) row, above %lld, eq %lld; cycles, median of 21\n", n, k, above, eq);
  for (int i = 0; i < 5; ++i) { std::sort(d[i].begin(), d[i].end()); std::printf("%-34s %7lld\n", names[i], d[i][10]); }
  std::vector<Composite> pool(1024);
  std::mt19937_64 r64(11);
  for (auto& c : pool) c = r64();
  Composite* din; cudaMalloc(&din, 1024 * 8); cudaMemcpy(din, pool.data(), 1024 * 8, cudaMemcpyHostToDevice);
  std::printf("sort of 430 + 117 entries, cycles: whole %lld, two parts %lld\n", sort_cycles<false>(din, 430, 117, k, out, st),
              sort_cycles<true>(din, 430, 117, k, out, st));
  const int reps = 200;
  std::printf("graph of %d launches, us per launch: empty %.2f, version 3 n=8192 %.2f, n=1024 %.2f\n", reps,
    graph_us([](cudaStream_t s){ empty_kernel<<<1, 32, 0, s>>>(); }, reps),
    graph_us([&](cudaStream_t s){ plain<8><<<1, kThreads, 0, s>>>(row, n, k, out); }, reps),
    graph_us([&](cudaStream_t s){ plain<4><<<1, kThreads, 0, s>>>(row, 1024, k, out); }, reps));
  return 0;
}
