#include "frank/model/tokenizer/piece_cache.h"

namespace frank::model::tok {

PieceCache::Shard& PieceCache::shard_of(std::string_view piece) const {
  // The first and last bytes spread pieces over the shards without hashing twice.
  const auto mix = static_cast<uint8_t>(piece.front()) * 31u + static_cast<uint8_t>(piece.back()) + piece.size();
  return shards_[mix % kShards];
}

bool PieceCache::lookup(std::string_view piece, std::vector<int32_t>& out) const {
  Shard& shard = shard_of(piece);
  std::lock_guard lock(shard.mutex);
  const auto it = shard.index.find(piece);
  if (it == shard.index.end()) return false;
  const int32_t* first = shard.ids.data() + it->second.offset;
  out.insert(out.end(), first, first + it->second.count);
  return true;
}

void PieceCache::store(std::string_view piece, std::span<const int32_t> ids) const {
  if (piece.size() > kMaxPieceBytes) return;
  Shard& shard = shard_of(piece);
  std::lock_guard lock(shard.mutex);
  if (shard.index.size() >= kMaxEntriesPerShard) {
    shard.index.clear();
    shard.ids.clear();
  }
  const auto [it, inserted] =
      shard.index.try_emplace(std::string(piece), IdRange{static_cast<uint32_t>(shard.ids.size()),
                                                          static_cast<uint32_t>(ids.size())});
  if (inserted) shard.ids.insert(shard.ids.end(), ids.begin(), ids.end());
}

}  // namespace frank::model::tok
