#pragma once
// The checks of the CUDA ops (frank/cuda/ops.cuh) against the CPU reference, one file per op
// family. Each returns its number of failures and prints one line per case: "PASS|FAIL <op> <case>
// max_err=<e> tol=<t>".
#include <cstdint>
#include <vector>

namespace frank_test {

int check_dense_ops(uint64_t seed);
int check_attention_ops(uint64_t seed);
int check_moe_ops(uint64_t seed);
int check_sampling_ops(uint64_t seed);

// Largest |got - want| / max(1, |want|) over two equally long arrays.
double max_scaled_error(const std::vector<float>& got, const std::vector<float>& want);

// Prints the PASS/FAIL line of one case and returns 1 for a failure, 0 for a pass.
int report(const char* op, const char* what, double err, double tol);

}  // namespace frank_test
