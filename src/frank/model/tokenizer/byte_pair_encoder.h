#pragma once
// Byte-pair encoding of one pre-token, working directly on its raw bytes: the initial symbols are
// the 256 single-byte tokens and the merges apply by rank exactly as HF's Word::merge_all does
// (lowest rank first, leftmost first among equals).
#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "frank/model/tokenizer/merge_table.h"
#include "frank/model/tokenizer/piece_cache.h"

namespace frank::model::tok {

class BytePairEncoder {
 public:
  // byte_token_ids[b]: the id of the token for the single byte b.
  BytePairEncoder(const std::array<int32_t, 256>& byte_token_ids, MergeTable merges);

  // Appends the ids of `piece` (non-empty raw bytes) to `out`.
  void encode(std::string_view piece, std::vector<int32_t>& out) const;

 private:
  // Pieces this short are merged every time: that is cheaper than a cache lookup.
  static constexpr std::size_t kUncachedPiece = 4;

  void merge_short(std::string_view piece, std::vector<int32_t>& out) const;
  void merge_long(std::string_view piece, std::vector<int32_t>& out) const;

  std::array<int32_t, 256> byte_token_ids_;
  MergeTable merges_;
  std::unique_ptr<PieceCache> cache_;  // behind a pointer: it holds mutexes and the encoder moves
};

}  // namespace frank::model::tok
