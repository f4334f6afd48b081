#include "frank/lab/block_starts.h"

#include <map>
#include <utility>

namespace frank::lab {
namespace {

double mean_of_starts(const std::vector<StartTotal>& starts) {  // weighted by draws
  double sum = 0.0;
  int64_t draws = 0;
  for (const StartTotal& s : starts) {
    sum += s.sum;
    draws += s.draws;
  }
  return sum / double(draws);
}

}  // namespace

double BlockStarts::baseline_value() const { return mean_of_starts(baseline); }
double BlockStarts::treatment_value() const { return mean_of_starts(treatment); }

int64_t BlockStarts::baseline_draws() const {
  int64_t n = 0;
  for (const StartTotal& s : baseline) n += s.draws;
  return n;
}

int64_t BlockStarts::treatment_draws() const {
  int64_t n = 0;
  for (const StartTotal& s : treatment) n += s.draws;
  return n;
}

std::vector<BlockStarts> group_blocks(const std::vector<Row>& rows, const std::string& baseline,
                                      const std::string& treatment, const std::function<double(const Row&)>& value_of) {
  // block -> (is treatment, start) -> total; maps keep blocks and starts in ascending order.
  std::map<int64_t, std::map<std::pair<bool, int64_t>, StartTotal>> grouped;
  for (const Row& row : rows) {
    if (row.arm != baseline && row.arm != treatment) continue;
    StartTotal& total = grouped[row.block][{row.arm == treatment, row.start}];
    total.sum += value_of(row);
    ++total.draws;
  }
  std::vector<BlockStarts> blocks;
  for (const auto& [block, starts] : grouped) {
    BlockStarts b;
    b.block = block;
    for (const auto& [key, total] : starts) (key.first ? b.treatment : b.baseline).push_back(total);
    blocks.push_back(std::move(b));
  }
  return blocks;
}

}  // namespace frank::lab
