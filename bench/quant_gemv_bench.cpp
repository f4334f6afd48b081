// Single-threaded FP8-block / FP4 / EXL3 linear kernels (src/frank/cpu/quant) on DeepSeek-V4-Flash
// shapes, and FP4 and EXL3 (K = 2, 3, 4, MUL1) on DeepSeek-V4.1's routed-expert shapes, measured
// against this machine's DRAM read bandwidth measured in the same run.
//
//   quant_gemv_bench [--reps N] [--rotate-mib M] [--bandwidth-mib M] [--v41-experts-only 1]
//
// Weights come from DRAM: each shape is copied until the copies total >= --rotate-mib (default 512,
// well above a 32 MiB LLC) and every call uses the next copy. Bytes moved per call = weights +
// scales (EXL3: suh, svh) + x + y. Prints Markdown tables: bandwidth, one row per level / shape / n,
// then a summary of the V4.1 expert GEMVs (n = 1): each format's fraction of the measured bandwidth
// and its weights per second, EXL3 beside FP4 (the official expert format) at the same shape.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "frank/core/error.h"
#include "frank/cpu/quant/exl3_gemv.h"
#include "frank/cpu/quant/quant_gemv.h"
#include "memory_bandwidth.h"

namespace {

using frank::cpu::CpuKernels;
using frank::bench::Clock;
using frank::bench::read_bandwidth;
using frank::bench::seconds_since;
using frank::bench::Stats;
using frank::bench::stats;

struct Options {
  int reps = 30;
  int64_t rotate_mib = 512;
  int64_t bandwidth_mib = 1024;
  bool v41_experts_only = false;  // skip the V4 FP8 / FP4 rows
};

Options parse_args(int argc, char** argv) {
  Options o;
  frank::bench::parse_int_options(argc, argv,
                                  {{"--reps", [&](int64_t v) { o.reps = static_cast<int>(v); }},
                                   {"--rotate-mib", [&](int64_t v) { o.rotate_mib = v; }},
                                   {"--bandwidth-mib", [&](int64_t v) { o.bandwidth_mib = v; }},
                                   {"--v41-experts-only", [&](int64_t v) { o.v41_experts_only = v != 0; }}});
  if (o.reps < 1) throw frank::Error("--reps must be >= 1");
  return o;
}

enum class Format { Fp8, Fp4, Exl3 };

struct Shape {
  const char* what;
  Format format;
  int64_t rows, cols;
  int exl3_bits = 0;
  const char* v41_expert = nullptr;  // "gate/up" or "down" for V4.1 routed-expert shapes
};

struct Measured {
  const Shape* shape;
  CpuKernels level;
  int n;
  double gbps;
  double gweights_per_s;
};

// Copies of one random matrix (NaN bytes avoided, scales 2^-9..2^7; EXL3: any trellis bits, unit
// sign/scale vectors), enough to exceed the LLC. The copies hold the same bytes: only the
// addresses matter to the caches.
struct Rotation {
  std::vector<std::vector<uint8_t>> weights, scales;
  std::vector<std::vector<uint16_t>> trellis;  // EXL3
  std::vector<uint16_t> suh, svh;              // EXL3 (read once per call, shared by the copies)
  int64_t weight_bytes, scale_bytes;
};

Rotation make_exl3_rotation(const Shape& s, int64_t rotate_bytes, std::mt19937& rng) {
  Rotation r;
  r.weight_bytes = s.rows * s.cols * s.exl3_bits / 8;
  r.scale_bytes = 2 * (s.rows + s.cols);
  std::vector<uint16_t> words(static_cast<size_t>(r.weight_bytes / 2));
  for (auto& w : words) w = static_cast<uint16_t>(rng());
  const int64_t copies = std::max<int64_t>(2, (rotate_bytes + r.weight_bytes - 1) / r.weight_bytes);
  r.trellis.assign(static_cast<size_t>(copies), words);
  r.suh.assign(static_cast<size_t>(s.cols), 0x3C00);  // fp16 1.0
  r.svh.assign(static_cast<size_t>(s.rows), 0x3C00);
  return r;
}

Rotation make_rotation(const Shape& s, int64_t rotate_bytes, std::mt19937& rng) {
  if (s.format == Format::Exl3) return make_exl3_rotation(s, rotate_bytes, rng);
  const bool fp4 = s.format == Format::Fp4;
  Rotation r;
  r.weight_bytes = fp4 ? s.rows * s.cols / 2 : s.rows * s.cols;
  r.scale_bytes = fp4 ? s.rows * s.cols / 32 : ((s.rows + 127) / 128) * ((s.cols + 127) / 128);
  std::uniform_int_distribution<int> byte(0, 255), scale(118, 134);
  std::vector<uint8_t> w(static_cast<size_t>(r.weight_bytes)), sc(static_cast<size_t>(r.scale_bytes));
  for (auto& b : w) {
    b = static_cast<uint8_t>(byte(rng));
    if (!fp4 && (b & 0x7F) == 0x7F) b ^= 1;  // e4m3 NaN -> 448
  }
  for (auto& b : sc) b = static_cast<uint8_t>(scale(rng));
  const int64_t copies = std::max<int64_t>(2, (rotate_bytes + r.weight_bytes - 1) / r.weight_bytes);
  r.weights.assign(static_cast<size_t>(copies), w);
  r.scales.assign(static_cast<size_t>(copies), sc);
  return r;
}

size_t copies(const Rotation& r) { return r.trellis.empty() ? r.weights.size() : r.trellis.size(); }

void call(CpuKernels level, const Shape& s, const Rotation& r, size_t copy, const float* x, int n, float* y) {
  if (s.format == Format::Exl3) {
    const frank::cpu::Exl3Matrix w{{r.trellis[copy].data(), s.cols / 16, s.rows / 16, s.exl3_bits, frank::Exl3Codebook::Mul1},
                                   r.suh.data(), r.svh.data(), s.rows, s.cols};
    frank::cpu::linear_rows(level, x, n, w, y, 0, s.rows);
  } else if (s.format == Format::Fp4) {
    const frank::cpu::Fp4Matrix w{r.weights[copy].data(), r.scales[copy].data(), s.rows, s.cols};
    frank::cpu::linear_rows(level, x, n, w, y, 0, s.rows);
  } else {
    const frank::cpu::Fp8BlockMatrix w{r.weights[copy].data(), r.scales[copy].data(), s.rows, s.cols, 128};
    frank::cpu::linear_rows(level, x, n, w, y, 0, s.rows);
  }
}

// The answer to "what fraction of the memory bandwidth does the EXL3 expert GEMV reach, beside FP4":
// one line per level and V4.1 expert projection at n = 1 (one token: decode).
void print_v41_expert_summary(const std::vector<Measured>& measured, double bandwidth_gbps) {
  fmt::print("\n## V4.1 routed-expert GEMV, one token, one thread: fraction of the measured DRAM read bandwidth "
             "({:.1f} GB/s)\n\n",
             bandwidth_gbps);
  fmt::print("| level | projection | format | GB/s | of DRAM BW | G weights/s | time vs FP4 |\n");
  fmt::print("|---|---|---|---:|---:|---:|---:|\n");
  for (const Measured& fp4 : measured) {
    if (fp4.n != 1 || fp4.shape->v41_expert == nullptr || fp4.shape->format != Format::Fp4) continue;
    for (const Measured& m : measured) {
      if (m.n != 1 || m.level != fp4.level || m.shape->v41_expert == nullptr ||
          std::string(m.shape->v41_expert) != fp4.shape->v41_expert)
        continue;
      const std::string format = m.shape->format == Format::Fp4 ? "FP4" : fmt::format("EXL3 K{}", m.shape->exl3_bits);
      // Same shape, so the ratio of weights per second is the inverse ratio of times.
      fmt::print("| {} | {} | {} | {:.2f} | {:.1f}% | {:.2f} | {:.1f}x |\n", frank::cpu::name(m.level),
                 m.shape->v41_expert, format, m.gbps, 100.0 * m.gbps / bandwidth_gbps, m.gweights_per_s,
                 fp4.gweights_per_s / m.gweights_per_s);
    }
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse_args(argc, argv);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());

  std::vector<uint64_t> buffer(static_cast<size_t>(o.bandwidth_mib) << 17, 1);  // MiB / 8 bytes
  const Stats bw1 = read_bandwidth(buffer, 1, 10), bwn = read_bandwidth(buffer, threads, 10);
  buffer = {};
  fmt::print("DRAM read bandwidth ({} MiB buffer, 10 passes): 1 thread median {:.1f} GB/s (min {:.1f}, max {:.1f}); "
             "{} threads median {:.1f} GB/s (min {:.1f}, max {:.1f})\n\n",
             o.bandwidth_mib, bw1.median, bw1.min, bw1.max, threads, bwn.median, bwn.min, bwn.max);

  const Shape shapes[] = {{"FP8 wq/wo-like 4096x4096", Format::Fp8, 4096, 4096},
                          {"FP8 1024x4096", Format::Fp8, 1024, 4096},
                          {"FP8 32768x1024", Format::Fp8, 32768, 1024},
                          {"FP4 expert gate/up 2048x4096", Format::Fp4, 2048, 4096},
                          {"FP4 expert down 4096x2048", Format::Fp4, 4096, 2048},
                          {"FP4 V4.1 expert gate/up 2304x5120", Format::Fp4, 2304, 5120, 0, "gate/up"},
                          {"FP4 V4.1 expert down 5120x2304", Format::Fp4, 5120, 2304, 0, "down"},
                          {"EXL3 K2 V4.1 expert gate/up 2304x5120", Format::Exl3, 2304, 5120, 2, "gate/up"},
                          {"EXL3 K2 V4.1 expert down 5120x2304", Format::Exl3, 5120, 2304, 2, "down"},
                          {"EXL3 K3 V4.1 expert gate/up 2304x5120", Format::Exl3, 2304, 5120, 3, "gate/up"},
                          {"EXL3 K3 V4.1 expert down 5120x2304", Format::Exl3, 5120, 2304, 3, "down"},
                          {"EXL3 K4 V4.1 expert gate/up 2304x5120", Format::Exl3, 2304, 5120, 4, "gate/up"},
                          {"EXL3 K4 V4.1 expert down 5120x2304", Format::Exl3, 5120, 2304, 4, "down"}};
  fmt::print("| level | shape | n | median µs | IQR µs | min-max µs | MB moved | GB/s (median) | of 1-thread DRAM BW |\n");
  fmt::print("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  std::mt19937 rng(1);
  std::vector<Measured> measured;
  for (const Shape& s : shapes) {
    if (o.v41_experts_only && s.v41_expert == nullptr) continue;
    const Rotation r = make_rotation(s, o.rotate_mib << 20, rng);
    std::vector<float> x(static_cast<size_t>(8 * s.cols)), y(static_cast<size_t>(8 * s.rows));
    std::normal_distribution<float> normal;
    for (auto& v : x) v = normal(rng);
    for (CpuKernels level : {CpuKernels::Scalar, CpuKernels::Avx2, CpuKernels::Avx512}) {
      if (!frank::cpu::cpu_supports(level)) continue;
      for (int n : {1, 2, 4, 8}) {
        size_t copy = 0;
        call(level, s, r, copy++, x.data(), n, y.data());  // warm-up (page faults, code)
        std::vector<double> micros;
        for (int rep = 0; rep < o.reps; ++rep, copy = (copy + 1) % copies(r)) {
          const auto start = Clock::now();
          call(level, s, r, copy, x.data(), n, y.data());
          micros.push_back(seconds_since(start) * 1e6);
        }
        const Stats t = stats(micros);
        const double bytes = static_cast<double>(r.weight_bytes + r.scale_bytes + 4 * n * (s.cols + s.rows));
        const double gbps = bytes / t.median / 1e3;
        fmt::print("| {} | {} | {} | {:.0f} | {:.0f}-{:.0f} | {:.0f}-{:.0f} | {:.2f} | {:.1f} | {:.0f}% |\n",
                   frank::cpu::name(level), s.what, n, t.median, t.p25, t.p75, t.min, t.max, bytes / 1e6, gbps,
                   100.0 * gbps / bw1.median);
        measured.push_back({&s, level, n, gbps, static_cast<double>(s.rows * s.cols) / t.median / 1e3});
      }
    }
  }
  print_v41_expert_summary(measured, bw1.median);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
