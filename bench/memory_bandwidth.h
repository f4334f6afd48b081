#pragma once
// What the benchmarks share: their integer options, robust summaries of repeated timings, and the
// machine's DRAM read bandwidth measured in the same run (the physical limit a weight-streaming
// kernel is judged by).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "frank/core/error.h"
#include "frank/core/thread_pool.h"

namespace frank::bench {

// Reads `--name value` pairs with integer values, handing each to its setter; an unknown name or a
// missing value is a frank::Error.
inline void parse_int_options(int argc, char** argv,
                              const std::map<std::string, std::function<void(int64_t)>>& setters) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto it = setters.find(arg);
    if (it == setters.end()) throw Error(fmt::format("unknown option {}", arg));
    if (i + 1 >= argc) throw Error(fmt::format("{} needs a value", arg));
    it->second(std::stoll(argv[++i]));
  }
}

using Clock = std::chrono::steady_clock;

struct Stats {
  double median, p25, p75, min, max;
};

inline Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) { return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)]; };
  return {at(0.5), at(0.25), at(0.75), v.front(), v.back()};
}

inline double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Sums 64-bit words with 8 independent accumulators: far more load throughput than DRAM gives.
inline uint64_t stream_sum(const uint64_t* p, size_t words) {
  uint64_t acc[8] = {};
  for (size_t i = 0; i + 8 <= words; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += p[i + k];
  uint64_t s = 0;
  for (uint64_t a : acc) s += a;
  return s;
}

// DRAM read bandwidth in GB/s of streaming `buffer` (make it much larger than the LLC), one value
// per pass, split over `threads`.
inline Stats read_bandwidth(const std::vector<uint64_t>& buffer, unsigned threads, int reps) {
  std::vector<double> gbps;
  volatile uint64_t sink = 0;
  for (int r = 0; r < reps; ++r) {
    std::vector<uint64_t> sums(threads);
    const size_t per_thread = buffer.size() / threads;
    const auto start = Clock::now();
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { sums[t] = stream_sum(buffer.data() + t * per_thread, per_thread); });
    for (auto& th : pool) th.join();
    const double s = seconds_since(start);
    for (uint64_t v : sums) sink = sink + v;
    gbps.push_back(static_cast<double>(per_thread * threads * sizeof(uint64_t)) / s / 1e9);
  }
  return stats(gbps);
}

// The same on a pool's threads, one slice each: what the pool that runs the CPU's experts can read.
// (Threads started by a pool's pinned caller inherit its pinning to one core, so the overload
// above would measure one core there.)
inline Stats read_bandwidth(const std::vector<uint64_t>& buffer, ThreadPool& pool, int reps) {
  std::vector<double> gbps;
  const unsigned threads = pool.threads();
  const size_t per_thread = buffer.size() / threads;
  std::vector<uint64_t> sums(threads);
  volatile uint64_t sink = 0;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    pool.parallel_for(threads, [&](int64_t t) {
      sums[static_cast<size_t>(t)] = stream_sum(buffer.data() + static_cast<size_t>(t) * per_thread, per_thread);
    });
    const double s = seconds_since(start);
    for (uint64_t v : sums) sink = sink + v;
    gbps.push_back(static_cast<double>(per_thread * threads * sizeof(uint64_t)) / s / 1e9);
  }
  return stats(gbps);
}

}  // namespace frank::bench
