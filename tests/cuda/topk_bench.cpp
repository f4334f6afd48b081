// Times the top-k kernels with CUDA events: each configuration's launches are captured in one
// CUDA graph (an event pair around every launch) so they run back to back without host gaps.
// "cold": every launch reads rows that no recent launch touched (rotating through a 256 MB arena,
// 4x the H200's L2), so the scores come from HBM; "hot": the same rows every time (L2-resident,
// as when the scores come straight from the indexer's GEMM). Scores are N(0, 1).
#include "topk_bench.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "cuda_util.h"
#include "frank/cuda/topk.cuh"
#include "topk_cases.h"

namespace frank_test {
namespace {

constexpr size_t kArena = size_t{64} << 20;  // floats (256 MB)
constexpr int kWarmup = 10;
constexpr int kK = 512;

struct Stats {
  double med = 0, min = 0, max = 0;  // microseconds
};

std::vector<float> normal_arena() {
  std::vector<float> a(kArena);
  const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&a, t, threads] {
      Rng r{0x5eed0000ull + t};
      for (size_t i = t; i < a.size(); i += threads) a[i] = r.normal();
    });
  for (std::thread& th : pool) th.join();
  return a;
}

// Median/min/max of each launch's own event pair, after kWarmup launches. The launches go into one
// CUDA graph so the GPU runs them back to back; if the graph path fails, they are enqueued
// directly on the stream instead (then short kernels also time the host's launch), and *graph
// says so.
Stats time_launches(int version, int cluster, int rows, int n, const float* arena, int32_t* out, bool cold,
                    int launches, bool* graph) {
  const int total = kWarmup + launches;
  const size_t span = (static_cast<size_t>(rows) * n + 63) / 64 * 64;  // 256-byte aligned inputs
  const size_t slots = kArena / span;
  const size_t stride = std::max<size_t>(1, slots / total);
  std::vector<cudaEvent_t> start(total), stop(total);
  for (int i = 0; i < total; ++i) {
    CUDA_OK(cudaEventCreate(&start[i]));
    CUDA_OK(cudaEventCreate(&stop[i]));
  }
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // In a capture, only "external" event records become record nodes of the graph.
  auto enqueue = [&](unsigned record_flags) {
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < total && !e; ++i) {
      const float* in = arena + (cold ? (i * stride) % slots * span : 0);
      e = cudaEventRecordWithFlags(start[i], stream, record_flags);
      if (!e) e = frank::cuda::topk(version, in, rows, n, kK, out, stream, cluster);
      if (!e) e = cudaEventRecordWithFlags(stop[i], stream, record_flags);
    }
    return e;
  };
  auto elapsed = [&](std::vector<double>& us) {
    us.clear();
    for (int i = kWarmup; i < total; ++i) {
      float ms = 0;
      if (const cudaError_t e = cudaEventElapsedTime(&ms, start[i], stop[i])) return e;
      us.push_back(1000.0 * ms);
    }
    return cudaSuccess;
  };
  std::vector<double> us;
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (!e) {
    const cudaError_t launched = enqueue(cudaEventRecordExternal);
    e = cudaStreamEndCapture(stream, &g);
    if (!e) e = launched;
  }
  if (!e) e = cudaGraphInstantiate(&exec, g, 0);
  if (!e) e = cudaGraphLaunch(exec, stream);
  if (!e) e = cudaStreamSynchronize(stream);
  if (!e) e = elapsed(us);
  *graph = !e;
  if (e) {
    cudaGetLastError();  // clear the graph path's error; the direct path must succeed
    CUDA_OK(enqueue(cudaEventRecordDefault));
    CUDA_OK(cudaStreamSynchronize(stream));
    CUDA_OK(elapsed(us));
  }
  if (exec) CUDA_OK(cudaGraphExecDestroy(exec));
  if (g) CUDA_OK(cudaGraphDestroy(g));
  CUDA_OK(cudaStreamDestroy(stream));
  for (int i = 0; i < total; ++i) {
    CUDA_OK(cudaEventDestroy(start[i]));
    CUDA_OK(cudaEventDestroy(stop[i]));
  }
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us.front(), us.back()};
}

struct Row {
  int rows, n, auto_cluster;
  Stats cold[kNumTopKVariants], hot[kNumTopKVariants];  // kTopKVariants' order
};

double gbps(const Row& r, double us) { return 4.0 * r.rows * r.n / (us * 1e3); }

}  // namespace

int run_topk_bench(int launches) {
  const std::vector<float> host = normal_arena();
  DeviceBuffer<float> arena(kArena);
  DeviceBuffer<int32_t> out(8 * kK);
  CUDA_OK(cudaMemcpy(arena.get(), host.data(), kArena * sizeof(float), cudaMemcpyHostToDevice));
  for (const Variant& v : kTopKVariants)  // first launches: module load, device setup
    CUDA_OK(frank::cuda::topk(v.version, arena.get(), 8, 1 << 20, kK, out.get(), nullptr, v.cluster));
  CUDA_OK(cudaDeviceSynchronize());

  std::vector<Row> table;
  bool graph = true;
  for (int rows : {1, 2, 4, 8})
    for (int n : {1 << 10, 1 << 12, 1 << 13, 1 << 14, 1 << 16, 1 << 18, 1 << 20}) {
      Row r{rows, n, frank::cuda::topk_cluster_size(n), {}, {}};
      for (int v = 0; v < kNumTopKVariants; ++v) {
        const Variant& var = kTopKVariants[v];
        bool g1, g2;
        r.cold[v] = time_launches(var.version, var.cluster, rows, n, arena.get(), out.get(), true, launches, &g1);
        r.hot[v] = time_launches(var.version, var.cluster, rows, n, arena.get(), out.get(), false, launches, &g2);
        graph = graph && g1 && g2;
      }
      table.push_back(r);
    }

  std::printf("\nlaunches %s\n", graph ? "in one CUDA graph per configuration" : "enqueued directly (graph path failed)");
  std::printf("median us over %d launches, k=%d; v2.cN = cluster of N blocks per row; v3 = registers up to %d\n",
              launches, kK, frank::cuda::kTopKShortMax);
  std::printf("rows  length |   cold: v1   v2.c2   v2.c4   v2.c8      v3 |    hot: v1   v2.c2   v2.c4   v2.c8      v3\n");
  for (const Row& r : table) {
    std::printf("%4d %7d |", r.rows, r.n);
    for (int v : {0, 2, 3, 4, 5}) std::printf(" %7.1f", r.cold[v].med);
    std::printf(" |      ");
    for (int v : {0, 2, 3, 4, 5}) std::printf(" %7.1f", r.hot[v].med);
    std::printf("\n");
  }

  std::printf("\ncold (HBM) rows, k=%d, %d launches: median [min-max] us, GB/s = rows*length*4 B / median\n", kK,
              launches);
  std::printf("rows  length     MB |  v1: median [min - max]     GB/s |  v2 (C): median [min - max]     GB/s | "
              "winner\n");
  for (const Row& r : table) {
    const Stats& a = r.cold[0];
    const Stats& b = r.cold[1];
    const double ratio = a.med / b.med;
    std::printf("%4d %7d %6.2f | %7.1f [%7.1f - %7.1f] %7.1f | %2d: %7.1f [%7.1f - %7.1f] %7.1f | ", r.rows, r.n,
                4.0 * r.rows * r.n / 1e6, a.med, a.min, a.max, gbps(r, a.med), r.auto_cluster, b.med, b.min, b.max,
                gbps(r, b.med));
    if (r.auto_cluster == 1)
      std::printf("same kernel (C=1)\n");
    else
      std::printf("%s %.2fx\n", ratio > 1.0 ? "v2" : "v1", ratio > 1.0 ? ratio : 1.0 / ratio);
  }
  return 0;
}

}  // namespace frank_test
