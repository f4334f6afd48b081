#pragma once
// Score rows for the top-k checks: the distributions that stress each part of the contract (ties,
// signed zeros, subnormals, -inf/NaN, short rows) and real-shaped rows.
#include <cstdint>
#include <string>
#include <vector>

namespace frank_test {

enum class Dist {
  normal,        // N(0, 1): the usual case, one or two radix levels
  relu,          // max(0, N(0, 1)): half the row is exactly +0
  uniform,       // [0, 1): the top bins are dense, so all three levels run
  narrow,        // 1 + j ulp, j < 8,192: only the last level separates, with ties at the k-th key
  bf16,          // N(0, 1) rounded to bf16: many ties
  few_values,    // {-1, 0.5, 1, 2}: ties everywhere
  constant,      // all 1.0
  zeros,         // all +0
  signed_zeros,  // +0 and -0 mixed with a few +-1: the k-th place falls among the zeros
  subnormal,     // subnormals of both signs, +-0 and a few tiny normals
  specials,      // N(0, 1) with -inf, NaN (both signs, several payloads) and +inf
  sparse,        // almost all -inf: fewer selectable entries than k
  invisible,     // only -inf and NaN: nothing selectable
  sample_trap,   // N(0, 1), but 64 of the 1,024 entries the kernels sample are huge: the sampled
                 // floor then leaves fewer than k entries, and level 0 must run again without it
};

const char* dist_name(Dist d);
inline constexpr Dist kAllDists[] = {Dist::normal,   Dist::relu,         Dist::uniform,   Dist::narrow,   Dist::bf16,
                                     Dist::few_values, Dist::constant,   Dist::zeros,     Dist::signed_zeros,
                                     Dist::subnormal, Dist::specials,     Dist::sparse,    Dist::invisible,
                                     Dist::sample_trap};

struct Case {
  std::string group;  // edge, real, random, small
  Dist dist;
  int rows, n, k;
  uint64_t seed;
};

// The kernels the check compares and the benchmark times: version 2 at each forced cluster size
// too, so that every split of a row is covered.
struct Variant {
  const char* name;
  int version;
  int cluster;  // version 2's blocks per row; 0 = its own choice
};
inline constexpr Variant kTopKVariants[] = {{"v1", 1, 0},     {"v2", 2, 0},     {"v2.c2", 2, 2},
                                            {"v2.c4", 2, 4}, {"v2.c8", 2, 8}, {"v3", 3, 0}};
inline constexpr int kNumTopKVariants = sizeof(kTopKVariants) / sizeof(kTopKVariants[0]);

// rows * n scores of the case's distribution, from its seed.
std::vector<float> make_scores(const Case& c);

// Every distribution at lengths around the pool, cache and alignment boundaries, k in {1, 512, 1024}.
std::vector<Case> edge_cases(uint64_t seed);
// Lengths 1K..1M, k = 512, 1..8 rows per call.
std::vector<Case> real_cases(uint64_t seed);
// Random lengths, k, row counts and distributions.
std::vector<Case> random_cases(uint64_t seed, int count);
// A few cases that still reach every code path, small enough for compute-sanitizer.
std::vector<Case> small_cases(uint64_t seed);

// Fast deterministic generator (splitmix64), shared with the benchmark.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  float normal();
};

}  // namespace frank_test
