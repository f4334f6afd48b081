#pragma once
// The BPE merge rules as an open-addressing hash table from a pair of token ids to the merge's
// rank and the id of the merged token. The BPE inner loop does one lookup per adjacent pair, so
// this flat table (one multiply, usually one probe) replaces a node-based std::unordered_map.
#include <cstdint>
#include <optional>
#include <vector>

namespace frank::model::tok {

struct Merge {
  int32_t rank;
  int32_t merged_id;
};

class MergeTable {
 public:
  explicit MergeTable(std::size_t expected_merges);

  // A pair given twice keeps the later rank, as HF's HashMap::from_iter over the merges does.
  void insert(int32_t left, int32_t right, Merge merge);
  std::optional<Merge> find(int32_t left, int32_t right) const;

 private:
  static uint64_t key_of(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  std::size_t slot_of(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }

  static constexpr uint64_t kEmpty = ~0ull;  // ids are non-negative, so no pair has this key
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge{};
  };
  std::vector<Slot> slots_;
  int shift_;
};

}  // namespace frank::model::tok
