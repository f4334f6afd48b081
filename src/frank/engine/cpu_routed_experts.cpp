#include "frank/engine/cpu_routed_experts.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <vector>

#include "frank/core/error.h"
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
  struct ReferenceTask {
    int32_t expert;
    ExpertWork* work;
    int64_t index;  // into work->tokens
  };
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
  pool.parallel_for(std::ssize(reference), [&](int64_t i) {
    const ReferenceTask& task = reference[static_cast<size_t>(i)];
    swiglu_expert(w.experts[static_cast<size_t>(task.expert)], c.swiglu_limit,
                  r.x + static_cast<size_t>(task.work->tokens[static_cast<size_t>(task.index)]) * D,
                  task.work->y.data() + task.index * D);
  });

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
