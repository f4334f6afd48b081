#pragma once
// Reproducible randomness for the trace generator. std::mt19937_64's output sequence is fixed by
// the C++ standard, but the std:: distributions (and std::shuffle) are not, so every draw is made
// here from raw 64-bit words.
#include <cstdint>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

#include "frank/core/splitmix64.h"

namespace frank::experts {

class RandomStream {
 public:
  explicit RandomStream(uint64_t seed) : engine_(seed) {}

  // Uniform in [0, 1) from the top 53 bits of a word.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Uniform in [0, n), n >= 1 (the bias of floor(u * n) is below 2^-53 * n, far below any effect here).
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(uniform() * n); }

  template <class T>
  void shuffle(std::vector<T>& v) {  // Fisher-Yates
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(static_cast<uint32_t>(i))]);
  }

 private:
  std::mt19937_64 engine_;
};

// FNV-1a of a name: workload names become seeds.
inline uint64_t seed_of(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// Derives an independent seed for a sub-stream (a layer, a phase): the SplitMix64 finaliser of a
// combination of the two, so nearby inputs give unrelated seeds.
inline uint64_t mix_seed(uint64_t seed, uint64_t stream) {
  return splitmix64_finalize(seed ^ (stream + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)));
}

}  // namespace frank::experts
