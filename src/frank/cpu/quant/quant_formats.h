#pragma once
// DeepSeek-V4's quantised Linear weight formats, as non-owning views over checkpoint bytes.
// W is [rows = out, cols = in] row-major, like every Linear weight.
//
// FP8 block: one float8 e4m3fn byte per weight; one ue8m0 scale byte per block x block tile
//   (block 128 in DeepSeek-V4, 32 in V4.1), scales [ceil(rows/B), ceil(cols/B)]; the last
//   tile of a row or column may be partial.   W[i][j] = e4m3(w[i][j]) * 2^(S[i/B][j/B] - 127)
// FP4 (MXFP4-style): two e2m1 weights per byte, element 2k in the low nibble and 2k+1 in the high
//   one; one ue8m0 scale per 32 weights of a row, scales [rows, cols/32]; cols % 32 == 0.
//                                              W[i][j] = e2m1(nibble) * 2^(S[i][j/32] - 127)
#include <cstdint>

namespace frank::cpu {

// Exact decoders (table lookups). e4m3fn: bias 7, no infinities, 0x7F/0xFF are NaN, max 448.
// e2m1: the low 4 bits of `nibble`. ue8m0: 2^(bits-127), bits 255 is NaN.
float e4m3_value(uint8_t bits);
float e2m1_value(uint8_t nibble);
float ue8m0_value(uint8_t bits);

// The 256 / 16 / 256 decoded values, for kernels that gather from them.
const float* e4m3_table();
const float* e2m1_table();
const float* ue8m0_table();

struct Fp8BlockMatrix {
  const uint8_t* weight;  // [rows, cols]
  const uint8_t* scales;  // [ceil(rows/block), ceil(cols/block)]
  int64_t rows, cols;
  int block;  // 128 or 32

  int64_t scale_rows() const { return (rows + block - 1) / block; }
  int64_t scale_cols() const { return (cols + block - 1) / block; }
};

struct Fp4Matrix {
  static constexpr int kGroup = 32;  // weights per scale
  const uint8_t* packed;  // [rows, cols/2]
  const uint8_t* scales;  // [rows, cols/32]
  int64_t rows, cols;     // cols % 32 == 0

  int64_t scale_cols() const { return cols / kGroup; }
};

// Throw frank::Error naming what is wrong: negative sizes, a block other than 32 / 128, FP4 cols
// not a multiple of 32, or null data for a non-empty matrix.
void validate(const Fp8BlockMatrix& w);
void validate(const Fp4Matrix& w);

// out[rows * cols] = W in fp32 (for tests and references; the kernels never materialise W).
// Exact, except that a weight beyond the fp32 range becomes +-inf.
void dequantize(const Fp8BlockMatrix& w, float* out);
void dequantize(const Fp4Matrix& w, float* out);

}  // namespace frank::cpu
