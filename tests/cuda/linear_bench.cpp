// frank_linear_bench: cuda::linear's time and read bandwidth per weight type (bf16, FP8 in 128- and
// 32-blocks, FP4) at DeepSeek-V4-Flash's dense shapes and n = 1, 2, 4, 8 tokens, against the read
// bandwidth measured in the same run: how close the FP8 / FP4 GEMVs come to streaming their
// (2-4x smaller) weights at the memory's speed. Results go to stdout as a markdown table.
//   frank_linear_bench     (needs a GPU; exit 2 without one)
//
// Timing: 8 warm-up calls, then 200 calls timed by events as one span; each call reads another of
// enough copies of the weight (>= 512 MB in all) that none is still in L2 (50 MB on an H200) when
// it is read again. The weights hold one repeated byte (0x3a: finite in every format; the kernels'
// speed does not depend on the values). Bytes = the weight's buffer (values and scales).
#include <cstdio>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "cuda_util.h"
#include "frank/cuda/decode_bench.h"
#include "frank/cuda/ops.cuh"

namespace {

namespace cuda = frank::cuda;
using frank_test::DeviceBuffer;

constexpr int kWarmup = 8, kTimed = 200;
constexpr int64_t kMinBytes = int64_t{512} << 20;

// Microseconds per call of y = W x for n tokens, W [out, in] of type t.
double time_linear(cuda::WeightType t, int64_t out, int64_t in, int n, cudaStream_t stream) {
  const int64_t bytes = cuda::weight_bytes(t, out, in);
  const int64_t copies = (kMinBytes + bytes - 1) / bytes;
  std::vector<void*> weights(static_cast<size_t>(copies));
  for (void*& w : weights) {
    CUDA_OK(cudaMalloc(&w, static_cast<size_t>(bytes)));
    CUDA_OK(cudaMemset(w, 0x3a, static_cast<size_t>(bytes)));
  }
  DeviceBuffer<float> x(static_cast<size_t>(n * in)), y(static_cast<size_t>(n * out));
  CUDA_OK(cudaMemset(x.get(), 0, x.size() * sizeof(float)));
  const auto call = [&](int i) {
    CUDA_OK(cuda::linear(x.get(), in, n, weights[static_cast<size_t>(i % copies)], t, out, in, y.get(), out, stream));
  };
  for (int i = 0; i < kWarmup; ++i) call(i);
  cudaEvent_t begin, end;
  CUDA_OK(cudaEventCreate(&begin));
  CUDA_OK(cudaEventCreate(&end));
  CUDA_OK(cudaEventRecord(begin, stream));
  for (int i = 0; i < kTimed; ++i) call(kWarmup + i);
  CUDA_OK(cudaEventRecord(end, stream));
  CUDA_OK(cudaEventSynchronize(end));
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, begin, end));
  CUDA_OK(cudaEventDestroy(begin));
  CUDA_OK(cudaEventDestroy(end));
  for (void* w : weights) CUDA_OK(cudaFree(w));
  return ms * 1e3 / kTimed;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "frank_linear_bench: no CUDA device\n");
    return 2;
  }
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  const double bandwidth = cuda::measure_read_bandwidth(stream);
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# cuda::linear by weight type, %s; read bandwidth measured now: %.0f GB/s\n\n", prop.name,
              bandwidth / 1e9);
  std::printf("| out x in | type | n | us | weight MB | GB/s | of measured |\n|---|---|---|---|---|---|---|\n");
  // V4-Flash (hidden 4096): a 1024-row down projection, a square one, the 8 x 1024 grouped output
  // projection's 8192 x 4096 as one matrix, and a wide input.
  const int64_t shapes[][2] = {{1024, 4096}, {4096, 4096}, {8192, 4096}, {4096, 16384}};
  for (const auto& s : shapes)
    for (cuda::WeightType t : {cuda::WeightType::BF16, cuda::WeightType::Fp8Block128, cuda::WeightType::Fp8Block32,
                               cuda::WeightType::Fp4})
      for (int n : {1, 2, 4, 8}) {
        const double us = time_linear(t, s[0], s[1], n, stream);
        const double bytes = static_cast<double>(cuda::weight_bytes(t, s[0], s[1]));
        const double rate = bytes / (us * 1e-6);
        std::printf("| %lldx%lld | %s | %d | %.1f | %.2f | %.0f | %.0f%% |\n", static_cast<long long>(s[0]),
                    static_cast<long long>(s[1]), cuda::weight_type_name(t), n, us, bytes / 1e6, rate / 1e9,
                    100.0 * rate / bandwidth);
      }
  CUDA_OK(cudaStreamDestroy(stream));
  return 0;
}
