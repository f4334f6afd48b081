// frank_v41_topk_check: the DeepSeek-V4.1 two-level top-k launchers (frank/cuda/v41_ops.cuh:
// candidate_blocks, candidate_mask, select_entries, select_entries_in_blocks) against the CPU
// reference (engine::CpuOps::candidate_blocks / select_entries, cpu_ops_v41.cpp), entry for entry:
// exact equality, no tolerance (a selection is a set of indices). The fused path is also compared
// byte for byte with the unfused one (candidate_mask + select_entries) on the GPU.
//   frank_v41_topk_check [--seed S] [--random N]   all checks; exit 1 on any mismatch
//   frank_v41_topk_check --small                   the small edge cases only (for compute-sanitizer)
//   frank_v41_topk_check --bench [--launches N]    unfused vs fused at real shapes (v41_topk_bench.cpp)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda_util.h"
#include "frank/cuda/v41_ops.cuh"
#include "frank/engine/cpu_ops.h"
#include "topk_check_options.h"
#include "v41_topk_bench.h"

namespace frank_test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// How a case's scores are drawn.
enum class Fill { normal, ties, zeros, subnormal, neginf_runs, nan };

const char* fill_name(Fill f) {
  switch (f) {
    case Fill::normal: return "normal";
    case Fill::ties: return "ties";
    case Fill::zeros: return "zeros";
    case Fill::subnormal: return "subnormal";
    case Fill::neginf_runs: return "neginf-runs";
    case Fill::nan: return "nan";
  }
  return "?";
}

// One call of the four launchers: level 1 over the candidate source's scores [rows, block_cols],
// level 2 over an index source's scores [rows, cols]; token t sits at position start + t.
struct Case {
  std::string group;
  Fill fill;
  int rows, cols, block_cols;
  int64_t start;
  int ratio, topk_blocks, block_size, topk;
  uint64_t seed;
};

std::vector<float> make_scores(Fill fill, int rows, int cols, std::mt19937_64& rng) {
  std::vector<float> s(static_cast<size_t>(rows) * cols);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 3);
  for (size_t i = 0; i < s.size(); ++i) {
    switch (fill) {
      case Fill::normal: s[i] = normal(rng); break;
      case Fill::ties: s[i] = static_cast<float>(small(rng) == 0 ? 2 : 1); break;  // mostly one value
      // ReLU-like: many exact zeros of either sign, a few positives and negatives.
      case Fill::zeros: {
        const int r = small(rng);
        s[i] = r == 0 ? 0.0f : r == 1 ? -0.0f : r == 2 ? std::fabs(normal(rng)) * 1e-3f : -1.0f;
        break;
      }
      // Subnormals of both signs (bit patterns below the smallest normal) and zeros.
      case Fill::subnormal: {
        uint32_t bits = static_cast<uint32_t>(rng()) & 0x007fffffu;
        if (rng() & 1) bits |= 0x80000000u;
        std::memcpy(&s[i], &bits, sizeof bits);
        break;
      }
      case Fill::neginf_runs:
      case Fill::nan: s[i] = normal(rng); break;
    }
  }
  if (fill == Fill::neginf_runs) {
    // Runs of -inf of 1 .. 40 entries (whole blocks without a reachable score), about half the row.
    std::uniform_int_distribution<int> run(1, 40);
    for (size_t i = 0; i < s.size();) {
      const size_t len = static_cast<size_t>(run(rng));
      if (rng() & 1) std::fill(s.begin() + i, s.begin() + std::min(s.size(), i + len), -kInf);
      i += len;
    }
  } else if (fill == Fill::nan) {
    std::uniform_int_distribution<int> one_in(0, 9);
    for (float& x : s)
      if (one_in(rng) == 0) x = std::nanf("");
  }
  return s;
}

// The reference's selections padded with -1 to width.
std::vector<int32_t> padded(const frank::engine::CpuOps::Selection& sel, int width) {
  std::vector<int32_t> out(sel.size() * width, -1);
  for (size_t t = 0; t < sel.size(); ++t)
    for (size_t j = 0; j < sel[t].size() && j < static_cast<size_t>(width); ++j)
      out[t * width + j] = static_cast<int32_t>(sel[t][j]);
  return out;
}

// Level 1 as the launcher writes it: the blocks whose first entry the reference's mask marks
// (a chosen block always has one: it starts below block_cols), ascending, then -1.
std::vector<int32_t> blocks_of(const frank::engine::CpuOps::Candidates& cand, int block_size, int topk_blocks) {
  std::vector<int32_t> out(cand.size() * topk_blocks, -1);
  for (size_t t = 0; t < cand.size(); ++t) {
    int j = 0;
    for (size_t e = 0; e < cand[t].size(); e += block_size)
      if (cand[t][e] && j < topk_blocks) out[t * topk_blocks + j++] = static_cast<int32_t>(e / block_size);
  }
  return out;
}

// The mask [rows, cols] that CpuOps::select_entries builds from the candidates.
std::vector<uint8_t> mask_of(const frank::engine::CpuOps::Candidates& cand, int cols) {
  std::vector<uint8_t> out(cand.size() * cols, 0);
  for (size_t t = 0; t < cand.size(); ++t)
    std::copy_n(cand[t].begin(), std::min<size_t>(cand[t].size(), cols), out.begin() + t * cols);
  return out;
}

template <class T>
std::vector<T> download(const DeviceBuffer<T>& d) {
  std::vector<T> h(d.size());
  CUDA_OK(cudaMemcpy(h.data(), d.get(), h.size() * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

template <class T>
void upload(const DeviceBuffer<T>& d, const std::vector<T>& h) {
  CUDA_OK(cudaMemcpy(d.get(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}

// Poisons a device output so that an unwritten slot cannot pass.
template <class T>
void poison(const DeviceBuffer<T>& d) {
  CUDA_OK(cudaMemset(d.get(), 0x7f, d.size() * sizeof(T)));
}

struct Tally {
  int pass = 0, fail = 0;
};

// Compares one output; on a mismatch prints the first differing slot.
template <class T>
void expect(const Case& c, const char* what, const std::vector<T>& got, const std::vector<T>& want, int width,
            Tally& tally) {
  if (got == want) {
    ++tally.pass;
    return;
  }
  ++tally.fail;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      std::printf("FAIL %s %s rows=%d cols=%d block_cols=%d start=%lld ratio=%d topk_blocks=%d block=%d topk=%d "
                  "seed=%llu %s: row %zu slot %zu: got %d want %d\n",
                  c.group.c_str(), fill_name(c.fill), c.rows, c.cols, c.block_cols, static_cast<long long>(c.start),
                  c.ratio, c.topk_blocks, c.block_size, c.topk, static_cast<unsigned long long>(c.seed), what,
                  i / width, i % width, static_cast<int>(got[i]), static_cast<int>(want[i]));
      return;
    }
  std::printf("FAIL %s %s: %zu values, want %zu\n", c.group.c_str(), what, got.size(), want.size());
}

void check_case(const Case& c, Tally& tally) {
  using frank::Tensor;
  std::mt19937_64 rng(c.seed);
  const Tensor level1({c.rows, c.block_cols}, make_scores(c.fill, c.rows, c.block_cols, rng));
  const Tensor level2({c.rows, c.cols}, make_scores(c.fill, c.rows, c.cols, rng));
  // The reference's entry sort has no order for NaN; the launchers never select one (v41_topk.cu),
  // as if it were -inf, so level 2's reference reads NaN as -inf. Level 1's reference is defined
  // for NaN (std::max keeps the block's value) and reads the scores as they are.
  Tensor level2_ref = level2;
  for (float& x : level2_ref.data)
    if (std::isnan(x)) x = -kInf;

  const frank::engine::CpuOps cpu;
  const auto cand = cpu.candidate_blocks(level1, c.start, c.ratio, c.topk_blocks, c.block_size);
  const std::vector<int32_t> want_blocks = blocks_of(cand, c.block_size, c.topk_blocks);
  const std::vector<uint8_t> want_mask = mask_of(cand, c.cols);
  const auto want_all = padded(cpu.select_entries(level2_ref, c.start, c.ratio, nullptr, c.topk), c.topk);
  const auto want_in = padded(cpu.select_entries(level2_ref, c.start, c.ratio, &cand, c.topk), c.topk);

  DevicePosition start;
  const size_t rows = static_cast<size_t>(c.rows);
  const DeviceBuffer<float> d_level1(level1.data.size()), d_level2(level2.data.size());
  const DeviceBuffer<int32_t> d_blocks(rows * c.topk_blocks), d_all(rows * c.topk), d_in(rows * c.topk),
      d_fused(rows * c.topk);
  const DeviceBuffer<uint8_t> d_mask(rows * c.cols);
  upload(d_level1, level1.data);
  upload(d_level2, level2.data);
  for (const auto* d : {&d_blocks, &d_all, &d_in, &d_fused}) poison(*d);
  poison(d_mask);
  const int64_t* pos = start.at(c.start);
  namespace fc = frank::cuda;
  CUDA_OK(fc::candidate_blocks(d_level1.get(), c.rows, c.block_cols, pos, c.ratio, c.topk_blocks, c.block_size,
                               d_blocks.get(), nullptr));
  CUDA_OK(fc::candidate_mask(d_blocks.get(), c.rows, c.topk_blocks, c.block_size, c.block_cols, c.cols, d_mask.get(),
                             nullptr));
  CUDA_OK(fc::select_entries(d_level2.get(), c.rows, c.cols, pos, c.ratio, nullptr, c.topk, d_all.get(), nullptr));
  CUDA_OK(fc::select_entries(d_level2.get(), c.rows, c.cols, pos, c.ratio, d_mask.get(), c.topk, d_in.get(), nullptr));
  CUDA_OK(fc::select_entries_in_blocks(d_level2.get(), c.rows, c.cols, pos, c.ratio, d_blocks.get(), c.topk_blocks,
                                       c.block_size, c.block_cols, c.topk, d_fused.get(), nullptr));
  CUDA_OK(cudaDeviceSynchronize());

  const std::vector<int32_t> got_in = download(d_in), got_fused = download(d_fused);
  expect(c, "candidate_blocks", download(d_blocks), want_blocks, c.topk_blocks, tally);
  expect(c, "candidate_mask", download(d_mask), want_mask, c.cols, tally);
  expect(c, "select_entries", download(d_all), want_all, c.topk, tally);
  expect(c, "select_entries(mask)", got_in, want_in, c.topk, tally);
  expect(c, "select_entries_in_blocks", got_fused, want_in, c.topk, tally);
  // Byte identity of the fused and unfused GPU paths (also when both are wrong the same way).
  const bool same = std::memcmp(got_in.data(), got_fused.data(), got_in.size() * sizeof(int32_t)) == 0;
  expect(c, "fused==unfused bytes", std::vector<int32_t>{same}, std::vector<int32_t>{1}, 1, tally);
}

// Small shapes where every rule bites: level 1 keeps few blocks, rows shorter than topk, visible
// from 0 up, block sizes that are not multiples of 4, block_cols short of cols.
std::vector<Case> edge_cases(uint64_t seed) {
  std::vector<Case> cases;
  const Fill fills[] = {Fill::normal, Fill::ties, Fill::zeros, Fill::subnormal, Fill::neginf_runs, Fill::nan};
  for (Fill f : fills) {
    // visible = 0 for the first token (start 0, ratio 2), then 0, 1, 1, 2 ..: rows shorter than topk.
    cases.push_back({"short", f, 8, 40, 40, 0, 2, 3, 4, 16, seed++});
    cases.push_back({"visible<cols", f, 6, 300, 300, 50, 1, 5, 8, 20, seed++});
    cases.push_back({"odd-blocks", f, 5, 1000, 1000, 1500, 2, 7, 3, 33, seed++});
    cases.push_back({"block_cols<cols", f, 4, 777, 500, 2000, 1, 9, 8, 40, seed++});
    cases.push_back({"ratio4", f, 8, 2048, 2048, 8000, 4, 16, 8, 64, seed++});
    cases.push_back({"wide-k", f, 3, 5000, 5000, 9990, 2, 300, 8, 1500, seed++});  // k > 1,024
    cases.push_back({"one-row", f, 1, 1, 1, 0, 1, 1, 1, 1, seed++});
    cases.push_back({"all-blocks", f, 2, 600, 600, 1200, 2, 100, 8, 100, seed++});  // topk_blocks > blocks
  }
  return cases;
}

// Real shapes (dsv41-model.md: candidate_topk_blocks 2,048, candidate_block_size 8, index_topk
// 512): cols from 1K to 512K (1M context at ratio 2), 1 to 8 rows, the last row seeing every entry.
std::vector<Case> real_cases(uint64_t seed) {
  std::vector<Case> cases;
  for (int cols : {1024, 16384, 65536, 524288})
    for (int rows : {1, 8})
      for (Fill f : {Fill::normal, Fill::ties, Fill::zeros}) {
        const int ratio = cols == 1024 ? 1 : 2;
        const int64_t start = static_cast<int64_t>(cols) * ratio - rows;
        cases.push_back({"real", f, rows, cols, cols, start, ratio, 2048, 8, 512, seed++});
      }
  return cases;
}

std::vector<Case> random_cases(uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const Fill fills[] = {Fill::normal, Fill::ties, Fill::zeros, Fill::subnormal, Fill::neginf_runs, Fill::nan};
  std::vector<Case> cases;
  for (int i = 0; i < count; ++i) {
    const int cols = pick(1, 1 << pick(1, 17));
    const int ratio = pick(1, 4);
    const int rows = pick(1, 8);
    const int64_t start = pick(0, cols * ratio + 8);
    cases.push_back({"random", fills[pick(0, 5)], rows, cols, pick(1, cols), start, ratio, pick(1, 300), pick(1, 16),
                     pick(1, 1200), seed + static_cast<uint64_t>(i)});
  }
  return cases;
}

}  // namespace
}  // namespace frank_test

int main(int argc, char** argv) {
  using namespace frank_test;
  TopkCheckOptions o{.seed = 20261130, .launches = 50};
  CLI::App app{"V4.1's two-level top-k kernels against the CPU reference"};
  add_topk_check_options(app, o);
  CLI11_PARSE(app, argc, argv);
  const uint64_t seed = o.seed;
  print_device();
  if (o.bench) return run_v41_topk_bench(o.launches);
  std::vector<std::pair<const char*, std::vector<Case>>> groups = {{"edge", edge_cases(seed)}};
  if (!o.small) {
    groups.emplace_back("real", real_cases(seed + 100000));
    groups.emplace_back("random", random_cases(seed + 200000, o.random));
  }
  int failed = 0;
  for (const auto& [name, cases] : groups) {
    Tally tally;
    for (const Case& c : cases) check_case(c, tally);
    std::printf("%s %s: %zu cases, %d checks passed, %d failed\n", tally.fail ? "FAIL" : "PASS", name, cases.size(),
                tally.pass, tally.fail);
    failed += tally.fail;
  }
  std::printf("%s\n", failed ? "FAIL" : "PASS");
  return failed ? 1 : 0;
}
