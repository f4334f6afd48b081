#include "frank/cpu/quant/quant_gemv.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "frank/core/error.h"
#include "frank/cpu/quant/quant_kernels.h"

namespace frank::cpu {
namespace {

CpuKernels choose_level() {
  const char* forced = std::getenv("FRANK_CPU_KERNELS");
  if (forced == nullptr || *forced == '\0') {
    for (CpuKernels level : {CpuKernels::Avx512, CpuKernels::Avx2})
      if (cpu_supports(level)) return level;
    return CpuKernels::Scalar;
  }
  for (CpuKernels level : {CpuKernels::Scalar, CpuKernels::Avx2, CpuKernels::Avx512})
    if (name(level) == forced) {
      if (!cpu_supports(level))
        throw Error(fmt::format("FRANK_CPU_KERNELS={}: this CPU does not support it", forced));
      return level;
    }
  throw Error(fmt::format("FRANK_CPU_KERNELS={}: expected scalar, avx2 or avx512", forced));
}

void check_call(CpuKernels level, int64_t n, int64_t rows, int64_t row_begin, int64_t row_end) {
  if (!cpu_supports(level))
    throw Error(fmt::format("quantised linear: {} kernels are not supported by this CPU", name(level)));
  if (n < 0) throw Error(fmt::format("quantised linear: negative token count {}", n));
  if (row_begin < 0 || row_begin > row_end || row_end > rows)
    throw Error(fmt::format("quantised linear: row range [{}, {}) outside [0, {})", row_begin, row_end, rows));
}

// Runs `kernel` on at most kMaxKernelTokens tokens at a time; rows of x and y are independent.
template <typename Matrix, typename Kernel>
void in_token_chunks(Kernel kernel, const float* x, int64_t n, const Matrix& w, float* y,
                     int64_t row_begin, int64_t row_end) {
  for (int64_t t = 0; t < n; t += detail::kMaxKernelTokens) {
    const int chunk = static_cast<int>(std::min<int64_t>(detail::kMaxKernelTokens, n - t));
    kernel(x + t * w.cols, chunk, w, y + t * w.rows, row_begin, row_end);
  }
}

}  // namespace

std::string_view name(CpuKernels level) {
  switch (level) {
    case CpuKernels::Scalar: return "scalar";
    case CpuKernels::Avx2: return "avx2";
    case CpuKernels::Avx512: return "avx512";
  }
  return "unknown";
}

bool cpu_supports(CpuKernels level) {
  // __builtin_cpu_supports also checks (XGETBV) that the OS saves the AVX / AVX-512 registers.
  switch (level) {
    case CpuKernels::Scalar: return true;
    case CpuKernels::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case CpuKernels::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
  }
  return false;
}

CpuKernels active_cpu_kernels() {
  static const CpuKernels level = choose_level();
  return level;
}

void linear(const float* x, int64_t n, const Fp8BlockMatrix& w, float* y) {
  linear_rows(active_cpu_kernels(), x, n, w, y, 0, w.rows);
}

void linear(const float* x, int64_t n, const Fp4Matrix& w, float* y) {
  linear_rows(active_cpu_kernels(), x, n, w, y, 0, w.rows);
}

void linear_rows(CpuKernels level, const float* x, int64_t n, const Fp8BlockMatrix& w, float* y,
                 int64_t row_begin, int64_t row_end) {
  validate(w);
  check_call(level, n, w.rows, row_begin, row_end);
  const auto kernel = level == CpuKernels::Avx512 ? detail::fp8_rows_avx512
                      : level == CpuKernels::Avx2 ? detail::fp8_rows_avx2
                                                  : detail::fp8_rows_scalar;
  in_token_chunks(kernel, x, n, w, y, row_begin, row_end);
}

void linear_rows(CpuKernels level, const float* x, int64_t n, const Fp4Matrix& w, float* y,
                 int64_t row_begin, int64_t row_end) {
  validate(w);
  check_call(level, n, w.rows, row_begin, row_end);
  const auto kernel = level == CpuKernels::Avx512 ? detail::fp4_rows_avx512
                      : level == CpuKernels::Avx2 ? detail::fp4_rows_avx2
                                                  : detail::fp4_rows_scalar;
  in_token_chunks(kernel, x, n, w, y, row_begin, row_end);
}

}  // namespace frank::cpu
