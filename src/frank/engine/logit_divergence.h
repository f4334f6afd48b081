#pragma once
// How far one run's next-token distributions are from a reference run's at the same positions:
// the exact KL(p_reference || p_candidate) over the whole vocabulary per row of logits (softmax in
// double), its mean and max over the rows, and how often the greedy (argmax) tokens agree. Used to
// report what a lossy K=V storage format costs (tests/cuda/test_cuda_kv_formats.cpp, bench decode).
#include <cstdint>

#include "frank/core/tensor.h"

namespace frank::engine {

struct LogitDivergence {
  int64_t positions = 0;
  double mean_kl = 0, max_kl = 0;  // nats
  int64_t greedy_agree = 0;        // rows whose argmax (lowest id among ties) is the same
};

// reference and candidate: logits [rows, vocab] of equal shapes; throws frank::Error otherwise.
LogitDivergence logit_divergence(const Tensor& reference, const Tensor& candidate);

}  // namespace frank::engine
