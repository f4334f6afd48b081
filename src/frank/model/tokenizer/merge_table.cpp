#include "frank/model/tokenizer/merge_table.h"

#include <algorithm>
#include <bit>

namespace frank::model::tok {

MergeTable::MergeTable(std::size_t expected_merges) {
  // At most half full, so probe runs stay short.
  const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(16, expected_merges * 2));
  slots_.resize(capacity);
  shift_ = 64 - std::countr_zero(capacity);
}

void MergeTable::insert(int32_t left, int32_t right, Merge merge) {
  const uint64_t key = key_of(left, right);
  std::size_t slot = slot_of(key);
  while (slots_[slot].key != kEmpty && slots_[slot].key != key) slot = (slot + 1) & (slots_.size() - 1);
  slots_[slot] = {key, merge};
}

std::optional<Merge> MergeTable::find(int32_t left, int32_t right) const {
  const uint64_t key = key_of(left, right);
  for (std::size_t slot = slot_of(key);; slot = (slot + 1) & (slots_.size() - 1)) {
    if (slots_[slot].key == key) return slots_[slot].merge;
    if (slots_[slot].key == kEmpty) return std::nullopt;
  }
}

}  // namespace frank::model::tok
