#pragma once
// Memoized BPE results per pre-token. Text repeats its words, so most pre-tokens are looked up
// instead of merged. Shared by all threads that encode with one Tokenizer: the table is split into
// shards with a mutex each, and a shard that grows past its bound is emptied, keeping memory
// bounded for a long-running server.
#include <array>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace frank::model::tok {

class PieceCache {
 public:
  // Pre-tokens longer than this are merged every time (HF does the same), so one huge word
  // cannot fill the cache.
  static constexpr std::size_t kMaxPieceBytes = 256;

  // Appends the cached ids of `piece` to `out`; false if `piece` is not cached.
  bool lookup(std::string_view piece, std::vector<int32_t>& out) const;
  void store(std::string_view piece, std::span<const int32_t> ids) const;

 private:
  struct TransparentHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct IdRange {
    uint32_t offset;
    uint32_t count;
  };
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, IdRange, TransparentHash, std::equal_to<>> index;
    std::vector<int32_t> ids;  // every cached result of this shard, back to back
  };
  static constexpr std::size_t kShards = 16;
  static constexpr std::size_t kMaxEntriesPerShard = 1 << 15;

  Shard& shard_of(std::string_view piece) const;

  mutable std::array<Shard, kShards> shards_;
};

}  // namespace frank::model::tok
