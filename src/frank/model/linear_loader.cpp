#include "frank/model/linear_loader.h"

#include <fmt/format.h>

#include <cmath>

#include "frank/core/error.h"
#include "frank/cpu/quantized_linear.h"

namespace frank::model {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The scale tensor next to `weight_name`: DeepSeek's `.scale`, or transformers' FP8 quantizer's
// `.weight_scale_inv`.
std::string scale_name(const Checkpoint& ck, const std::string& weight_name) {
  const std::string stem = weight_name.substr(0, weight_name.size() - std::string(".weight").size());
  for (const std::string& candidate : {stem + ".scale", weight_name + "_scale_inv"})
    if (ck.has(candidate)) return candidate;
  throw Error(fmt::format("tensor '{}' is quantized but its scales ('{}.scale') are missing", weight_name, stem));
}

// Scales as ue8m0 bytes (2^(byte-127)). F32 scales are accepted when every one is a power of two
// in the ue8m0 range, as transformers writes DeepSeek's scales.
std::vector<uint8_t> read_scales(const Checkpoint& ck, const std::string& name, const std::vector<int64_t>& shape) {
  const TensorInfo* info = ck.find(name);
  if (info->dtype != DType::F32) return ck.read_bytes(name, shape, {DType::F8_E8M0, DType::U8});
  const std::vector<float> values = ck.read_f32(name, shape);
  std::vector<uint8_t> bytes(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    int exponent = 0;
    const float mantissa = std::frexp(values[i], &exponent);  // values[i] = mantissa * 2^exponent
    const int biased = exponent - 1 + 127;
    if (!(values[i] > 0) || mantissa != 0.5f || biased < 0 || biased > 254)
      throw Error(fmt::format("scale tensor '{}' element {} is {}: not a power of two in e8m0's range", name, i,
                              values[i]));
    bytes[i] = static_cast<uint8_t>(biased);
  }
  return bytes;
}

QuantizedMatrix read_fp8(const Checkpoint& ck, const std::string& name, int64_t out, int64_t in,
                         std::set<std::string>& used) {
  const std::string scales = scale_name(ck, name);
  const std::vector<int64_t> grid = ck.find(scales)->shape;
  // The block side is what the scale grid says: 128 (DeepSeek-V4) or 32 (DeepSeek-V4.1).
  int block = 0;
  for (int b : {128, 32})
    if (grid == std::vector<int64_t>{ceil_div(out, b), ceil_div(in, b)}) {
      block = b;
      break;
    }
  if (block == 0)
    throw Error(fmt::format("scale tensor '{}' has shape {}: not a 128x128 or 32x32 block grid of [{}, {}]", scales,
                            shape_string(grid), out, in));
  QuantizedMatrix q;
  q.format = QuantizedMatrix::Format::Fp8Block;
  q.rows = out;
  q.cols = in;
  q.block = block;
  q.values = ck.read_bytes(name, {out, in}, {DType::F8_E4M3});
  q.scales = read_scales(ck, scales, grid);
  used.insert(scales);
  return q;
}

QuantizedMatrix read_fp4(const Checkpoint& ck, const std::string& name, int64_t out, int64_t in,
                         std::set<std::string>& used) {
  if (in % 32 != 0)
    throw Error(fmt::format("tensor '{}' is packed FP4 but its rows of {} values are not a multiple of 32", name, in));
  const std::string scales = scale_name(ck, name);
  QuantizedMatrix q;
  q.format = QuantizedMatrix::Format::Fp4;
  q.rows = out;
  q.cols = in;
  q.values = ck.read_bytes(name, {out, in / 2}, {DType::I8, DType::U8});
  q.scales = read_scales(ck, scales, {out, in / 32});
  used.insert(scales);
  return q;
}

}  // namespace

void load_linear(const Checkpoint& ck, const std::string& name, const std::vector<int64_t>& shape, LinearWeight& dst,
                 std::set<std::string>& used) {
  const TensorInfo* info = ck.find(name);
  const int64_t out = shape.at(0), in = shape.at(1);
  switch (info->dtype) {
    case DType::F8_E4M3: dst.quantized = read_fp8(ck, name, out, in, used); break;
    case DType::I8:
    case DType::U8: dst.quantized = read_fp4(ck, name, out, in, used); break;
    default: dst.dense = Tensor(shape, ck.read_f32(name, shape));
  }
  if (dst.quantized) cpu::check_quantized_matrix(*dst.quantized);
  used.insert(name);
}

}  // namespace frank::model
