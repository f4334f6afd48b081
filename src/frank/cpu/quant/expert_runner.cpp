#include "frank/cpu/quant/expert_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "frank/core/error.h"
#include "frank/cpu/ops.h"

namespace frank::cpu {
namespace {

// One task: rows [begin, end) of one call's gate+up (phase 1) or down (phase 2).
struct RowTask {
  size_t call;
  int64_t begin, end;
};

std::vector<RowTask> split(std::span<const ExpertCall> calls, bool down, int64_t rows_per_task) {
  std::vector<RowTask> tasks;
  for (size_t c = 0; c < calls.size(); ++c) {
    const int64_t rows = down ? calls[c].expert->down.rows : calls[c].expert->gate.rows;
    for (int64_t r = 0; r < rows; r += rows_per_task) tasks.push_back({c, r, std::min(rows, r + rows_per_task)});
  }
  return tasks;
}

}  // namespace

void run_experts(ThreadPool& pool, std::span<const ExpertCall> calls, float limit, CpuKernels level,
                 int64_t rows_per_task) {
  if (rows_per_task < 1) throw Error("run_experts: rows_per_task must be >= 1");
  for (const auto& c : calls) {
    const auto& e = *c.expert;
    validate(e.gate);
    validate(e.up);
    validate(e.down);
    if (e.up.rows != e.gate.rows || e.up.cols != e.gate.cols || e.down.cols != e.gate.rows ||
        e.down.rows != e.gate.cols)
      throw Error(fmt::format("run_experts: expert shapes gate [{}, {}], up [{}, {}], down [{}, {}] do not fit",
                              e.gate.rows, e.gate.cols, e.up.rows, e.up.cols, e.down.rows, e.down.cols));
  }
  // Phase 1: gate and up rows, activated in place into `hidden` [n, intermediate] per call.
  std::vector<std::vector<float>> hidden(calls.size()), up(calls.size());
  for (size_t c = 0; c < calls.size(); ++c) {
    hidden[c].assign(static_cast<size_t>(calls[c].n * calls[c].expert->gate.rows), 0.0f);
    up[c].assign(hidden[c].size(), 0.0f);
  }
  const auto first = split(calls, false, rows_per_task);
  pool.parallel_for(static_cast<int64_t>(first.size()), [&](int64_t i) {
    const RowTask& t = first[static_cast<size_t>(i)];
    const ExpertCall& c = calls[t.call];
    const int64_t rows = c.expert->gate.rows;
    linear_rows(level, c.x, c.n, c.expert->gate, hidden[t.call].data(), t.begin, t.end);
    linear_rows(level, c.x, c.n, c.expert->up, up[t.call].data(), t.begin, t.end);
    for (int64_t token = 0; token < c.n; ++token)
      for (int64_t r = t.begin; r < t.end; ++r) {
        float& g = hidden[t.call][static_cast<size_t>(token * rows + r)];
        g = silu(std::min(g, limit)) * std::clamp(up[t.call][static_cast<size_t>(token * rows + r)], -limit, limit);
      }
  });
  // Phase 2: down rows.
  const auto second = split(calls, true, rows_per_task);
  pool.parallel_for(static_cast<int64_t>(second.size()), [&](int64_t i) {
    const RowTask& t = second[static_cast<size_t>(i)];
    const ExpertCall& c = calls[t.call];
    linear_rows(level, hidden[t.call].data(), c.n, c.expert->down, c.out, t.begin, t.end);
  });
}

}  // namespace frank::cpu
