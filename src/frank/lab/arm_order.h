#pragma once
// The start order inside each block, derived from the design id so that anyone can re-derive it
// and nobody could have picked it after seeing the design (Mazor, Mazor & Mukamel 2019).
//
// Procedure for block b (0-based) of the design with id D (64 lowercase hex digits):
//  1. The list to shuffle: the arms in the design's order, each repeated starts_per_arm times.
//  2. Random words: word j (j = 0, 1, ...) is the first 8 bytes, read big-endian, of
//     SHA-256 of the ASCII text "D:b:j" (b and j in decimal), e.g. "3fa9...c1:0:0".
//  3. Fisher-Yates: for i = n-1 down to 1, draw k uniform in [0, i] and swap items i and k.
//     A uniform k in [0, m) takes the next word w, rejects it while w >= 2^64 - (2^64 mod m),
//     and is w mod m.
// A design with an explicit "sequence" uses that order instead.
#include <cstdint>
#include <string>
#include <vector>

#include "frank/lab/design.h"

namespace frank::lab {

std::vector<std::string> hashed_block_order(const std::string& design_id, int64_t block,
                                            const std::vector<std::string>& arms, int64_t starts_per_arm);

// The registered order of every block: the design's sequence, or the hashed order.
std::vector<std::vector<std::string>> block_orders(const Design& design, const std::string& design_id);

}  // namespace frank::lab
