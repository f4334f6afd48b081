#include "frank/lab/row_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <set>
#include <tuple>

#include "frank/core/error.h"

namespace frank::lab {
namespace {

void check_one(const Row& row, const Design& d, const std::vector<std::string>& metrics) {
  if (row.arm != d.arms[0].name && row.arm != d.arms[1].name)
    throw Error(fmt::format("{}: unknown arm \"{}\" (the design's arms are \"{}\" and \"{}\")", row.origin, row.arm,
                            d.arms[0].name, d.arms[1].name));
  if (row.block >= d.blocks)
    throw Error(
        fmt::format("{}: block {} is not one of the design's blocks 0..{}", row.origin, row.block, d.blocks - 1));
  if (row.start >= d.starts_per_arm)
    throw Error(fmt::format("{}: start {} is not one of the design's starts 0..{}", row.origin, row.start,
                            d.starts_per_arm - 1));
  for (const std::string& m : metrics)
    if (!row.metrics.count(m)) throw Error(fmt::format("{}: no value for metric \"{}\"", row.origin, m));
}

}  // namespace

std::vector<std::string> check_rows(std::vector<Row>& rows, const Design& d) {
  if (rows.empty()) throw Error("no rows to analyse");
  std::vector<std::string> metrics = {d.metric.name};
  if (d.covariate) metrics.push_back(d.covariate->name);
  for (const QualityGuard& g : d.quality_guards) metrics.push_back(g.metric);

  std::set<std::tuple<int64_t, std::string, int64_t, int64_t>> seen;
  std::map<int64_t, std::map<std::string, std::map<int64_t, int64_t>>> draws;  // block -> arm -> start -> draws
  for (const Row& row : rows) {
    check_one(row, d, metrics);
    if (!seen.insert({row.block, row.arm, row.start, row.draw}).second)
      throw Error(fmt::format("{}: block {}, arm \"{}\", start {}, draw {} appears twice", row.origin, row.block,
                              row.arm, row.start, row.draw));
    ++draws[row.block][row.arm][row.start];
  }

  std::vector<std::string> warnings;
  std::vector<int64_t> missing_blocks;
  std::set<int64_t> one_arm_blocks;
  int64_t odd_starts = 0, odd_draws = 0;
  for (int64_t b = 0; b < d.blocks; ++b) {
    if (!draws.count(b)) {
      missing_blocks.push_back(b);
      continue;
    }
    for (const Arm& arm : d.arms) {
      if (!draws[b].count(arm.name)) {
        // An arm that failed to start or crashed before its first draw: the block compares nothing.
        warnings.push_back(fmt::format("deviation: block {} has rows of arm \"{}\" only: no rows of arm \"{}\"; "
                                       "the block is left out",
                                       b, draws[b].begin()->first, arm.name));
        one_arm_blocks.insert(b);
        break;
      }
      const auto& starts = draws[b][arm.name];
      odd_starts += int64_t(starts.size()) != d.starts_per_arm;
      for (const auto& [start, n] : starts) odd_draws += n != d.draws_per_start;
    }
  }
  std::erase_if(rows, [&](const Row& row) { return one_arm_blocks.count(row.block) > 0; });
  if (rows.empty()) throw Error("no block has rows of both arms");
  if (!missing_blocks.empty())
    warnings.push_back(fmt::format("deviation: {} of {} registered blocks have no rows (blocks {})",
                                   missing_blocks.size(), d.blocks, fmt::join(missing_blocks, ", ")));
  if (odd_starts)
    warnings.push_back(fmt::format("deviation: {} block/arm pairs do not have starts_per_arm = {} starts", odd_starts,
                                   d.starts_per_arm));
  if (odd_draws)
    warnings.push_back(
        fmt::format("deviation: {} starts do not have draws_per_start = {} draws", odd_draws, d.draws_per_start));
  return warnings;
}

}  // namespace frank::lab
