#pragma once
// Helpers of the MoE op checks (ops_check_moe.cpp, ops_check_exl3_moe.cpp): random draws, device
// copies, the rerun of an op for bit-identical output, random FP8 / FP4 weights.
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "cuda_util.h"
#include "frank/core/linear_weight.h"
#include "frank/core/splitmix64.h"
#include "frank/cpu/quant/quant_formats.h"
#include "frank/cuda/weight_format.h"
#include "ops_check.h"

namespace frank_test {

using frank::cuda::WeightType;

struct Rng {
  frank::SplitMix64 g;
  float uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(g() >> 40) * 0x1p-24f; }
  int below(int n) { return static_cast<int>(g() % static_cast<uint64_t>(n)); }
};

template <class T>
inline std::unique_ptr<DeviceBuffer<T>> upload(const std::vector<T>& h) {
  auto d = std::make_unique<DeviceBuffer<T>>(h.size());
  CUDA_OK(cudaMemcpy(d->get(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <class T>
inline std::vector<T> download(const DeviceBuffer<T>& d, size_t count) {
  std::vector<T> h(count);
  CUDA_OK(cudaMemcpy(h.data(), d.get(), count * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

// k distinct experts drawn from pool, or k draws with repeats.
inline std::vector<int32_t> draw_experts(Rng& r, std::vector<int32_t> pool, int k, bool distinct) {
  std::vector<int32_t> out;
  for (int j = 0; j < k; ++j) {
    const int i = r.below(static_cast<int>(pool.size()));
    out.push_back(pool[i]);
    if (distinct) pool.erase(pool.begin() + i);
  }
  return out;
}

inline int bad_argument(const char* op, const char* what, cudaError_t e) {
  return report(op, what, e == cudaErrorInvalidValue ? 0.0 : 1.0, 0.0);
}

// A call to moe_experts that must be refused before anything runs: cudaErrorInvalidValue, and
// `out` (zeroed first) keeps its bytes.
inline int refused_before_writing(const char* what, DeviceBuffer<float>& out, const std::function<cudaError_t()>& call) {
  CUDA_OK(cudaMemset(out.get(), 0, out.size() * sizeof(float)));
  int failures = bad_argument("moe_experts", what, call());
  const std::vector<float> kept = download(out, out.size());
  failures += report("moe_experts", "bad args: out written before the refusal",
                     static_cast<double>(std::count_if(kept.begin(), kept.end(), [](float v) { return v != 0.0f; })),
                     0);
  return failures;
}

inline float round_bf16(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  return std::bit_cast<float>((b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u);
}

// The output of moe_experts once more, on a stream of its own (where the down kernel overlaps the
// end of gate_up), eagerly and replayed as a CUDA graph, with hidden and out overwritten first:
// the number of values that differ in any bit from `first`.
inline int rerun_differences(const std::vector<float>& first, const std::function<cudaError_t(cudaStream_t)>& run,
                      DeviceBuffer<float>& hidden, DeviceBuffer<float>& out) {
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int differ = 0;
  for (bool graph : {false, true}) {
    CUDA_OK(cudaMemsetAsync(hidden.get(), 0x7f, hidden.size() * sizeof(float), stream));
    CUDA_OK(cudaMemsetAsync(out.get(), 0xff, out.size() * sizeof(float), stream));
    if (graph) {
      cudaGraph_t g;
      cudaGraphExec_t exec;
      CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      const cudaError_t e = run(stream);
      CUDA_OK(cudaStreamEndCapture(stream, &g));
      CUDA_OK(e);
      CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
      CUDA_OK(cudaGraphLaunch(exec, stream));
      CUDA_OK(cudaStreamSynchronize(stream));
      CUDA_OK(cudaGraphExecDestroy(exec));
      CUDA_OK(cudaGraphDestroy(g));
    } else {
      CUDA_OK(run(stream));
    }
    CUDA_OK(cudaStreamSynchronize(stream));
    const std::vector<float> again = download(out, first.size());
    for (size_t i = 0; i < first.size(); ++i)
      differ += std::bit_cast<uint32_t>(again[i]) != std::bit_cast<uint32_t>(first[i]);
  }
  CUDA_OK(cudaStreamDestroy(stream));
  return differ;
}

// A [rows, cols] LinearWeight of random FP8 / FP4 codes (random_quantized) whose power-of-two scales
// (one binade of spread) give it about the RMS of uniform(-s, s), s / sqrt(3).
inline frank::LinearWeight random_codes(Rng& r, WeightType type, int64_t rows, int64_t cols, float s) {
  const bool fp4 = type == WeightType::Fp4;
  double squares = 0;
  int codes = 0;
  for (int c = 0; c < (fp4 ? 16 : 256); ++c)
    if (fp4 || (c & 0x7f) != 0x7f) {
      const auto code = static_cast<uint8_t>(c);
      const double v = fp4 ? frank::cpu::e2m1_value(code) : frank::cpu::e4m3_value(code);
      squares += v * v, ++codes;
    }
  const int exponent = static_cast<int>(std::lround(std::log2(s / std::sqrt(3.0) / std::sqrt(squares / codes))));
  frank::LinearWeight w;
  w.quantized = random_quantized(r.g, type, rows, cols, exponent, 2);
  return w;
}

}  // namespace frank_test
