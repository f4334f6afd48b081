#include "frank/lab/registration.h"

#include "frank/core/sha256.h"
#include "frank/lab/arm_order.h"
#include "frank/lab/canonical_json.h"
#include "frank/lab/minimum_p.h"

namespace frank::lab {

std::string design_id(const Design& design) { return sha256_hex(canonical_json(design_to_json(design))); }

Registration register_design(const Design& design) {
  Registration r;
  r.canonical = canonical_json(design_to_json(design));
  r.design_id = sha256_hex(r.canonical);
  r.block_orders = block_orders(design, r.design_id);
  r.sign_test_minimum_p = sign_test_minimum_p(design.blocks);
  r.permutation_assignments = permutation_assignments(design.blocks, design.starts_per_arm);
  r.permutation_exact = r.permutation_assignments <= kMaxExactAssignments;
  r.permutation_minimum_p = permutation_minimum_p(design.blocks, design.starts_per_arm, design.monte_carlo_samples);
  return r;
}

}  // namespace frank::lab
