#include "frank/experts/expert_costs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "frank/core/error.h"

namespace frank::experts {

ExpertCosts::ExpertCosts()
    : ExpertCosts(kV4FlashExpertBytes / kDefaultCpuBytesPerSecond, kV4FlashExpertBytes / kDefaultGpuBytesPerSecond) {}

ExpertCosts::ExpertCosts(double cpu_seconds_per_expert, double gpu_seconds_per_expert)
    : cpu_seconds_(cpu_seconds_per_expert), gpu_seconds_(gpu_seconds_per_expert) {
  for (double s : {cpu_seconds_, gpu_seconds_})
    if (!std::isfinite(s) || s <= 0)
      throw Error(fmt::format("expert cost {} s is not a positive number of seconds", s));
}

ExpertCosts ExpertCosts::from_bandwidth(double expert_bytes, double cpu_bytes_per_second, double gpu_bytes_per_second) {
  return ExpertCosts(expert_bytes / cpu_bytes_per_second, expert_bytes / gpu_bytes_per_second);
}

double ExpertCosts::layer_seconds(size_t cpu_experts, size_t gpu_experts) const {
  return std::max(static_cast<double>(cpu_experts) * cpu_seconds_, static_cast<double>(gpu_experts) * gpu_seconds_);
}

}  // namespace frank::experts
