#include "topk_cases.h"

#include <bit>
#include <cmath>
#include <limits>

namespace frank_test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

// Rounds to the nearest bf16 (ties to even), kept as fp32.
float round_bf16(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  return from_bits((b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u);
}

float special(Rng& r) {
  switch (r.next() % 6) {
    case 0: return -kInf;
    case 1: return kInf;
    case 2: return std::numeric_limits<float>::quiet_NaN();
    case 3: return -std::numeric_limits<float>::quiet_NaN();
    case 4: return from_bits(0x7f800001u + static_cast<uint32_t>(r.next() % 0x7fffff));  // signalling NaN payloads
    default: return from_bits(0xffc00000u | static_cast<uint32_t>(r.next() % 0x3fffff));  // negative NaN payloads
  }
}

float draw(Dist d, Rng& r) {
  switch (d) {
    case Dist::normal: return r.normal();
    case Dist::relu: return std::max(0.0f, r.normal());
    case Dist::uniform: return static_cast<float>(r.uniform());
    case Dist::narrow: return from_bits(0x3f800000u + static_cast<uint32_t>(r.next() % 8192));
    case Dist::bf16: return round_bf16(r.normal());
    case Dist::few_values: {
      static constexpr float v[] = {-1.0f, 0.5f, 1.0f, 2.0f};
      return v[r.next() % 4];
    }
    case Dist::constant: return 1.0f;
    case Dist::zeros: return 0.0f;
    case Dist::signed_zeros: {
      const uint64_t u = r.next() % 100;
      return u < 2 ? 1.0f : u < 4 ? -1.0f : (u & 1) ? -0.0f : 0.0f;
    }
    case Dist::subnormal: {
      const uint64_t u = r.next();
      if (u % 50 == 0) return (u & 2) ? -0.0f : 0.0f;
      if (u % 50 == 1) return from_bits(0x00800000u + static_cast<uint32_t>((u >> 8) % 64));  // tiny normals
      const float s = from_bits(1u + static_cast<uint32_t>((u >> 8) % 0x7fffff));
      return (u & 4) ? -s : s;
    }
    case Dist::specials: return r.next() % 10 < 3 ? special(r) : r.normal();
    case Dist::sparse: return r.next() % 1000 == 0 ? r.normal() : -kInf;
    case Dist::invisible: {
      const float s = special(r);
      return s == kInf ? -kInf : s;
    }
    case Dist::sample_trap: return r.normal();  // make_scores plants the trap
  }
  return 0.0f;
}

}  // namespace

float Rng::normal() {
  // Box-Muller; 1 - u keeps the logarithm finite.
  const double u = 1.0 - uniform(), v = uniform();
  return static_cast<float>(std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v));
}

const char* dist_name(Dist d) {
  switch (d) {
    case Dist::normal: return "normal";
    case Dist::relu: return "relu";
    case Dist::uniform: return "uniform";
    case Dist::narrow: return "narrow";
    case Dist::bf16: return "bf16";
    case Dist::few_values: return "few_values";
    case Dist::constant: return "constant";
    case Dist::zeros: return "zeros";
    case Dist::signed_zeros: return "signed_zeros";
    case Dist::subnormal: return "subnormal";
    case Dist::specials: return "specials";
    case Dist::sparse: return "sparse";
    case Dist::invisible: return "invisible";
    case Dist::sample_trap: return "sample_trap";
  }
  return "?";
}

std::vector<float> make_scores(const Case& c) {
  Rng r{c.seed};
  std::vector<float> s(static_cast<size_t>(c.rows) * c.n);
  for (float& x : s) x = draw(c.dist, r);
  if (c.dist == Dist::sample_trap)
    for (int row = 0; row < c.rows; ++row)
      for (int t = 0; t < 64 && c.n > 0; ++t)  // the positions the kernels sample (topk_select.cuh)
        s[static_cast<size_t>(row) * c.n + static_cast<size_t>(static_cast<long long>(c.n) * t / 1024)] = 100.0f + t;
  return s;
}

std::vector<Case> edge_cases(uint64_t seed) {
  // Lengths: tiny and shorter than k; the longest row gathered whole (1,024) and one past it; the
  // pool (4,096) and one past it; odd lengths, so rows after the first start off 16-byte
  // alignment; version 3's keys-a-thread steps (8,192 and 12,288; 8,320 is a 32K context's CSA
  // row) and its longest row (16,384) and one past each; past a block's shared-memory cache
  // (32,768) and the sampling threshold (16,384), alone and split 2/4/8 ways.
  static constexpr int kLengths[] = {0,     1,     7,     300,   1024,  1025,  4096,  4097,  8192,
                                     8193,  8320,  12288, 12289, 16384, 16385, 20001, 70001, 300007};
  static constexpr int kKs[] = {1, 512, 1024};
  std::vector<Case> out;
  for (Dist d : kAllDists)
    for (int n : kLengths)
      for (int k : kKs) out.push_back({"edge", d, n > 100000 ? 1 : 2, n, k, seed++});
  return out;
}

std::vector<Case> real_cases(uint64_t seed) {
  static constexpr int kLengths[] = {1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20};
  std::vector<Case> out;
  for (int rows : {1, 2, 4, 8})
    for (int n : kLengths)
      for (Dist d : {Dist::normal, Dist::relu, Dist::bf16}) out.push_back({"real", d, rows, n, 512, seed++});
  return out;
}

std::vector<Case> random_cases(uint64_t seed, int count) {
  Rng r{seed};
  std::vector<Case> out;
  constexpr int kDists = sizeof(kAllDists) / sizeof(kAllDists[0]);
  for (int i = 0; i < count; ++i) {
    // Log-uniform length up to 2^19, so short and long rows are equally common.
    const int n = static_cast<int>(std::exp2(r.uniform() * 19.0));
    const int k = 1 + static_cast<int>(r.next() % 1024);
    const int rows = 1 + static_cast<int>(r.next() % 4);
    out.push_back({"random", kAllDists[r.next() % kDists], rows, n, k, r.next()});
  }
  return out;
}

std::vector<Case> small_cases(uint64_t seed) {
  // Gather at once (<= 4,096), one level, three levels, tie mode, a sampled list, a misleading
  // sample, and a chunk past the cache.
  return {{"small", Dist::specials, 2, 3001, 512, seed},     {"small", Dist::normal, 2, 20001, 512, seed + 1},
          {"small", Dist::narrow, 1, 30000, 512, seed + 2},  {"small", Dist::zeros, 1, 20000, 512, seed + 3},
          {"small", Dist::uniform, 1, 40003, 100, seed + 4}, {"small", Dist::signed_zeros, 2, 9000, 1024, seed + 5},
          {"small", Dist::sample_trap, 1, 20000, 512, seed + 6}};
}

}  // namespace frank_test
