#pragma once
// Choosing the next token from logits: greedy (temperature 0) or temperature + nucleus (top-p)
// sampling from a seeded generator, so a run is reproducible.
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace frank::engine {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy (argmax, lowest id on ties)
  float top_p = 1.0f;        // keep the smallest set of tokens whose probability reaches top_p
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);  // throws frank::Error for out-of-range params
  int32_t next(std::span<const float> logits);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
};

int32_t argmax(std::span<const float> logits);

// The distribution Sampler draws from, over the whole vocabulary: one-hot at argmax for
// temperature 0, else softmax(logits / temperature) restricted to the top-p nucleus and
// renormalised (zeros outside it). Speculative decoding's acceptance rule works on it.
std::vector<double> sampling_distribution(std::span<const float> logits, const SamplingParams& params);

}  // namespace frank::engine
