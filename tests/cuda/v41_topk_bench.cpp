// Times the V4.1 two-level top-k (frank/cuda/v41_ops.cuh) at the real shapes (candidate_topk_blocks
// 2,048, candidate_block_size 8, index_topk 512, ratio 2): the median of N launches, each between
// its own pair of CUDA events after a few warm-up launches. The scores are N(0, 1) and stay in L2
// from one launch to the next (as when they come straight from the indexer's GEMM), so the table
// compares the work of the two level-2 paths, not HBM reads.
#include "v41_topk_bench.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda_util.h"
#include "frank/cuda/v41_ops.cuh"

namespace frank_test {
namespace {

constexpr int kWarmup = 5;
constexpr int kTopkBlocks = 2048, kBlockSize = 8, kTopk = 512, kRatio = 2;

// The median in microseconds of `launches` runs of enqueue (which returns a cudaError_t).
template <class Enqueue>
float median_us(int launches, Enqueue enqueue) {
  cudaEvent_t begin, end;
  CUDA_OK(cudaEventCreate(&begin));
  CUDA_OK(cudaEventCreate(&end));
  for (int i = 0; i < kWarmup; ++i) CUDA_OK(enqueue());
  std::vector<float> us;
  for (int i = 0; i < launches; ++i) {
    CUDA_OK(cudaEventRecord(begin));
    CUDA_OK(enqueue());
    CUDA_OK(cudaEventRecord(end));
    CUDA_OK(cudaEventSynchronize(end));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, begin, end));
    us.push_back(1000.0f * ms);
  }
  CUDA_OK(cudaEventDestroy(begin));
  CUDA_OK(cudaEventDestroy(end));
  std::sort(us.begin(), us.end());
  return us.empty() ? 0.0f : us[us.size() / 2];
}

}  // namespace

int run_v41_topk_bench(int launches) {
  namespace fc = frank::cuda;
  std::printf("V4.1 two-level top-k, median of %d launches (us): topk_blocks %d, block %d, topk %d, ratio %d\n",
              launches, kTopkBlocks, kBlockSize, kTopk, kRatio);
  std::printf("%5s %7s %10s %10s %10s %8s\n", "rows", "cols", "level1", "unfused", "fused", "speedup");
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int rows : {1, 8})
    for (int cols : {16384, 65536, 262144, 524288}) {
      std::vector<float> h(static_cast<size_t>(rows) * cols);
      for (float& x : h) x = normal(rng);
      DeviceBuffer<float> scores(h.size());
      CUDA_OK(cudaMemcpy(scores.get(), h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
      const size_t n = static_cast<size_t>(rows);
      DeviceBuffer<int32_t> blocks(n * kTopkBlocks), selected(n * kTopk);
      DeviceBuffer<uint8_t> mask(h.size());
      DevicePosition position;
      const int64_t* start = position.at(static_cast<int64_t>(cols) * kRatio - rows);  // the last row sees all
      const float level1 = median_us(launches, [&] {
        return fc::candidate_blocks(scores.get(), rows, cols, start, kRatio, kTopkBlocks, kBlockSize, blocks.get(),
                                    nullptr);
      });
      const float unfused = median_us(launches, [&] {
        const cudaError_t e =
            fc::candidate_mask(blocks.get(), rows, kTopkBlocks, kBlockSize, cols, cols, mask.get(), nullptr);
        return e ? e
                 : fc::select_entries(scores.get(), rows, cols, start, kRatio, mask.get(), kTopk, selected.get(),
                                      nullptr);
      });
      const float fused = median_us(launches, [&] {
        return fc::select_entries_in_blocks(scores.get(), rows, cols, start, kRatio, blocks.get(), kTopkBlocks,
                                            kBlockSize, cols, kTopk, selected.get(), nullptr);
      });
      std::printf("%5d %7d %10.1f %10.1f %10.1f %7.2fx\n", rows, cols, level1, unfused, fused,
                  fused > 0 ? unfused / fused : 0.0f);
    }
  return 0;
}

}  // namespace frank_test
