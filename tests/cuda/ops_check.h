#pragma once
// The checks of the CUDA ops (frank/cuda/ops.cuh) against the CPU reference, one file per op
// family. Each returns its number of failures and prints one line per case: "PASS|FAIL <op> <case>
// max_err=<e> tol=<t>".
#include <cstdint>
#include <string>
#include <vector>

#include "frank/core/linear_weight.h"
#include "frank/core/splitmix64.h"
#include "frank/cuda/weight_format.h"
#include "frank/model/config.h"
#include "frank/model/weights.h"

namespace frank_test {

int check_dense_ops(uint64_t seed);
int check_attention_ops(uint64_t seed);
int check_moe_ops(uint64_t seed);
int check_exl3_moe_ops(uint64_t seed);
int check_sampling_ops(uint64_t seed);
int check_v41_ops(uint64_t seed);

class Random;  // ops_check_util.h

// Largest |got - want| / max(1, |want|) over two equally long arrays.
double max_scaled_error(const std::vector<float>& got, const std::vector<float>& want);

// Random codes of an FP8 (block 128 or 32) or FP4 matrix [rows, cols] of type t: every code but
// e4m3's two NaNs (no checkpoint holds them; fp8_fp4_decode.h), scale bytes 127 + exponent + j, j
// uniform in [0, spread).
frank::QuantizedMatrix random_quantized(frank::SplitMix64& g, frank::cuda::WeightType t, int64_t rows, int64_t cols,
                                        int exponent, int spread);

// Prints the PASS/FAIL line of one case and returns 1 for a failure, 0 for a pass.
int report(const char* op, const char* what, double err, double tol);

// Split-K sums in a fixed order: a second run of an op on the same input gives the same bits.
int check_rerun(const char* op, const std::string& shape, const std::vector<std::vector<float>>& runs,
                const std::vector<std::vector<float>>& reruns);

// Hyper-connection weights of a site (rows = (2+N)*N, 3 scales) or of the head (rows = N, 1 scale),
// logits of order one (ops_check_dense.cpp).
frank::model::HyperConnectionWeights make_hc_weights(Random& rng, int N, int D, int rows, int scales);
// N streams of width D, 20 Sinkhorn iterations, hc_eps and rms_norm_eps 1e-6.
frank::model::ModelConfig hc_config(int N, int D);

}  // namespace frank_test
