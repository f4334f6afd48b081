#pragma once
// GPU clocks, power and temperature at one moment, read through NVML when the machine has an
// NVIDIA driver. Power caps and thermal throttling shift timings, so every ledger row carries them.
// NVML is opened at run time (dlopen of libnvidia-ml.so.1), so frank needs no GPU to run the lab.
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

namespace frank::lab {

struct GpuSample {
  unsigned index = 0;
  unsigned sm_clock_mhz = 0, memory_clock_mhz = 0;
  double power_w = 0;
  unsigned temperature_c = 0;
};

// One sample per GPU; empty when there is no NVML or no GPU.
std::vector<GpuSample> sample_gpus();
nlohmann::json to_json(const std::vector<GpuSample>& samples);

}  // namespace frank::lab
