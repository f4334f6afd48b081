#pragma once
// How many tokens of K=V state fit in a given memory, for a model and a K=V row size: the state a
// sequence keeps grows by its compressed entries (attention rows, and for CSA the indexer's keys,
// which frank always keeps in fp32) and has a fixed part (every layer's sliding-window ring, every
// compressor's fp32 pending and overlap buffers). dsv4-model.md section 9 lists that state.
// Counted as frank's sessions store it; not counted: activations, the prefix cache, the growth
// slack of entry arrays (the GPU doubles them), an MTP block's own window.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "frank/engine/kv_record.h"
#include "frank/model/config.h"

namespace frank::engine {

struct KvCapacity {
  double bytes_per_token = 0;  // amortised: a ratio-r layer adds one row every r tokens
  int64_t fixed_bytes = 0;     // per sequence, whatever its length
  // Tokens of one sequence that fit: floor((memory - fixed) / bytes_per_token), 0 when the fixed
  // part alone does not fit; none when nothing grows (a model of sliding layers only).
  std::optional<int64_t> tokens;
};

// `row_bytes`: one stored K=V row (kv_row_layout(...).row_bytes, or a row size frank does not store).
KvCapacity kv_capacity(const model::ModelConfig& c, int64_t row_bytes, int64_t memory_bytes);

// The row sizes worth comparing for a model: frank's three formats, and DeepSeek-V4.1's 528-byte
// window record (every dim e4m3, one ue8m0 scale per 32: dim + dim/32 bytes), which frank does not
// store (dsv41-model.md section 10): capacity only.
struct KvRowSize {
  std::string name;
  int64_t row_bytes;
  bool stored_by_frank;
};
std::vector<KvRowSize> kv_row_sizes(const model::ModelConfig& c);

}  // namespace frank::engine
