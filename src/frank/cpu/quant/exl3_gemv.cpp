#include "frank/cpu/quant/exl3_gemv.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "frank/core/dtype.h"
#include "frank/core/error.h"
#include "frank/cpu/quant/exl3_kernels.h"
#include "frank/cpu/quant/hadamard.h"

namespace frank::cpu {
namespace {

using BlockKernel = void (*)(const float*, int, const Exl3Matrix&, std::int64_t, float*);

BlockKernel kernel_for(CpuKernels level) {
  if (!cpu_supports(level))
    throw Error(fmt::format("EXL3 linear: CPU kernels '{}' are not supported on this machine", name(level)));
  switch (level) {
    case CpuKernels::Scalar: return detail::exl3_block_scalar;
    case CpuKernels::Avx2: return detail::exl3_block_avx2;
    case CpuKernels::Avx512: return detail::exl3_block_avx512;
  }
  throw Error("EXL3 linear: unknown CPU kernel level");
}

}  // namespace

void linear_rows(CpuKernels level, const float* x, std::int64_t n, const Exl3Matrix& w, float* y,
                 std::int64_t row_begin, std::int64_t row_end) {
  validate(w);
  if (n < 0 || row_begin < 0 || row_end < row_begin || row_end > w.rows)
    throw Error(fmt::format("EXL3 linear: rows [{}, {}) of {} for {} tokens", row_begin, row_end, w.rows, n));
  const BlockKernel kernel = kernel_for(level);
  const std::int64_t cols = w.padded_cols(), out = row_end - row_begin;
  std::vector<float> u, acc;
  for (std::int64_t t0 = 0; t0 < n; t0 += detail::kExl3MaxKernelTokens) {
    const int tokens = static_cast<int>(std::min<std::int64_t>(detail::kExl3MaxKernelTokens, n - t0));
    u.assign(static_cast<size_t>(tokens * cols), 0.0f);  // zero past w.cols: the padding
    for (int t = 0; t < tokens; ++t) {
      float* ut = u.data() + t * cols;
      const float* xt = x + (t0 + t) * w.cols;
      for (std::int64_t i = 0; i < w.cols; ++i) ut[i] = xt[i] * f16_to_f32(w.suh[i]);
      hadamard128_blocks(ut, cols);
    }
    for (std::int64_t block = row_begin / kHadamardBlock; block * kHadamardBlock < row_end; ++block) {
      acc.assign(static_cast<size_t>(tokens * kHadamardBlock), 0.0f);
      kernel(u.data(), tokens, w, block, acc.data());
      const std::int64_t first = std::max(row_begin, block * kHadamardBlock);
      const std::int64_t last = std::min(row_end, (block + 1) * kHadamardBlock);
      for (int t = 0; t < tokens; ++t) {
        float* z = acc.data() + t * kHadamardBlock;
        hadamard128_blocks(z, kHadamardBlock);
        for (std::int64_t r = first; r < last; ++r)
          y[(t0 + t) * out + (r - row_begin)] = z[r - block * kHadamardBlock] * f16_to_f32(w.svh[r]);
      }
    }
  }
}

void linear(const float* x, std::int64_t n, const Exl3Matrix& w, float* y) {
  linear_rows(active_cpu_kernels(), x, n, w, y, 0, w.rows);
}

void dequantize(const Exl3Matrix& w, float* out) {
  validate(w);
  const std::int64_t rows = w.padded_rows(), cols = w.padded_cols();
  // Q [cols, rows] decoded, then H on the output side (along each row of Q).
  const std::vector<std::uint16_t> q = decode(w.trellis);
  std::vector<float> qh(q.size());
  for (size_t i = 0; i < q.size(); ++i) qh[i] = f16_to_f32(q[i]);
  for (std::int64_t i = 0; i < cols; ++i) hadamard128_blocks(qh.data() + i * rows, rows);
  // Transposed to [rows, cols], then H on the input side (along each row of W) and both scales;
  // only the real rows and columns are kept.
  std::vector<float> row(static_cast<size_t>(cols));
  for (std::int64_t r = 0; r < w.rows; ++r) {
    for (std::int64_t i = 0; i < cols; ++i) row[i] = qh[static_cast<size_t>(i * rows + r)];
    hadamard128_blocks(row.data(), cols);
    const float scale_out = f16_to_f32(w.svh[r]);
    for (std::int64_t i = 0; i < w.cols; ++i) out[r * w.cols + i] = row[i] * f16_to_f32(w.suh[i]) * scale_out;
  }
}

}  // namespace frank::cpu
