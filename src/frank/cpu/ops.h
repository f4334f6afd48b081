#pragma once
// Reference CPU ops in fp32. Dot products accumulate in double: the reference should sit closer to
// the exact math than any fp32 implementation it judges, so its own rounding never decides a test.
#include <cstdint>
#include <span>

#include "frank/core/linear_weight.h"
#include "frank/core/tensor.h"

namespace frank::cpu {

double dot(const float* a, const float* b, int64_t n);

// y[t, :] = W · x[t, :] for t < n; W is [out, in] row-major, x is [n, in], y is [n, out].
void linear(const float* x, int64_t n, const Tensor& w, float* y);
Tensor linear(const Tensor& x, const Tensor& w);
// The same for a Linear weight in any of its storage formats (fp32, FP8 blocks, FP4). Rows
// [row_begin, row_end) only: y then holds row_end - row_begin outputs per token.
void linear(const float* x, int64_t n, const LinearWeight& w, float* y);
void linear_rows(const float* x, int64_t n, const LinearWeight& w, int64_t row_begin, int64_t row_end, float* y);
Tensor linear(const Tensor& x, const LinearWeight& w);

// x <- x * rsqrt(mean(x^2) + eps) [* weight], as transformers' (Unweighted)RMSNorm: normalise,
// then scale by the weight.
void rms_norm(float* x, int64_t n, const float* weight, float eps);

// Softmax over n values in place (max-subtracted).
void softmax(float* x, int64_t n);

float sigmoid(float x);
float silu(float x);
// torch's softplus with beta 1 and threshold 20: x above 20 is returned as is.
float softplus(float x);

}  // namespace frank::cpu
