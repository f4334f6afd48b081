#pragma once
// Choosing the next token from logits: greedy (temperature 0) or temperature + nucleus (top-p)
// sampling from a seeded generator, so a run is reproducible.
#include <cstdint>
#include <random>
#include <span>

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

}  // namespace frank::engine
