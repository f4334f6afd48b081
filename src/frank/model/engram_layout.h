#pragma once
// The data the Engram n-gram hash needs (dsv41-model.md §6, reference notes A5/A6): the tokenizer's
// normalised-token map and the per-layer hash multipliers ship as data; the prime moduli and row
// offsets follow from the config and are computed here (and checked against the data when it has them).
#include <cstdint>
#include <filesystem>
#include <vector>

#include "frank/model/config_v41.h"

namespace frank::model {

struct EngramLayout {
  int max_ngram_size = 0;
  int n_heads = 0;
  int columns = 0;                             // (max_ngram_size - 1) * n_heads rows gathered per token
  std::vector<int32_t> token_map;              // token id -> normalised class in [0, compressed_vocab)
  int32_t pad_class = 0;                       // token_map[engram pad token]: fills blocked look-back slots
  std::vector<std::vector<int64_t>> modulus;   // [engram layer][column]: the column's prime
  std::vector<std::vector<int64_t>> offset;    // [engram layer][column]: first row of the column's range
  std::vector<std::vector<int64_t>> multiplier;  // [engram layer][look-back 0..max_ngram_size-1], odd
};

// transformers' prime rule (EngramLayout.from_config): for each Engram layer, each n-gram size and each
// head, the next prime above engram_vocab_size - 1 not used before (the search restarts for each
// n-gram size; a prime is never reused, across layers either). Result [layer][column], column =
// (n - 2) * n_heads + head.
std::vector<std::vector<int64_t>> engram_primes(const EngramConfig& engram);

// Reads `engram.token_map` [>= vocab] and `engram.multipliers` [layers, max_ngram_size] (int64) from
// `file` and checks them, with `engram.primes` / `engram.offsets` when present, against `config`.
// Throws frank::Error naming the tensor and the problem; also when a table's row count in the
// config is not the sum of its primes.
EngramLayout load_engram_layout(const V41Config& config, const std::filesystem::path& file);

}  // namespace frank::model
