#include "frank/engine/logit_divergence.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "frank/core/error.h"

namespace frank::engine {
namespace {

// log softmax of one row, in double.
std::vector<double> log_probs(const float* logits, int64_t n) {
  const double mx = *std::max_element(logits, logits + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(logits[i] - mx);
  const double log_z = mx + std::log(sum);
  std::vector<double> lp(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) lp[static_cast<size_t>(i)] = logits[i] - log_z;
  return lp;
}

}  // namespace

LogitDivergence logit_divergence(const Tensor& reference, const Tensor& candidate) {
  if (reference.shape != candidate.shape || reference.shape.size() != 2 || reference.cols() == 0)
    throw Error("logit divergence: the two runs' logits differ in shape");
  LogitDivergence d;
  const int64_t vocab = reference.cols();
  for (int64_t r = 0; r < reference.rows(); ++r) {
    const auto p = log_probs(reference.row(r), vocab), q = log_probs(candidate.row(r), vocab);
    double kl = 0;
    for (size_t i = 0; i < p.size(); ++i) kl += std::exp(p[i]) * (p[i] - q[i]);
    kl = std::max(0.0, kl);  // rounding can leave a tiny negative sum for equal rows
    d.mean_kl += kl;
    d.max_kl = std::max(d.max_kl, kl);
    d.greedy_agree += std::max_element(p.begin(), p.end()) - p.begin() == std::max_element(q.begin(), q.end()) - q.begin();
    ++d.positions;
  }
  if (d.positions > 0) d.mean_kl /= static_cast<double>(d.positions);
  return d;
}

}  // namespace frank::engine
