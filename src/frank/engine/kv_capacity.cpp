#include "frank/engine/kv_capacity.h"

#include "frank/core/error.h"

namespace frank::engine {

KvCapacity kv_capacity(const model::ModelConfig& c, int64_t row_bytes, int64_t memory_bytes) {
  if (row_bytes <= 0 || memory_bytes < 0) throw Error("KV capacity: row size and memory must be positive");
  constexpr int64_t f32 = 4;
  const int64_t index_key_bytes = int64_t{c.index_head_dim} * f32;
  KvCapacity k;
  for (int l = 0; l < c.num_layers; ++l) {
    k.fixed_bytes += int64_t{c.sliding_window} * row_bytes;  // the ring
    const int64_t r = c.compress_ratio[static_cast<size_t>(l)];
    if (r == 0) continue;
    const bool csa = c.attention[static_cast<size_t>(l)] == model::AttentionKind::CompressedSparse;
    // A compressor keeps its open window's raw kv and gate projections ([r, width], width = 2*dim
    // when windows overlap), and overlapping ones the last closed window's Ca half ([r, dim] x 2).
    auto buffers = [&](int64_t dim, bool overlapping) {
      const int64_t width = (overlapping ? 2 : 1) * dim;
      return 2 * r * width * f32 + (overlapping ? 2 * r * dim * f32 : 0);
    };
    k.fixed_bytes += buffers(c.head_dim, csa);
    k.bytes_per_token += static_cast<double>(row_bytes) / static_cast<double>(r);
    if (csa) {  // the indexer: its own overlapping compressor and fp32 keys
      k.fixed_bytes += buffers(c.index_head_dim, true);
      k.bytes_per_token += static_cast<double>(index_key_bytes) / static_cast<double>(r);
    }
  }
  if (k.bytes_per_token > 0)
    k.tokens = memory_bytes < k.fixed_bytes
                   ? 0
                   : static_cast<int64_t>(static_cast<double>(memory_bytes - k.fixed_bytes) / k.bytes_per_token);
  return k;
}

std::vector<KvRowSize> kv_row_sizes(const model::ModelConfig& c) {
  std::vector<KvRowSize> sizes;
  for (KvFormat f : {KvFormat::F32, KvFormat::BF16, KvFormat::FP8})
    sizes.push_back({kv_format_name(f), kv_row_layout(f, c.head_dim, c.rope_dim).row_bytes, true});
  sizes.push_back({"v4.1-fp8", int64_t{c.head_dim} + c.head_dim / 32, false});
  return sizes;
}

}  // namespace frank::engine
