// frank_linear_bench: cuda::linear's time and read bandwidth per weight type (bf16, FP8 in 128- and
// 32-blocks, FP4) at DeepSeek-V4-Flash's dense shapes and n = 1, 2, 4, 8 tokens, against the read
// bandwidth measured in the same run: how close the FP8 / FP4 GEMVs come to streaming their
// (2-4x smaller) weights at the memory's speed. Then the EXL3 GEMV (cuda::exl3_linear) at
// DeepSeek-V4.1's expert shapes (gate/up [2304, 5120], down [5120, 2304]) for K = 2, 3, 4 bits, two
// codebooks (3INST and MUL1, the cheapest and the dearest to decode) and the same n, beside FP4 at
// the same shape. Results go to stdout as markdown tables.
//   frank_linear_bench     (needs a GPU; exit 2 without one)
//
// Timing: 8 warm-up calls, then 10 spans of 20 back-to-back calls, an event only between spans (an
// event between two calls would stop the next one from starting while this one ends, as a decode
// step's kernels do); per call: the median span / 20, with the spans' min and max. Each call reads another of enough copies of the weight (>= 512
// MB in all) that none is still in L2 (50 MB on an H200) when it is read again. The weights hold
// one repeated byte (0x3a: finite in every format; the kernels' speed does not depend on the
// values). Bytes = the weight's buffer (values and scales); for EXL3 the trellis only (suh and svh,
// 2 bytes per input and output, are shared by the copies).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "cuda_util.h"
#include "frank/cpu/quant/exl3_codebook.h"
#include "frank/cuda/decode_bench.h"
#include "frank/cuda/exl3_gemv.h"
#include "frank/cuda/ops.cuh"

namespace {

namespace cuda = frank::cuda;
using frank_test::DeviceBuffer;

constexpr int kWarmup = 8, kSpans = 10, kPerSpan = 20;
constexpr int64_t kMinBytes = int64_t{512} << 20;

// Microseconds per call: the median span's, and the fastest and slowest span's.
struct Timing {
  double median, min, max;
};

// The time per call of `call(weight)`, each call on another of enough copies of a `bytes`-byte weight.
template <typename Call>
Timing time_calls(int64_t bytes, const Call& call, cudaStream_t stream) {
  const int64_t copies = (kMinBytes + bytes - 1) / bytes;
  std::vector<void*> weights(static_cast<size_t>(copies));
  for (void*& w : weights) {
    CUDA_OK(cudaMalloc(&w, static_cast<size_t>(bytes)));
    CUDA_OK(cudaMemset(w, 0x3a, static_cast<size_t>(bytes)));
  }
  const auto call_copy = [&](int i) { CUDA_OK(call(weights[static_cast<size_t>(i % copies)])); };
  for (int i = 0; i < kWarmup; ++i) call_copy(i);
  std::vector<cudaEvent_t> events(kSpans + 1);
  for (cudaEvent_t& e : events) CUDA_OK(cudaEventCreate(&e));
  CUDA_OK(cudaEventRecord(events[0], stream));
  for (int s = 0; s < kSpans; ++s) {
    for (int i = 0; i < kPerSpan; ++i) call_copy(kWarmup + s * kPerSpan + i);
    CUDA_OK(cudaEventRecord(events[static_cast<size_t>(s + 1)], stream));
  }
  CUDA_OK(cudaEventSynchronize(events.back()));
  std::vector<float> ms(kSpans);
  for (int s = 0; s < kSpans; ++s)
    CUDA_OK(cudaEventElapsedTime(&ms[static_cast<size_t>(s)], events[static_cast<size_t>(s)],
                                 events[static_cast<size_t>(s + 1)]));
  for (cudaEvent_t e : events) CUDA_OK(cudaEventDestroy(e));
  std::sort(ms.begin(), ms.end());
  for (void* w : weights) CUDA_OK(cudaFree(w));
  const double per_call = 1e3 / kPerSpan;
  return {ms[kSpans / 2] * per_call, ms.front() * per_call, ms.back() * per_call};
}

// Time per call of y = W x for n tokens, W [out, in] of type t.
Timing time_linear(cuda::WeightType t, int64_t out, int64_t in, int n, cudaStream_t stream) {
  DeviceBuffer<float> x(static_cast<size_t>(n * in)), y(static_cast<size_t>(n * out));
  CUDA_OK(cudaMemset(x.get(), 0, x.size() * sizeof(float)));
  return time_calls(
      cuda::weight_bytes(t, out, in),
      [&](const void* w) { return cuda::linear(x.get(), in, n, w, t, out, in, y.get(), out, stream); }, stream);
}

// Bytes of an EXL3 trellis of K bits for W [out, in] (both multiples of 128 here).
int64_t trellis_bytes(int64_t out, int64_t in, int bits) { return out * in * bits / 8; }

// Time per cuda::exl3_linear call for n tokens, W [out, in] of K bits.
Timing time_exl3(int64_t out, int64_t in, int bits, frank::Exl3Codebook codebook, int n, cudaStream_t stream) {
  DeviceBuffer<uint16_t> suh(static_cast<size_t>(in)), svh(static_cast<size_t>(out));
  CUDA_OK(cudaMemset(suh.get(), 0x3a, suh.size() * sizeof(uint16_t)));
  CUDA_OK(cudaMemset(svh.get(), 0x3a, svh.size() * sizeof(uint16_t)));
  cuda::Exl3DeviceMatrix view{nullptr, suh.get(), svh.get(), out, in, bits, codebook};
  DeviceBuffer<float> x(static_cast<size_t>(n * in)), y(static_cast<size_t>(n * out)),
      scratch(static_cast<size_t>(cuda::exl3_linear_scratch_floats(view, n)));
  CUDA_OK(cudaMemset(x.get(), 0, x.size() * sizeof(float)));
  return time_calls(
      trellis_bytes(out, in, bits),
      [&](const void* w) {
        view.trellis = static_cast<const uint16_t*>(w);
        return cuda::exl3_linear(view, x.get(), n, scratch.get(), y.get(), stream);
      },
      stream);
}

// The row of one weight's result: time (median, min-max), bytes, rate and its share of the
// measured bandwidth (both at the median).
void print_rate(const Timing& t, double bytes, double bandwidth) {
  const double rate = bytes / (t.median * 1e-6);
  std::printf(" %.1f (%.1f-%.1f) | %.2f | %.0f | %.0f%% |", t.median, t.min, t.max, bytes / 1e6, rate / 1e9,
              100.0 * rate / bandwidth);
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
  // projection's 8192 x 4096 as one matrix, a wide input, and the decode step's other two 64 MB
  // matrices: the query up-projection (32768 x 1024) and the output projection's second half
  // (4096 x 8192).
  const int64_t shapes[][2] = {{1024, 4096}, {4096, 4096}, {8192, 4096}, {4096, 16384}, {32768, 1024}, {4096, 8192}};
  for (const auto& s : shapes)
    for (cuda::WeightType t : {cuda::WeightType::BF16, cuda::WeightType::Fp8Block128, cuda::WeightType::Fp8Block32,
                               cuda::WeightType::Fp4})
      for (int n : {1, 2, 4, 8}) {
        std::printf("| %lldx%lld | %s | %d |", static_cast<long long>(s[0]), static_cast<long long>(s[1]),
                    cuda::weight_type_name(t), n);
        print_rate(time_linear(t, s[0], s[1], n, stream), static_cast<double>(cuda::weight_bytes(t, s[0], s[1])),
                   bandwidth);
        std::printf("\n");
      }
  // V4.1 (hidden 5120, expert intermediate 2304): gate/up and down. EXL3 bytes = the trellis.
  std::printf("\n# cuda::exl3_linear at V4.1 expert shapes, beside FP4 (MXFP4) at the same shape\n\n");
  std::printf("| out x in | codebook | K | n | us | trellis MB | GB/s | of measured | FP4 us | FP4 MB | FP4 GB/s | FP4 "
              "of measured |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  const int64_t expert_shapes[][2] = {{2304, 5120}, {5120, 2304}};
  for (const auto& s : expert_shapes)
    for (int n : {1, 2, 4, 8}) {
      const Timing fp4_us = time_linear(cuda::WeightType::Fp4, s[0], s[1], n, stream);
      const auto fp4_bytes = static_cast<double>(cuda::weight_bytes(cuda::WeightType::Fp4, s[0], s[1]));
      for (frank::Exl3Codebook codebook : {frank::Exl3Codebook::ThreeInst, frank::Exl3Codebook::Mul1})
        for (int bits : {2, 3, 4}) {
          std::printf("| %lldx%lld | %s | %d | %d |", static_cast<long long>(s[0]), static_cast<long long>(s[1]),
                      std::string(frank::cpu::exl3_codebook_name(codebook)).c_str(), bits, n);
          print_rate(time_exl3(s[0], s[1], bits, codebook, n, stream),
                     static_cast<double>(trellis_bytes(s[0], s[1], bits)), bandwidth);
          print_rate(fp4_us, fp4_bytes, bandwidth);
          std::printf("\n");
        }
    }
  CUDA_OK(cudaStreamDestroy(stream));
  return 0;
}
