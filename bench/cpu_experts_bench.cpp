// The CPU expert runtime (cpu/quant/expert_runner) on DeepSeek-V4-Flash's routed experts (FP4,
// hidden 4096, intermediate 2048): time per step to run E experts over n tokens on a pinned thread
// pool, against this machine's DRAM read bandwidth measured in the same run.
//
//   cpu_experts_bench [--reps N] [--experts E] [--rotate-mib M] [--bandwidth-mib M]
//
// Weights come from DRAM: distinct expert copies totalling >= --rotate-mib (default 2048, far above
// any LLC) are cycled so that every step reads experts no recent step touched. Bytes per step = the
// E experts' weights and scales (activations are tiny). Prints Markdown tables.
#include <fmt/format.h>

#include <random>
#include <string>
#include <vector>

#include "frank/core/error.h"
#include "frank/core/thread_pool.h"
#include "frank/cpu/quant/expert_runner.h"
#include "memory_bandwidth.h"

namespace {

using frank::bench::Clock;
using frank::bench::seconds_since;
using frank::bench::Stats;

constexpr int64_t kHidden = 4096, kIntermediate = 2048;

struct Options {
  int reps = 20;
  int experts = 6;
  int64_t rotate_mib = 2048, bandwidth_mib = 2048;
};

Options parse_args(int argc, char** argv) {
  Options o;
  frank::bench::parse_int_options(argc, argv,
                                  {{"--reps", [&](int64_t v) { o.reps = static_cast<int>(v); }},
                                   {"--experts", [&](int64_t v) { o.experts = static_cast<int>(v); }},
                                   {"--rotate-mib", [&](int64_t v) { o.rotate_mib = v; }},
                                   {"--bandwidth-mib", [&](int64_t v) { o.bandwidth_mib = v; }}});
  if (o.reps < 1 || o.experts < 1) throw frank::Error("--reps and --experts must be >= 1");
  return o;
}

// One expert's bytes as shipped (random codes, scales 2^-7..2^1).
struct ExpertBytes {
  std::vector<uint8_t> gate, gate_scales, up, up_scales, down, down_scales;
  frank::cpu::Fp4Expert view() const {
    return {{gate.data(), gate_scales.data(), kIntermediate, kHidden},
            {up.data(), up_scales.data(), kIntermediate, kHidden},
            {down.data(), down_scales.data(), kHidden, kIntermediate}};
  }
  int64_t bytes() const {
    return static_cast<int64_t>(gate.size() + gate_scales.size() + up.size() + up_scales.size() + down.size() +
                                down_scales.size());
  }
};

ExpertBytes random_expert(std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255), scale(120, 128);
  auto fill = [&](std::vector<uint8_t>& v, int64_t n, bool is_scale) {
    v.resize(static_cast<size_t>(n));
    for (auto& b : v) b = static_cast<uint8_t>(is_scale ? scale(rng) : byte(rng));
  };
  ExpertBytes e;
  fill(e.gate, kIntermediate * kHidden / 2, false);
  fill(e.gate_scales, kIntermediate * kHidden / 32, true);
  fill(e.up, kIntermediate * kHidden / 2, false);
  fill(e.up_scales, kIntermediate * kHidden / 32, true);
  fill(e.down, kHidden * kIntermediate / 2, false);
  fill(e.down_scales, kHidden * kIntermediate / 32, true);
  return e;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse_args(argc, argv);
  const unsigned all = std::max(1u, std::thread::hardware_concurrency());
  std::vector<uint64_t> buffer(static_cast<size_t>(o.bandwidth_mib) << 17, 1);
  const Stats bw1 = frank::bench::read_bandwidth(buffer, 1, 10), bwn = frank::bench::read_bandwidth(buffer, all, 10);
  buffer = {};
  fmt::print("DRAM read bandwidth ({} MiB, 10 passes): 1 thread median {:.1f} GB/s; {} threads median {:.1f} GB/s "
             "(min {:.1f}, max {:.1f})\n\n",
             o.bandwidth_mib, bw1.median, all, bwn.median, bwn.min, bwn.max);

  std::mt19937 rng(7);
  std::vector<ExpertBytes> rotation;
  int64_t total = 0;
  while (total < (o.rotate_mib << 20) || static_cast<int>(rotation.size()) < 2 * o.experts) {
    rotation.push_back(random_expert(rng));
    total += rotation.back().bytes();
  }
  const int64_t expert_bytes = rotation.front().bytes();
  const auto level = frank::cpu::active_cpu_kernels();
  fmt::print("{} distinct experts of {:.2f} MB rotated ({:.0f} MiB); kernels: {}; {} experts per step\n\n",
             rotation.size(), static_cast<double>(expert_bytes) / 1e6, static_cast<double>(total) / (1 << 20),
             frank::cpu::name(level), o.experts);
  fmt::print("| threads | n tokens | median ms | IQR ms | min-max ms | MB per step | GB/s | of {}-thread DRAM BW |\n",
             all);
  fmt::print("|---:|---:|---:|---:|---:|---:|---:|---:|\n");

  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<unsigned> thread_counts = {1};
  if (all / 2 > 1) thread_counts.push_back(all / 2);
  if (all > 1) thread_counts.push_back(all);
  size_t next = 0;
  for (unsigned threads : thread_counts) {
    frank::ThreadPool pool(threads, /*pin=*/true);
    for (int n : {1, 2, 4, 8}) {
      std::vector<float> x(static_cast<size_t>(n * kHidden));
      for (auto& v : x) v = normal(rng);
      std::vector<std::vector<float>> out(static_cast<size_t>(o.experts),
                                          std::vector<float>(static_cast<size_t>(n * kHidden)));
      std::vector<double> ms;
      for (int rep = -1; rep < o.reps; ++rep) {  // rep -1 warms up
        std::vector<frank::cpu::Fp4Expert> views;
        for (int e = 0; e < o.experts; ++e) views.push_back(rotation[next++ % rotation.size()].view());
        std::vector<frank::cpu::ExpertCall> calls;
        for (int e = 0; e < o.experts; ++e) calls.push_back({&views[static_cast<size_t>(e)], x.data(), n, out[static_cast<size_t>(e)].data()});
        const auto start = Clock::now();
        frank::cpu::run_experts(pool, calls, 10.0f, level);
        if (rep >= 0) ms.push_back(1e3 * seconds_since(start));
      }
      const Stats s = frank::bench::stats(ms);
      const double mb = static_cast<double>(expert_bytes * o.experts) / 1e6, gbps = mb / s.median;  // MB/ms = GB/s
      fmt::print("| {} | {} | {:.3f} | {:.3f}-{:.3f} | {:.3f}-{:.3f} | {:.1f} | {:.1f} | {:.0f}% |\n", threads, n,
                 s.median, s.p25, s.p75, s.min, s.max, mb, gbps, 100 * gbps / bwn.median);
    }
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
