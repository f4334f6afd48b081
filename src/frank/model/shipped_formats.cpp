#include "frank/model/shipped_formats.h"

#include <string>
#include <vector>

#include "frank/core/packed_bytes.h"
#include "frank/core/splitmix64.h"
#include "frank/model/synthetic_exl3.h"

namespace frank::model {
namespace {

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// Random bytes from one seed: 8 a splitmix64 draw.
void fill_random(std::vector<uint8_t>& bytes, uint64_t seed) {
  for (size_t i = 0; i < bytes.size(); i += 8) {
    const uint64_t r = splitmix64_finalize(seed + i);
    for (size_t b = 0; b < 8 && i + b < bytes.size(); ++b) bytes[i + b] = static_cast<uint8_t>(r >> (8 * b));
  }
}

// Scale exponents: e4m3 codes reach 448 and e2m1 codes 6; 2^-12 and 2^-6 keep |w| below ~0.1.
constexpr uint8_t kFp8Scale = 127 - 12, kFp4Scale = 127 - 6;

QuantizedMatrix random_matrix(ShippedFormat f, int64_t rows, int64_t cols, uint64_t seed) {
  QuantizedMatrix q;
  q.rows = rows, q.cols = cols;
  if (f == ShippedFormat::Fp8) {
    q.format = QuantizedMatrix::Format::Fp8Block;
    q.block = 128;
    q.values.resize(static_cast<size_t>(rows * cols));
    fill_random(q.values, seed);
    for (uint8_t& v : q.values)
      if ((v & 0x7f) == 0x7f) v ^= 1;  // 0x7F / 0xFF are e4m3's NaNs: none ships
    q.scales.assign(static_cast<size_t>((rows + 127) / 128 * ((cols + 127) / 128)), kFp8Scale);
  } else {
    q.format = QuantizedMatrix::Format::Fp4;
    q.values.resize(static_cast<size_t>(rows * cols / 2));
    fill_random(q.values, seed);
    q.scales.assign(static_cast<size_t>(rows * cols / 32), kFp4Scale);
  }
  return q;
}

}  // namespace

ShippedFormat v4_flash_format(std::string_view name, int exl3_expert_bits) {
  if (exl3_expert_bits > 0 && name.starts_with("layers.") && contains(name, ".ffn.experts."))
    return ShippedFormat::Exl3;
  if (contains(name, ".ffn.experts.")) return ShippedFormat::Fp4;
  if (contains(name, ".ffn.shared_experts.") || contains(name, "e_proj.") || contains(name, "h_proj.") ||
      contains(name, "attn.indexer.wq_b."))
    return ShippedFormat::Fp8;
  for (const char* p : {"attn.wq_a.", "attn.wq_b.", "attn.wkv.", "attn.wo_a.", "attn.wo_b."})
    if (contains(name, p)) return ShippedFormat::Fp8;
  return ShippedFormat::Bf16;  // compressors (attn.compressor.wkv too), weights_proj, router, head
}

double shipped_bytes(ShippedFormat f, int64_t rows, int64_t cols, int exl3_bits) {
  const auto values = static_cast<double>(rows * cols);
  switch (f) {
    case ShippedFormat::Fp8: return values + static_cast<double>((rows + 127) / 128 * ((cols + 127) / 128));
    case ShippedFormat::Fp4: return values / 2 + values / 32;
    case ShippedFormat::Exl3: return static_cast<double>(exl3_bytes(rows, cols, exl3_bits));
    case ShippedFormat::Bf16: break;
  }
  return 2 * values;
}

void fill_shipped_formats(const ModelConfig& config, ModelWeights& w, uint64_t seed, ThreadPool& pool,
                          int exl3_expert_bits) {
  struct Job {
    LinearWeight* weight;
    ShippedFormat format;
    std::vector<int64_t> shape;
  };
  std::vector<Job> jobs;
  for_each_weight(config, w, [&](const WeightSlot& s) {
    if (s.linear == nullptr || !s.linear->dense.data.empty() || s.linear->quantized) return;
    const ShippedFormat f = v4_flash_format(s.name, exl3_expert_bits);
    if (f == ShippedFormat::Exl3)
      s.linear->quantized = exl3_shape_only(s.name, s.shape[0], s.shape[1], exl3_expert_bits);
    else if (f != ShippedFormat::Bf16)
      jobs.push_back({s.linear, f, s.shape});
  });
  pool.parallel_for(std::ssize(jobs), [&](int64_t i) {
    const Job& j = jobs[static_cast<size_t>(i)];
    j.weight->quantized = random_matrix(j.format, j.shape[0], j.shape[1], seed + (static_cast<uint64_t>(i) << 40));
    j.weight->dense = Tensor();
  });
}

}  // namespace frank::model
