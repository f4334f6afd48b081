#pragma once
// DeepSeek-V4.1 Engram on the CPU (dsv41-model.md §6, reference notes A5/A6/W6/W7): the n-gram hash
// of each position, the table lookup, and the per-stream gated add into the mHC streams.
#include <cstdint>
#include <span>
#include <vector>

#include "frank/model/engram_layout.h"
#include "frank/model/weights_v41.h"

namespace frank::engine {

// A look-back slot before the sequence start (or, for images/padding, a DEAD token).
inline constexpr int32_t kEngramDead = -1;

// The hash's look-back across calls: the classes of the last max_ngram_size - 1 tokens, oldest first.
struct EngramHistory {
  std::vector<int32_t> classes;
};
EngramHistory engram_fresh_history(const model::EngramLayout& layout);
// `history` moved on past `ids`, as engram_hash_ids leaves it, without hashing them.
void engram_advance(const model::EngramLayout& layout, std::span<const int32_t> ids, EngramHistory& history);

// Row ids [T, engram layers, columns] (row-major) of the n-grams ending at each of the T tokens `ids`,
// which follow `history`; `history` then covers them. Each id is taken to its class through the token
// map. Position t, look-back s (0..max_ngram_size-1) uses the class of token t-s, or the pad class once
// a DEAD slot has been met at some s' <= s. With multipliers m_s:
//   r_1 = c_0·m_0 XOR c_1·m_1,  r_n = r_{n-1} XOR c_n·m_n (int64, no overflow: engram_layout.h),
//   row(n-gram of n+1 tokens, head h) = r_n mod prime + offset.
// Throws frank::Error for an id outside the token map.
std::vector<int64_t> engram_hash_ids(const model::EngramLayout& layout, std::span<const int32_t> ids,
                                     EngramHistory& history);

// The table rows of one token's `row_ids` (one per column), concatenated: [columns * head_dim].
std::vector<float> engram_gather(const Tensor& table, std::span<const int64_t> row_ids);

// Adds the gated Engram value to one token's streams [hc_mult, hidden] in place. kv = wkv · gathered
// splits into one key per stream and a shared value v; per stream k, in fp32:
//   dot_k = Σ_d X_k[d]·q_weight[k,d]·k_weight[k,d]·key_k[d] · rsqrt(mean X_k² + eps) · rsqrt(mean key_k² + eps)
//           / sqrt(hidden)
//   X_k += sigmoid(copysign(sqrt(max(|dot_k|, 1e-6)), dot_k)) · v
void engram_mix(const model::V41EngramWeights& w, std::span<const float> gathered, int hc_mult, int hidden,
                float eps, float* streams);

}  // namespace frank::engine
