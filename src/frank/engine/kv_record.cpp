#include "frank/engine/kv_record.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "frank/core/dtype.h"
#include "frank/core/error.h"
#include "frank/cpu/quant/quant_formats.h"

namespace frank::engine {

KvFormat parse_kv_format(const std::string& text) {
  if (text == "fp32") return KvFormat::F32;
  if (text == "bf16") return KvFormat::BF16;
  if (text == "fp8") return KvFormat::FP8;
  throw Error(fmt::format("--kv-dtype '{}': expected fp32, bf16 or fp8", text));
}

const char* kv_format_name(KvFormat f) {
  switch (f) {
    case KvFormat::F32: return "fp32";
    case KvFormat::BF16: return "bf16";
    case KvFormat::FP8: return "fp8";
  }
  return "?";
}

KvRowLayout kv_row_layout(KvFormat format, int dim, int rope_dims) {
  if (dim < 4 || dim % 4 != 0 || rope_dims < 0 || rope_dims > dim || rope_dims % 4 != 0)
    throw Error(fmt::format("K=V rows of {} values with {} RoPE dims cannot be stored: both must be multiples of 4, "
                            "the RoPE dims at most the row",
                            dim, rope_dims));
  KvRowLayout l{format, dim, rope_dims, dim - rope_dims, 0, 0, 0};
  switch (format) {
    case KvFormat::F32: l.row_bytes = 4 * dim; break;
    case KvFormat::BF16: l.row_bytes = 2 * dim; break;
    case KvFormat::FP8: {
      l.rope_offset = l.nope;
      l.scale_offset = l.nope + 2 * rope_dims;
      const int scales = (l.nope + kKvScaleBlock - 1) / kKvScaleBlock;
      l.row_bytes = (l.scale_offset + scales + 7) / 8 * 8;
      break;
    }
  }
  return l;
}

uint8_t float_to_e4m3_saturating(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const auto sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const float a = std::fabs(x);
  if (a >= 448.f) return sign | 0x7E;  // 448 = 1.75 * 2^8, the largest finite e4m3fn
  if (a < 0x1p-6f) {
    // Subnormals m * 2^-9 (m = 0..7); m = 8 is the smallest normal, whose byte is also 8.
    // a * 512 is exact; nearbyint rounds half to even in the default rounding mode.
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.f));
  }
  // Normal: keep 3 of fp32's 23 mantissa bits, round half to even; a carry bumps the exponent.
  const uint32_t bits = std::bit_cast<uint32_t>(a);
  int exponent = static_cast<int>(bits >> 23) - 127;  // -6 .. 8
  uint32_t mantissa = (bits & 0x7FFFFFu) >> 20;
  const uint32_t rest = bits & 0xFFFFFu;
  if (rest > 0x80000u || (rest == 0x80000u && (mantissa & 1u))) ++mantissa;
  if (mantissa == 8) {
    mantissa = 0;
    ++exponent;
  }
  return sign | static_cast<uint8_t>(((exponent + 7) << 3) | static_cast<int>(mantissa));
}

uint16_t float_to_bf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return static_cast<uint16_t>((u >> 16) | 0x40u);  // stays a (quiet) NaN
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

int kv_scale_exponent(float amax) {
  const float quotient = std::max(amax, 1e-4f) / 448.f;
  int e = 0;
  const float m = std::frexp(quotient, &e);  // quotient = m * 2^e, m in [0.5, 1)
  return m == 0.5f ? e - 1 : e;              // ceil(log2(quotient))
}

namespace {

void put_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
uint16_t get_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

void check_sizes(const KvRowLayout& l, size_t values, size_t bytes) {
  if (values != static_cast<size_t>(l.dim) || bytes != static_cast<size_t>(l.row_bytes))
    throw Error(fmt::format("K=V record: {} values and {} bytes for a row of {} values in {} bytes", values, bytes,
                            l.dim, l.row_bytes));
}

}  // namespace

void encode_kv_row(const KvRowLayout& l, std::span<const float> values, std::span<uint8_t> record) {
  check_sizes(l, values.size(), record.size());
  uint8_t* out = record.data();
  switch (l.format) {
    case KvFormat::F32: std::memcpy(out, values.data(), values.size_bytes()); return;
    case KvFormat::BF16:
      for (int i = 0; i < l.dim; ++i) put_u16(out + 2 * i, float_to_bf16(values[i]));
      return;
    case KvFormat::FP8:
      std::fill(record.begin(), record.end(), uint8_t{0});
      for (int first = 0, b = 0; first < l.nope; first += kKvScaleBlock, ++b) {
        const int last = std::min(first + kKvScaleBlock, l.nope);
        float amax = 0.f;
        for (int i = first; i < last; ++i) amax = std::max(amax, std::fabs(values[i]));
        const int e = kv_scale_exponent(amax);
        const float inverse = std::ldexp(1.f, -e);  // x * 2^-e is exact: it equals x / s
        for (int i = first; i < last; ++i) out[i] = float_to_e4m3_saturating(values[i] * inverse);
        out[l.scale_offset + b] = static_cast<uint8_t>(e + 127);
      }
      for (int i = 0; i < l.rope_dims; ++i) put_u16(out + l.rope_offset + 2 * i, float_to_bf16(values[l.nope + i]));
      return;
  }
}

void decode_kv_row(const KvRowLayout& l, std::span<const uint8_t> record, std::span<float> values) {
  check_sizes(l, values.size(), record.size());
  const uint8_t* in = record.data();
  switch (l.format) {
    case KvFormat::F32: std::memcpy(values.data(), in, values.size_bytes()); return;
    case KvFormat::BF16:
      for (int i = 0; i < l.dim; ++i) values[i] = bf16_to_f32(get_u16(in + 2 * i));
      return;
    case KvFormat::FP8:
      for (int i = 0; i < l.nope; ++i)
        values[i] = cpu::e4m3_value(in[i]) * cpu::ue8m0_value(in[l.scale_offset + i / kKvScaleBlock]);
      for (int i = 0; i < l.rope_dims; ++i) values[l.nope + i] = bf16_to_f32(get_u16(in + l.rope_offset + 2 * i));
      return;
  }
}

}  // namespace frank::engine
