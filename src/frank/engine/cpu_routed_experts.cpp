#include "frank/engine/cpu_routed_experts.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <span>
#include <vector>

#include "frank/core/error.h"
#include "frank/cpu/ops.h"
#include "frank/cpu/quant/expert_runner.h"
#include "frank/engine/moe.h"

namespace frank::engine {
namespace {

std::optional<cpu::Fp4Matrix> fp4_view(const LinearWeight& w) {
  if (!w.quantized || w.quantized->format != QuantizedMatrix::Format::Fp4) return std::nullopt;
  const QuantizedMatrix& q = *w.quantized;
  return cpu::Fp4Matrix{q.values.data(), q.scales.data(), q.rows, q.cols};
}

std::optional<cpu::Fp4Expert> fp4_expert(const model::ExpertWeights& e) {
  const auto gate = fp4_view(e.gate), up = fp4_view(e.up), down = fp4_view(e.down);
  if (!gate || !up || !down) return std::nullopt;
  return cpu::Fp4Expert{*gate, *up, *down};
}

// One CPU expert of the step: its tokens (ascending) and its output for each, [tokens, hidden].
struct ExpertWork {
  std::vector<int> tokens;
  std::vector<float> x, y;
  std::optional<cpu::Fp4Expert> fp4;
};

// One (expert, token) pair of an expert without the FP4 kernels.
struct ReferenceTask {
  int32_t expert;
  ExpertWork* work;
  int64_t index;  // into work->tokens
};

// swiglu_expert (weight 1) for every pair, split by rows over the pool: first the gate and up rows
// of every pair in blocks of kRowBlock (with the activation), then the down rows. linear_rows on a
// block gives the bits cpu::linear gives on all rows (each row is computed alone; EXL3 mixes rows
// only within its 128-row blocks, which the blocks keep whole), so each output is swiglu_expert's
// bit for bit; but a decode step's few CPU experts now keep every thread busy (one task per pair
// left most of a 16-thread pool idle: EXL3 experts read at 0.9 GB/s on an H200's host).
void run_by_rows(ThreadPool& pool, const model::MoeWeights& w, float limit, const float* x, int D,
                 std::span<const ReferenceTask> pairs) {
  constexpr int64_t kRowBlock = 128;
  const auto blocks = [](int64_t rows) { return (rows + kRowBlock - 1) / kRowBlock; };
  // Task i of a phase: pair first[p] <= i < first[p + 1], block i - first[p].
  const auto spread = [&](auto&& rows_of) {
    std::vector<int64_t> first(pairs.size() + 1, 0);
    for (size_t p = 0; p < pairs.size(); ++p) first[p + 1] = first[p] + blocks(rows_of(pairs[p]));
    return first;
  };
  const auto expert = [&](const ReferenceTask& t) -> const model::ExpertWeights& {
    return w.experts[static_cast<size_t>(t.expert)];
  };
  const auto run = [&](const std::vector<int64_t>& first, auto&& block_task) {
    pool.parallel_for(first.back(), [&](int64_t i) {
      const size_t p = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), i) - first.begin() - 1);
      block_task(pairs[p], p, (i - first[p]) * kRowBlock);
    });
  };
  std::vector<std::vector<float>> hidden(pairs.size());
  for (size_t p = 0; p < pairs.size(); ++p) hidden[p].resize(static_cast<size_t>(expert(pairs[p]).gate.rows()));

  run(spread([&](const ReferenceTask& t) { return expert(t).gate.rows(); }),
      [&](const ReferenceTask& t, size_t p, int64_t r0) {
        const model::ExpertWeights& e = expert(t);
        const int64_t r1 = std::min(r0 + kRowBlock, e.gate.rows());
        const float* xt = x + static_cast<size_t>(t.work->tokens[static_cast<size_t>(t.index)]) * D;
        float gate[kRowBlock], up[kRowBlock];
        cpu::linear_rows(xt, 1, e.gate, r0, r1, gate);
        cpu::linear_rows(xt, 1, e.up, r0, r1, up);
        for (int64_t i = 0; i < r1 - r0; ++i)
          hidden[p][static_cast<size_t>(r0 + i)] = cpu::silu(std::min(gate[i], limit)) * std::clamp(up[i], -limit, limit);
      });
  run(spread([&](const ReferenceTask& t) { return expert(t).down.rows(); }),
      [&](const ReferenceTask& t, size_t p, int64_t r0) {
        const model::ExpertWeights& e = expert(t);
        const int64_t r1 = std::min(r0 + kRowBlock, e.down.rows());
        cpu::linear_rows(hidden[p].data(), 1, e.down, r0, r1, t.work->y.data() + t.index * D + r0);
      });
}

}  // namespace

void cpu_routed_experts(ThreadPool& pool, const model::ModelConfig& c, const model::MoeWeights& w,
                        std::span<const uint8_t> on_cpu, const CpuRouting& r, float* partial) {
  const int D = c.hidden_size, E = c.n_routed_experts;
  if (on_cpu.size() != static_cast<size_t>(E) || w.experts.size() != static_cast<size_t>(E))
    throw Error(fmt::format("CPU experts: {} home flags and {} experts for a layer of {}", on_cpu.size(),
                            w.experts.size(), E));
  const auto chosen = [&](int t, int j) {
    const int32_t e = r.experts[static_cast<size_t>(t) * r.k + j];
    return e >= 0 && e < E && on_cpu[static_cast<size_t>(e)] ? e : -1;
  };
  std::map<int32_t, ExpertWork> work;  // by expert id
  for (int t = 0; t < r.n; ++t)
    for (int j = 0; j < r.k; ++j)
      if (const int32_t e = chosen(t, j); e >= 0) {
        auto& tokens = work[e].tokens;
        if (tokens.empty() || tokens.back() != t) tokens.push_back(t);
      }

  std::vector<cpu::ExpertCall> fp4_calls;
  std::vector<ReferenceTask> reference;
  for (auto& [e, x] : work) {
    const int64_t n = std::ssize(x.tokens);
    x.y.assign(static_cast<size_t>(n * D), 0.0f);
    x.fp4 = fp4_expert(w.experts[static_cast<size_t>(e)]);
    if (x.fp4) {
      x.x.resize(static_cast<size_t>(n * D));  // the expert's tokens, contiguous
      for (int64_t i = 0; i < n; ++i)
        std::copy_n(r.x + static_cast<size_t>(x.tokens[i]) * D, D, x.x.begin() + i * D);
      fp4_calls.push_back({&*x.fp4, x.x.data(), n, x.y.data()});
    } else {
      for (int64_t i = 0; i < n; ++i) reference.push_back({e, &x, i});
    }
  }
  if (!fp4_calls.empty()) cpu::run_experts(pool, fp4_calls, c.swiglu_limit, cpu::active_cpu_kernels());
  run_by_rows(pool, w, c.swiglu_limit, r.x, D, reference);

  // Each token's CPU slots in ascending expert id (stable: a hash layer may repeat an expert), as
  // moe_forward sums them.
  std::fill_n(partial, static_cast<size_t>(r.n) * D, 0.0f);
  std::vector<int> slots(static_cast<size_t>(r.k));
  for (int t = 0; t < r.n; ++t) {
    std::iota(slots.begin(), slots.end(), 0);
    std::stable_sort(slots.begin(), slots.end(), [&](int a, int b) {
      return r.experts[static_cast<size_t>(t) * r.k + a] < r.experts[static_cast<size_t>(t) * r.k + b];
    });
    float* o = partial + static_cast<size_t>(t) * D;
    for (const int j : slots) {
      const int32_t e = chosen(t, j);
      if (e < 0) continue;
      const ExpertWork& x = work.at(e);
      const auto at = std::lower_bound(x.tokens.begin(), x.tokens.end(), t) - x.tokens.begin();
      const float* y = x.y.data() + at * D;
      const float weight = r.weights[static_cast<size_t>(t) * r.k + j];
      for (int d = 0; d < D; ++d) o[d] += y[d] * weight;
    }
  }
}

}  // namespace frank::engine
