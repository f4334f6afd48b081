#include "frank/lab/arm_order.h"

#include <fmt/format.h>

#include <utility>

#include "frank/core/sha256.h"
#include "frank/lab/random.h"

namespace frank::lab {

std::vector<std::string> hashed_block_order(const std::string& design_id, int64_t block,
                                            const std::vector<std::string>& arms, int64_t starts_per_arm) {
  std::vector<std::string> order;
  for (const std::string& arm : arms)
    for (int64_t s = 0; s < starts_per_arm; ++s) order.push_back(arm);
  uint64_t counter = 0;
  auto next_word = [&] {
    const Sha256Digest d = sha256(fmt::format("{}:{}:{}", design_id, block, counter++));
    uint64_t word = 0;
    for (int i = 0; i < 8; ++i) word = word << 8 | d[i];
    return word;
  };
  for (size_t i = order.size() - 1; i >= 1; --i) std::swap(order[i], order[uniform_below(i + 1, next_word)]);
  return order;
}

std::vector<std::vector<std::string>> block_orders(const Design& design, const std::string& design_id) {
  if (design.sequence) return *design.sequence;
  const std::vector<std::string> arms = {design.arms[0].name, design.arms[1].name};
  std::vector<std::vector<std::string>> orders;
  for (int64_t b = 0; b < design.blocks; ++b)
    orders.push_back(hashed_block_order(design_id, b, arms, design.starts_per_arm));
  return orders;
}

}  // namespace frank::lab
