#pragma once
// The types a Linear weight has on the GPU, and where each keeps its bytes (plain C++: the host
// code, the kernels' launchers and the CPU-side tests all use it).
//
//   F32, BF16      [rows, cols] values, row-major.
//   Fp8Block128,   DeepSeek's FP8 as the checkpoint ships it (cpu/quant/quant_formats.h): e4m3fn bytes
//   Fp8Block32     [rows, cols], then the ue8m0 scales [ceil(rows/B), ceil(cols/B)] of the B x B
//                  blocks (B = 128 in DeepSeek-V4, 32 in V4.1).
//   Fp4            e2m1 [rows, cols/2] (element 2k in the low nibble of byte k), then the ue8m0
//                  scales [rows, cols/32]; cols % 32 == 0.
// The quantised types are one buffer: the value bytes, zero bytes up to a multiple of 16, then the
// scale bytes exactly as shipped, so a weight is still one pointer (expert tables hold one per
// matrix) and the values stay 16-byte aligned for the kernels' loads.
//   Exl3           only in the MoE's expert tables (ops.cuh, ExpertTables): a pointer to an
//                  Exl3DeviceMatrix (exl3_gemv.h) in device memory, which points at the trellis
//                  and sign vectors. Its bytes depend on the bit width, so the byte functions
//                  below do not apply to it (nothing calls them for it).
#include <cstdint>

namespace frank::cuda {

enum class WeightType { F32, BF16, Fp8Block128, Fp8Block32, Fp4, Exl3 };

constexpr bool is_quantized(WeightType t) {
  return t == WeightType::Fp8Block128 || t == WeightType::Fp8Block32 || t == WeightType::Fp4;
}

// "fp32", "bf16", "fp8/128", "fp8/32", "fp4", "exl3" (reports).
constexpr const char* weight_type_name(WeightType t) {
  switch (t) {
    case WeightType::F32:
      return "fp32";
    case WeightType::BF16:
      return "bf16";
    case WeightType::Fp8Block128:
      return "fp8/128";
    case WeightType::Fp8Block32:
      return "fp8/32";
    case WeightType::Fp4:
      return "fp4";
    case WeightType::Exl3:
      return "exl3";
  }
  return "?";
}

// The FP8 block side, 0 for the other types.
constexpr int fp8_block(WeightType t) {
  return t == WeightType::Fp8Block128 ? 128 : t == WeightType::Fp8Block32 ? 32 : 0;
}

// Bytes of the values alone: 4, 2, 1 or 1/2 a weight.
constexpr int64_t weight_value_bytes(WeightType t, int64_t rows, int64_t cols) {
  switch (t) {
    case WeightType::F32:
      return rows * cols * 4;
    case WeightType::BF16:
      return rows * cols * 2;
    case WeightType::Fp4:
      return rows * (cols / 2);
    default:
      return rows * cols;
  }
}

// Where the scales start: the values rounded up to 16 bytes (the whole buffer for F32 / BF16).
constexpr int64_t weight_scale_offset(WeightType t, int64_t rows, int64_t cols) {
  return (weight_value_bytes(t, rows, cols) + 15) / 16 * 16;
}

constexpr int64_t weight_scale_bytes(WeightType t, int64_t rows, int64_t cols) {
  if (t == WeightType::Fp4) return rows * (cols / 32);
  const int64_t b = fp8_block(t);
  return b == 0 ? 0 : (rows + b - 1) / b * ((cols + b - 1) / b);
}

// The whole buffer of a [rows, cols] weight of type t.
constexpr int64_t weight_bytes(WeightType t, int64_t rows, int64_t cols) {
  return is_quantized(t) ? weight_scale_offset(t, rows, cols) + weight_scale_bytes(t, rows, cols)
                         : weight_value_bytes(t, rows, cols);
}

}  // namespace frank::cuda
