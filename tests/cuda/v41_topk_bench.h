#pragma once
// Timing of the V4.1 two-level top-k at real shapes: level 1, level 2 unfused (candidate_mask +
// select_entries) and fused (select_entries_in_blocks).
namespace frank_test {

// Prints the table to stdout; returns non-zero on a CUDA failure.
int run_v41_topk_bench(int launches);

}  // namespace frank_test
