#pragma once
// Portable random numbers for the lab. std::uniform_int_distribution is implementation-defined
// (libstdc++ and libc++ give different values), so every draw that must be reproducible elsewhere
// goes through these few documented lines instead.
#include <cstdint>

#include "frank/core/splitmix64.h"

namespace frank::lab {

// An integer uniform in [0, n), n >= 1, from a source of uniform 64-bit words, without modulo bias: words at
// or above the largest multiple of n below 2^64 are rejected and drawn again.
template <class Next>
uint64_t uniform_below(uint64_t n, Next&& next_word) {
  const uint64_t limit = UINT64_MAX - (UINT64_MAX % n + 1) % n;  // last accepted word; 2^64 mod n rejected
  for (;;) {
    const uint64_t word = next_word();
    if (word <= limit) return word % n;
  }
}

using frank::SplitMix64;  // the Monte Carlo resampling generator

}  // namespace frank::lab
