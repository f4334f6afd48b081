#include "frank/model/tokenizer/byte_pair_encoder.h"

#include <algorithm>
#include <limits>

namespace frank::model::tok {
namespace {

constexpr int32_t kNoMerge = std::numeric_limits<int32_t>::max();

// Pieces up to this many bytes merge by scanning for the best pair; longer ones use HF's queue,
// whose cost grows as n log n instead of n^2.
constexpr std::size_t kShortPiece = 48;

struct Symbol {
  int32_t id;
  int32_t prev;     // index of the previous live symbol, -1 at the start
  int32_t next;     // index of the next live symbol, -1 at the end
  uint32_t length;  // bytes covered; 0 once merged into its left neighbour
};

struct Candidate {
  int32_t rank;
  int32_t pos;  // index of the left symbol of the pair
  int32_t merged_id;
};

// Heap order of HF's Merge: lowest rank on top, then the leftmost position.
bool lower_priority(const Candidate& a, const Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

}  // namespace

BytePairEncoder::BytePairEncoder(const std::array<int32_t, 256>& byte_token_ids, MergeTable merges)
    : byte_token_ids_(byte_token_ids), merges_(std::move(merges)), cache_(std::make_unique<PieceCache>()) {}

void BytePairEncoder::encode(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() <= kUncachedPiece) {
    merge_short(piece, out);
    return;
  }
  const bool cacheable = piece.size() <= PieceCache::kMaxPieceBytes;
  if (cacheable && cache_->lookup(piece, out)) return;
  const std::size_t first = out.size();
  if (piece.size() <= kShortPiece)
    merge_short(piece, out);
  else
    merge_long(piece, out);
  if (cacheable) cache_->store(piece, std::span<const int32_t>(out).subspan(first));
}

// Repeatedly merges the lowest-ranked adjacent pair, the leftmost among equals. This is the order
// HF's queue produces: its stale-entry check compares merged tokens, and a pair whose symbols
// changed always spans more bytes, so it can never pass as the old pair.
void BytePairEncoder::merge_short(std::string_view piece, std::vector<int32_t>& out) const {
  std::array<int32_t, kShortPiece> ids;
  std::array<Merge, kShortPiece> pairs;  // pairs[i]: the merge of ids[i] and ids[i + 1]
  auto merge_of = [&](int32_t left, int32_t right) { return merges_.find(left, right).value_or(Merge{kNoMerge, -1}); };
  std::size_t n = piece.size();
  for (std::size_t i = 0; i < n; ++i) ids[i] = byte_token_ids_[static_cast<uint8_t>(piece[i])];
  for (std::size_t i = 0; i + 1 < n; ++i) pairs[i] = merge_of(ids[i], ids[i + 1]);
  while (n > 1) {
    std::size_t best = 0;
    for (std::size_t i = 1; i + 1 < n; ++i)
      if (pairs[i].rank < pairs[best].rank) best = i;
    if (pairs[best].rank == kNoMerge) break;
    ids[best] = pairs[best].merged_id;
    std::copy(ids.begin() + best + 2, ids.begin() + n, ids.begin() + best + 1);
    std::copy(pairs.begin() + best + 1, pairs.begin() + n - 1, pairs.begin() + best);
    --n;
    if (best > 0) pairs[best - 1] = merge_of(ids[best - 1], ids[best]);
    if (best + 1 < n) pairs[best] = merge_of(ids[best], ids[best + 1]);
  }
  out.insert(out.end(), ids.begin(), ids.begin() + n);
}

// HF's Word::merge_all: a priority queue of candidate merges over a linked list of symbols.
void BytePairEncoder::merge_long(std::string_view piece, std::vector<int32_t>& out) const {
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> queue;
  const auto n = static_cast<int32_t>(piece.size());
  symbols.resize(piece.size());
  for (int32_t i = 0; i < n; ++i)
    symbols[i] = {byte_token_ids_[static_cast<uint8_t>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1, 1};

  auto push = [&](int32_t pos, int32_t left_id, int32_t right_id) {
    if (const auto m = merges_.find(left_id, right_id)) {
      queue.push_back({m->rank, pos, m->merged_id});
      std::push_heap(queue.begin(), queue.end(), lower_priority);
    }
  };
  queue.clear();
  for (int32_t i = 0; i + 1 < n; ++i) push(i, symbols[i].id, symbols[i + 1].id);

  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), lower_priority);
    const Candidate top = queue.back();
    queue.pop_back();
    Symbol& left = symbols[top.pos];
    if (left.length == 0 || left.next < 0) continue;
    const Symbol right = symbols[left.next];
    // Skip candidates whose pair has changed since they were queued.
    const auto current = merges_.find(left.id, right.id);
    if (!current || current->merged_id != top.merged_id) continue;

    symbols[left.next].length = 0;
    left.id = top.merged_id;
    left.length += right.length;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) push(left.prev, symbols[left.prev].id, left.id);
    if (left.next >= 0) push(top.pos, left.id, symbols[left.next].id);
  }
  for (int32_t i = 0; i < n; ++i)
    if (symbols[i].length != 0) out.push_back(symbols[i].id);
}

}  // namespace frank::model::tok
