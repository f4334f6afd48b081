#include "frank/model/synthetic_exl3.h"

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#include "frank/core/dtype.h"
#include "frank/core/error.h"
#include "frank/core/splitmix64.h"
#include "frank/cpu/quant/exl3_matrix.h"
#include "frank/cpu/quant/exl3_trellis.h"

namespace frank::model {
namespace {

// Sign/scale vector of random sign and magnitude 0.5..1.5 times `scale`, in fp16.
std::vector<uint16_t> random_signs(uint64_t seed, int64_t size, float scale) {
  SplitMix64 rng(seed);
  std::vector<uint16_t> v(static_cast<size_t>(size));
  for (auto& h : v) {
    const uint64_t r = rng();
    const float magnitude = 0.5f + static_cast<float>(r >> 40) * 0x1.0p-24f;
    h = f32_to_f16((r & 1 ? -1.0f : 1.0f) * magnitude * scale);
  }
  return v;
}

void check_bits(int bits) {
  if (bits < cpu::kExl3MinBits || bits > cpu::kExl3MaxBits)
    throw Error(fmt::format("EXL3 bit width {} is outside {}..{}", bits, cpu::kExl3MinBits, cpu::kExl3MaxBits));
}

QuantizedMatrix exl3_header(int64_t rows, int64_t cols, int bits, Exl3Codebook codebook) {
  check_bits(bits);
  QuantizedMatrix q;
  q.format = QuantizedMatrix::Format::Exl3;
  q.rows = rows;
  q.cols = cols;
  q.bits = bits;
  q.codebook = codebook;
  return q;
}

}  // namespace

Exl3Seeds exl3_seeds(uint64_t seed) {
  return {splitmix64_finalize(seed), splitmix64_finalize(seed + 1), splitmix64_finalize(seed + 2)};
}

QuantizedMatrix random_exl3(int64_t rows, int64_t cols, int bits, Exl3Codebook codebook, const Exl3Seeds& seeds) {
  QuantizedMatrix q = exl3_header(rows, cols, bits, codebook);
  const int64_t k = cpu::exl3_padded(cols), n = cpu::exl3_padded(rows);
  q.trellis.resize(static_cast<size_t>(k * n * bits / 16));
  SplitMix64 rng(seeds.trellis);
  for (size_t i = 0; i < q.trellis.size(); i += 4) {  // any bit pattern is a valid encoding
    const uint64_t r = rng();
    for (size_t j = 0; j < 4 && i + j < q.trellis.size(); ++j) q.trellis[i + j] = static_cast<uint16_t>(r >> (16 * j));
  }
  q.suh = random_signs(seeds.suh, k, 1.0f / std::sqrt(static_cast<float>(cols)));
  q.svh = random_signs(seeds.svh, n, 1.0f);
  return q;
}

QuantizedMatrix exl3_shape_only(const std::string& name, int64_t rows, int64_t cols, int bits) {
  if (rows % 128 != 0 || cols % 128 != 0)
    throw Error(fmt::format("EXL3 {}: [{}, {}] is not a multiple of 128 both ways (the trellis tiles and Hadamard "
                            "blocks of a synthetic EXL3 weight are not padded)",
                            name, rows, cols));
  return exl3_header(rows, cols, bits, Exl3Codebook::ThreeInst);
}

}  // namespace frank::model
