#pragma once
// The smallest p-values a design can reach, known before anything runs (like benchstat's
// "need >= N samples" warning): a design whose best case cannot reach its alpha is refused.
#include <cstdint>

namespace frank::lab {

// Exact enumeration of the permutation test up to this many assignments; seeded Monte Carlo above.
inline constexpr double kMaxExactAssignments = 1 << 20;

// Exact one-sided sign test over k blocks: every block better gives 0.5^k.
double sign_test_minimum_p(int64_t blocks);

// Within-block permutation: each block can give the treatment label to any starts_per_arm of its
// 2*starts_per_arm starts, C(2s, s) ways, so there are C(2s, s)^blocks assignments (2^blocks for
// one start per arm).
double permutation_assignments(int64_t blocks, int64_t starts_per_arm);

// 1 / assignments when enumerated exactly; with Monte Carlo the estimate (1 + hits) / (1 + samples)
// cannot go below 1 / (1 + samples).
double permutation_minimum_p(int64_t blocks, int64_t starts_per_arm, int64_t monte_carlo_samples);

}  // namespace frank::lab
