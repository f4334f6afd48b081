// frank_cuda_ops_check: every CUDA op of the forward pass (frank/cuda/ops.cuh) against the CPU
// reference function it implements, on random inputs at small and real-shaped sizes.
//   frank_cuda_ops_check [--seed S] [--only FAMILY]     exit 1 on any failure
// FAMILY: dense, attention, moe, exl3_moe, sampling, v41 (default: all).
#include "ops_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace frank_test {

double max_scaled_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want[i], g = got[i];
    if (std::isinf(w) || std::isinf(g)) {
      if (w != g) return INFINITY;
      continue;
    }
    const double e = std::abs(g - w) / std::max(1.0, std::abs(w));
    if (!(e <= worst)) worst = e;  // NaN propagates as a failure
  }
  return worst;
}

frank::QuantizedMatrix random_quantized(frank::SplitMix64& g, frank::cuda::WeightType t, int64_t rows, int64_t cols,
                                        int exponent, int spread) {
  frank::QuantizedMatrix q;
  q.rows = rows, q.cols = cols;
  const bool fp4 = t == frank::cuda::WeightType::Fp4;
  q.format = fp4 ? frank::QuantizedMatrix::Format::Fp4 : frank::QuantizedMatrix::Format::Fp8Block;
  q.block = frank::cuda::fp8_block(t);
  q.values.resize(static_cast<size_t>(frank::cuda::weight_value_bytes(t, rows, cols)));
  for (uint8_t& b : q.values) {
    b = static_cast<uint8_t>(g() >> 56);
    if (!fp4 && (b & 0x7f) == 0x7f) b ^= 1;  // 0x7F / 0xFF -> 0x7E / 0xFE
  }
  q.scales.resize(static_cast<size_t>(frank::cuda::weight_scale_bytes(t, rows, cols)));
  for (uint8_t& s : q.scales) s = static_cast<uint8_t>(127 + exponent + static_cast<int>(g() % spread));
  return q;
}

int report(const char* op, const char* what, double err, double tol) {
  const bool ok = err <= tol;
  std::printf("%s %-16s %-40s max_err=%.3g tol=%.3g\n", ok ? "PASS" : "FAIL", op, what, err, tol);
  return ok ? 0 : 1;
}

}  // namespace frank_test

int main(int argc, char** argv) {
  uint64_t seed = 1;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: frank_cuda_ops_check [--seed S] [--only FAMILY]\n");
      return 2;
    }
  }
  const struct {
    const char* name;
    int (*check)(uint64_t);
  } families[] = {{"dense", frank_test::check_dense_ops},       {"attention", frank_test::check_attention_ops},
                  {"moe", frank_test::check_moe_ops},           {"exl3_moe", frank_test::check_exl3_moe_ops},
                  {"sampling", frank_test::check_sampling_ops}, {"v41", frank_test::check_v41_ops}};
  int failures = 0, run = 0;
  for (const auto& f : families)
    if (only.empty() || only == f.name) failures += f.check(seed), ++run;
  if (run == 0) {
    std::fprintf(stderr, "unknown family '%s'\n", only.c_str());
    return 2;
  }
  std::printf("%s: %d failure(s)\n", failures == 0 ? "ALL PASS" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}
