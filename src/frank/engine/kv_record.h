#pragma once
// How a session stores its attention K=V rows (the sliding-window ring and the attention
// compressor's entries; the indexer's keys always stay fp32): the formats, their byte layout, and
// the CPU encoder/decoder that is the reference for the GPU's (frank/cuda/kv_rows.cuh, which must
// write the same bytes bit for bit). Layouts, for a row of `dim` values whose last `rope_dims` are
// the RoPE dims (frank's head layout, ops.cuh `rope`):
//
//   fp32  dim little-endian float32                                     (2048 B for 512 dims)
//   bf16  dim little-endian bfloat16, round to nearest even             (1024 B)
//   fp8   DeepSeek-V4's record (dsv4-model.md section 9; FlashMLA's "MODEL1" layout), nope = dim - rope_dims:
//           [0, nope)                    e4m3fn(x / s_b) of nope value i, b = i / 64 (RNE, saturating to +-448)
//           [nope, nope + 2*rope_dims)   the RoPE dims as bfloat16 (RNE)
//           then ceil(nope / 64) bytes   ue8m0 of s_b: exponent + 127
//           then zeros up to a multiple of 8 bytes                      (448 + 128 + 7 + 1 = 584 B)
//         s_b = 2^ceil(log2(max(amax_b, 1e-4f) / 448.f)), the quotient in fp32 (DeepSeek's act_quant with
//         ue8m0 scales). Since s_b >= amax_b / 448, x / s_b never passes 448: saturation only guards.
//         The last block of a nope part that is not a multiple of 64 is short (the tiny test models).
#include <cstdint>
#include <span>
#include <string>

namespace frank::engine {

enum class KvFormat { F32, BF16, FP8 };

// "fp32" | "bf16" | "fp8"; throws frank::Error naming the choices otherwise.
KvFormat parse_kv_format(const std::string& text);
const char* kv_format_name(KvFormat f);

// The byte layout of one stored row (see the header comment). Plain data, so kernels take it by value.
struct KvRowLayout {
  KvFormat format = KvFormat::F32;
  int dim = 0, rope_dims = 0;
  int nope = 0;          // dim - rope_dims: the fp8 record's e4m3 values
  int rope_offset = 0;   // fp8: byte offset of the bf16 RoPE dims
  int scale_offset = 0;  // fp8: byte offset of the ue8m0 scales
  int row_bytes = 0;
};

constexpr int kKvScaleBlock = 64;  // fp8: nope values per ue8m0 scale

// The layout of rows of `dim` values, the last `rope_dims` of them RoPE dims. Throws frank::Error
// for a shape the kernels cannot serve: dim and rope_dims must be multiples of 4 (kernels move 4
// values at a time), 0 <= rope_dims <= dim.
KvRowLayout kv_row_layout(KvFormat format, int dim, int rope_dims);

// One row: `values` (layout.dim floats) -> `record` (layout.row_bytes bytes), and back.
void encode_kv_row(const KvRowLayout& layout, std::span<const float> values, std::span<uint8_t> record);
void decode_kv_row(const KvRowLayout& layout, std::span<const uint8_t> record, std::span<float> values);

// The scalar conversions the record is made of (exposed for their golden tests).
uint8_t float_to_e4m3_saturating(float x);  // round to nearest even; |x| > 448 gives +-448; NaN not handled
uint16_t float_to_bf16(float x);            // round to nearest even (overflow to inf, as IEEE)
// The ue8m0 exponent e of s = 2^e for a block whose largest magnitude is amax (>= 0, finite).
int kv_scale_exponent(float amax);

}  // namespace frank::engine
