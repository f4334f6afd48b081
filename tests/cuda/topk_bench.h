#pragma once
// Micro-benchmark of the top-k kernels: rows {1,2,4,8} x length {1K..1M}, k = 512.
namespace frank_test {

// Prints the tables to stdout; returns non-zero on a CUDA failure.
int run_topk_bench(int launches);

}  // namespace frank_test
