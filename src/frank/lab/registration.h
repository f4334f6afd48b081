#pragma once
// What is fixed before anything runs: the design's canonical text and its SHA-256 (the design
// id every ledger row carries), the start order of every block, and the smallest p-values the
// design can reach.
#include <string>
#include <vector>

#include "frank/lab/design.h"

namespace frank::lab {

struct Registration {
  std::string canonical;  // canonical_json(design_to_json(design)), the hashed text
  std::string design_id;  // sha256 of `canonical`, 64 lowercase hex digits
  std::vector<std::vector<std::string>> block_orders;
  double sign_test_minimum_p = 1.0;
  double permutation_assignments = 1.0;
  bool permutation_exact = true;  // enumerated; otherwise seeded Monte Carlo
  double permutation_minimum_p = 1.0;
};

std::string design_id(const Design& design);
Registration register_design(const Design& design);

}  // namespace frank::lab
