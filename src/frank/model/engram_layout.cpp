#include "frank/model/engram_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>

#include "frank/core/error.h"
#include "frank/model/checkpoint.h"

namespace frank::model {
namespace {

bool is_prime(int64_t n) {
  if (n < 2) return false;
  if (n % 2 == 0) return n == 2;
  for (int64_t i = 3; i * i <= n; i += 2)
    if (n % i == 0) return false;
  return true;
}

// Rows of `rows x cols` from a flat int64 tensor.
std::vector<std::vector<int64_t>> rows_of(const std::vector<int64_t>& flat, size_t rows, size_t cols) {
  std::vector<std::vector<int64_t>> out(rows);
  for (size_t r = 0; r < rows; ++r) out[r].assign(flat.begin() + r * cols, flat.begin() + (r + 1) * cols);
  return out;
}

}  // namespace

std::vector<std::vector<int64_t>> engram_primes(const EngramConfig& e) {
  std::vector<std::vector<int64_t>> primes;
  std::set<int64_t> used;
  for (size_t k = 0; k < e.layer_ids.size(); ++k) {
    std::vector<int64_t> layer;
    for (int n = 2; n <= e.max_ngram_size; ++n) {
      int64_t current = e.hash_vocab_size - 1;
      for (int h = 0; h < e.n_heads; ++h) {
        do ++current;
        while (!is_prime(current) || used.contains(current));
        used.insert(current);
        layer.push_back(current);
      }
    }
    primes.push_back(std::move(layer));
  }
  return primes;
}

EngramLayout load_engram_layout(const V41Config& c, const std::filesystem::path& file) {
  const auto& e = c.engram;
  const auto ck = Checkpoint::open_file(file);
  const auto where = [&](const char* name) { return fmt::format("{} ('{}')", name, file.string()); };
  EngramLayout out;
  out.max_ngram_size = e.max_ngram_size;
  out.n_heads = e.n_heads;
  out.columns = e.hash_columns();
  const size_t L = e.layer_ids.size(), cols = out.columns;

  // Token map: one class per token id, numbered in first-seen order, so the classes are exactly
  // 0 .. compressed_vocab_size-1.
  const TensorInfo* map_info = ck.find("engram.token_map");
  if (map_info == nullptr) throw Error(fmt::format("{} is missing", where("engram.token_map")));
  if (map_info->shape.size() != 1 || map_info->shape[0] < c.vocab_size)
    throw Error(fmt::format("{} must have one entry per token id (at least vocab_size {})", where("engram.token_map"),
                            c.vocab_size));
  const auto map = ck.read_i64("engram.token_map", map_info->shape);
  const auto [lo, hi] = std::minmax_element(map.begin(), map.end());
  if (*lo < 0 || *hi != e.compressed_vocab_size - 1)
    throw Error(fmt::format("{} has classes {}..{}, but engram_compressed_vocab_size is {}", where("engram.token_map"),
                            *lo, *hi, e.compressed_vocab_size));
  out.token_map.assign(map.begin(), map.end());
  out.pad_class = out.token_map[e.pad_token_id];

  // Multipliers: odd and below 2 * ((2^63 - 1) / compressed_vocab / 2), so class * multiplier < 2^63
  // for every class: the hash's int64 products cannot overflow.
  const int64_t bound =
      std::max<int64_t>(1, std::numeric_limits<int64_t>::max() / e.compressed_vocab_size / 2);
  out.multiplier = rows_of(ck.read_i64("engram.multipliers", {static_cast<int64_t>(L), e.max_ngram_size}), L,
                           e.max_ngram_size);
  for (const auto& row : out.multiplier)
    for (int64_t m : row)
      if (m < 1 || m % 2 == 0 || m > 2 * (bound - 1) + 1)
        throw Error(fmt::format("{}: multiplier {} is not an odd number in [1, {}]", where("engram.multipliers"), m,
                                2 * (bound - 1) + 1));

  out.modulus = engram_primes(e);
  for (size_t k = 0; k < L; ++k) {
    int64_t total = 0;
    out.offset.emplace_back();
    for (int64_t p : out.modulus[k]) {
      out.offset[k].push_back(total);
      total += p;
    }
    if (total != e.table_rows[k])
      throw Error(fmt::format("config.json: engram_num_embeddings[{}] = {}, but Engram layer {} hashes into {} rows "
                              "(the sum of its primes)",
                              k, e.table_rows[k], e.layer_ids[k], total));
  }
  // Data made by transformers carries its primes and offsets: they must be ours.
  const std::vector<int64_t> grid{static_cast<int64_t>(L), e.max_ngram_size - 1, e.n_heads};
  if (ck.has("engram.primes") && rows_of(ck.read_i64("engram.primes", grid), L, cols) != out.modulus)
    throw Error(fmt::format("{} differ from the primes the config gives: the file was made for another config",
                            where("engram.primes")));
  if (ck.has("engram.offsets") &&
      rows_of(ck.read_i64("engram.offsets", {static_cast<int64_t>(L), static_cast<int64_t>(cols)}), L, cols) !=
          out.offset)
    throw Error(fmt::format("{} differ from the offsets the config gives: the file was made for another config",
                            where("engram.offsets")));
  return out;
}

}  // namespace frank::model
