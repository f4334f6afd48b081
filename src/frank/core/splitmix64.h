#pragma once
// SplitMix64 (Steele, Lea & Flood 2014): a tiny, portable 64-bit generator, and its finaliser as a
// hash that turns nearby inputs into unrelated words. Used wherever a reproducible pseudo-random
// value must be the same on every platform (std:: distributions are implementation-defined).
#include <cstdint>

namespace frank {

inline uint64_t splitmix64_finalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t operator()() { return splitmix64_finalize(state_ += 0x9e3779b97f4a7c15ULL); }

 private:
  uint64_t state_;
};

}  // namespace frank
