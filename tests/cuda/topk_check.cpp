// frank_topk_check: every top-k kernel version (frank/cuda/topk.cuh) against the CPU reference
// frank::engine::top_k_indices, index for index, on edge-case, real-shaped and random rows.
//   frank_topk_check [--seed S] [--random N]   all checks; exit 1 on any mismatch
//   frank_topk_check --small                   a few small cases (for compute-sanitizer)
//   frank_topk_check --bench [--launches N]    the benchmark tables (topk_bench.cpp)
//   frank_topk_check --rows FILE               the score rows of a real run (frank logits|generate
//                                              --dump-topk-rows DIR writes DIR/topk-rows.bin)
#include <array>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cuda_util.h"
#include "frank/cuda/topk.cuh"
#include "frank/engine/indexer.h"
#include "frank/engine/topk_row_dump.h"
#include "topk_bench.h"
#include "topk_cases.h"
#include "topk_check_options.h"

namespace frank_test {
namespace {

struct Tally {
  int pass = 0, fail = 0;
};

// The reference's indices of each row, padded with -1 to k.
std::vector<int32_t> reference(const Case& c, const std::vector<float>& scores) {
  std::vector<int32_t> want(static_cast<size_t>(c.rows) * c.k, -1);
  for (int r = 0; r < c.rows; ++r) {
    const std::vector<float> row(scores.begin() + static_cast<ptrdiff_t>(r) * c.n,
                                 scores.begin() + static_cast<ptrdiff_t>(r + 1) * c.n);
    const std::vector<int64_t> idx = frank::engine::top_k_indices(row, c.k);
    for (size_t j = 0; j < idx.size(); ++j) want[static_cast<size_t>(r) * c.k + j] = static_cast<int32_t>(idx[j]);
  }
  return want;
}

void report_mismatch(const Case& c, const Variant& v, const std::vector<float>& scores, const std::vector<int32_t>& got,
                     const std::vector<int32_t>& want) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    const int row = static_cast<int>(i / c.k), j = static_cast<int>(i % c.k);
    auto score = [&](int32_t idx) {
      return idx >= 0 && idx < c.n ? scores[static_cast<size_t>(row) * c.n + idx] : 0.0f;
    };
    std::printf("FAIL %s %s rows=%d n=%d k=%d seed=%llu %s: row %d place %d: got %d (%g) want %d (%g)\n",
                c.group.c_str(), dist_name(c.dist), c.rows, c.n, c.k, static_cast<unsigned long long>(c.seed), v.name,
                row, j, got[i], score(got[i]), want[i], score(want[i]));
    return;
  }
}

using Tallies = std::map<std::string, std::array<Tally, kNumTopKVariants>>;

// Runs every variant on the case's scores; tallies one pass or fail per variant.
void check_scores(const Case& c, const std::vector<float>& scores, Tallies& tally) {
  const std::vector<int32_t> want = reference(c, scores);
  DeviceBuffer<float> d_scores(scores.size());
  DeviceBuffer<int32_t> d_out(want.size());
  CUDA_OK(cudaMemcpy(d_scores.get(), scores.data(), scores.size() * sizeof(float), cudaMemcpyHostToDevice));
  std::vector<int32_t> got(want.size());
  for (int v = 0; v < kNumTopKVariants; ++v) {
    // Poison the output, so an unwritten slot cannot pass.
    CUDA_OK(cudaMemset(d_out.get(), 0x7f, want.size() * sizeof(int32_t)));
    CUDA_OK(frank::cuda::topk(kTopKVariants[v].version, d_scores.get(), c.rows, c.n, c.k, d_out.get(), nullptr,
                              kTopKVariants[v].cluster));
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(got.data(), d_out.get(), got.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
    Tally& t = tally[c.group][v];
    if (got == want) {
      ++t.pass;
    } else {
      ++t.fail;
      report_mismatch(c, kTopKVariants[v], scores, got, want);
    }
  }
}

int print_tally(const Tallies& tally, size_t cases) {
  int failed = 0;
  std::printf("%-8s", "group");
  for (const Variant& v : kTopKVariants) std::printf(" %14s", v.name);
  std::printf("   (cases passed/failed)\n");
  for (const auto& [group, t] : tally) {
    std::printf("%-8s", group.c_str());
    for (int v = 0; v < kNumTopKVariants; ++v) {
      std::printf(" %8d PASS %d", t[v].pass, t[v].fail);
      failed += t[v].fail;
    }
    std::printf("\n");
  }
  std::printf("%s: %zu cases x %d variants, %d mismatches\n", failed ? "FAIL" : "PASS", cases, kNumTopKVariants,
              failed);
  return failed ? 1 : 0;
}

int run_checks(const std::vector<Case>& cases) {
  Tallies tally;
  for (const Case& c : cases) check_scores(c, make_scores(c), tally);
  return print_tally(tally, cases.size());
}

// Each dumped row of a real run is a one-row case.
int run_dumped(const std::string& file) {
  const auto rows = frank::engine::read_topk_rows(file);
  Tallies tally;
  for (const auto& row : rows)
    check_scores(Case{"dumped", Dist::normal, 1, static_cast<int>(row.scores.size()), row.k, 0}, row.scores, tally);
  return print_tally(tally, rows.size());
}

}  // namespace
}  // namespace frank_test

int main(int argc, char** argv) {
  using namespace frank_test;
  TopkCheckOptions o{.seed = 20261201, .launches = 60};
  std::string rows;
  CLI::App app{"the indexer top-k kernels (v1, v2, v2 at cluster sizes 2, 4, 8, and v3) against the CPU reference"};
  add_topk_check_options(app, o);
  app.add_option("--rows", rows, "check the rows of a dump (DIR/topk-rows.bin of frank --dump-topk-rows DIR) instead")
      ->check(CLI::ExistingFile);
  CLI11_PARSE(app, argc, argv);
  const uint64_t seed = o.seed;
  print_device();
  if (o.bench) return run_topk_bench(o.launches);
  if (o.small) return run_checks(small_cases(seed));
  if (!rows.empty()) return run_dumped(rows);
  std::vector<Case> cases = edge_cases(seed);
  for (const Case& c : real_cases(seed + 100000)) cases.push_back(c);
  for (const Case& c : random_cases(seed + 200000, o.random)) cases.push_back(c);
  return run_checks(cases);
}
