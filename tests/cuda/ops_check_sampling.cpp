// The greedy choice on the GPU (frank/cuda/ops.cuh: argmax_rows) against engine::argmax on rows
// of the real vocabulary size: random logits, many tied maxima, NaNs (first and elsewhere),
// -inf rows, +0/-0 ties. The token ids must be equal; err counts the rows that differ.
#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "cuda_util.h"
#include "frank/cuda/ops.cuh"
#include "frank/engine/sampling.h"
#include "ops_check.h"

namespace frank_test {
namespace {

int check_rows(const std::vector<std::vector<float>>& rows, const char* what) {
  const int64_t vocab = static_cast<int64_t>(rows.front().size());
  std::vector<float> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  DeviceBuffer<float> d_logits(flat.size());
  DeviceBuffer<int32_t> d_out(rows.size());
  CUDA_OK(cudaMemcpy(d_logits.get(), flat.data(), flat.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_OK(frank::cuda::argmax_rows(d_logits.get(), static_cast<int>(rows.size()), vocab, d_out.get(), nullptr));
  std::vector<int32_t> got(rows.size());
  CUDA_OK(cudaMemcpy(got.data(), d_out.get(), got.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (size_t r = 0; r < rows.size(); ++r) wrong += got[r] != frank::engine::argmax(rows[r]) ? 1 : 0;
  return report("argmax_rows", what, wrong, 0);
}

}  // namespace

int check_sampling_ops(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t vocab = 129280;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  auto random_row = [&] {
    std::normal_distribution<float> normal(0.f, 4.f);
    std::vector<float> r(static_cast<size_t>(vocab));
    for (float& v : r) v = normal(rng);
    return r;
  };
  int failures = 0;
  std::vector<std::vector<float>> random;
  for (int i = 0; i < 8; ++i) random.push_back(random_row());
  failures += check_rows(random, "8 random rows, V4 vocabulary");

  std::vector<std::vector<float>> edge;
  std::vector<float> ties(static_cast<size_t>(vocab), 1.f);  // every value the max: index 0
  edge.push_back(ties);
  std::vector<float> late_ties = random_row();  // the max three times, first at 70001
  for (int64_t i : {70001, 90000, 129279}) late_ties[static_cast<size_t>(i)] = 100.f;
  edge.push_back(late_ties);
  std::vector<float> nan_first = random_row();  // a NaN at 0 is never replaced: 0
  nan_first[0] = nan;
  edge.push_back(nan_first);
  std::vector<float> nans = random_row();  // NaNs elsewhere are skipped
  for (int64_t i = 5; i < vocab; i += 1000) nans[static_cast<size_t>(i)] = nan;
  nans[12345] = 1e30f;
  edge.push_back(nans);
  edge.push_back(std::vector<float>(static_cast<size_t>(vocab), -inf));  // all -inf: 0
  std::vector<float> zeros(static_cast<size_t>(vocab), -1.f);  // +0 at 300 and -0 at 400 tie: 300 wins
  zeros[400] = -0.f;
  zeros[300] = 0.f;
  edge.push_back(zeros);
  std::vector<float> nan_rest(static_cast<size_t>(vocab), nan);  // only index 7 is a number
  nan_rest[7] = -3.f;
  edge.push_back(nan_rest);
  failures += check_rows(edge, "ties, NaN, -inf, +0/-0 rows");

  DeviceBuffer<float> d(4);
  DeviceBuffer<int32_t> o(1);
  const bool refused = frank::cuda::argmax_rows(d.get(), 1, 0, o.get(), nullptr) == cudaErrorInvalidValue &&
                       frank::cuda::argmax_rows(nullptr, 1, 4, o.get(), nullptr) == cudaErrorInvalidValue;
  failures += report("argmax_rows", "bad arguments rejected", refused ? 0.0 : 1.0, 0.0);
  return failures;
}

}  // namespace frank_test
