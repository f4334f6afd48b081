#include "frank/lab/gpu_telemetry.h"

#include <dlfcn.h>

namespace frank::lab {
namespace {

// The few NVML entry points used, as declared in nvml.h (stable C ABI since CUDA 5).
using nvmlDevice_t = void*;
using InitFn = int (*)();
using CountFn = int (*)(unsigned*);
using HandleFn = int (*)(unsigned, nvmlDevice_t*);
using ClockFn = int (*)(nvmlDevice_t, int, unsigned*);
using PowerFn = int (*)(nvmlDevice_t, unsigned*);
using TemperatureFn = int (*)(nvmlDevice_t, int, unsigned*);
constexpr int kClockSm = 1, kClockMemory = 2, kTemperatureGpu = 0;

struct Nvml {
  CountFn count = nullptr;
  HandleFn handle = nullptr;
  ClockFn clock = nullptr;
  PowerFn power = nullptr;
  TemperatureFn temperature = nullptr;
  bool ready = false;

  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
    count = reinterpret_cast<CountFn>(dlsym(lib, "nvmlDeviceGetCount_v2"));
    handle = reinterpret_cast<HandleFn>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    clock = reinterpret_cast<ClockFn>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    power = reinterpret_cast<PowerFn>(dlsym(lib, "nvmlDeviceGetPowerUsage"));
    temperature = reinterpret_cast<TemperatureFn>(dlsym(lib, "nvmlDeviceGetTemperature"));
    ready = init && count && handle && clock && power && temperature && init() == 0;
  }
};

}  // namespace

std::vector<GpuSample> sample_gpus() {
  static const Nvml nvml;  // initialised once; NVML stays loaded for the process
  std::vector<GpuSample> samples;
  unsigned count = 0;
  if (!nvml.ready || nvml.count(&count) != 0) return samples;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    if (nvml.handle(i, &device) != 0) continue;
    GpuSample s;
    s.index = i;
    unsigned milliwatts = 0;
    nvml.clock(device, kClockSm, &s.sm_clock_mhz);
    nvml.clock(device, kClockMemory, &s.memory_clock_mhz);
    if (nvml.power(device, &milliwatts) == 0) s.power_w = milliwatts / 1000.0;
    nvml.temperature(device, kTemperatureGpu, &s.temperature_c);
    samples.push_back(s);
  }
  return samples;
}

nlohmann::json to_json(const std::vector<GpuSample>& samples) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : samples)
    out.push_back({{"index", s.index},
                   {"sm_clock_mhz", s.sm_clock_mhz},
                   {"memory_clock_mhz", s.memory_clock_mhz},
                   {"power_w", s.power_w},
                   {"temperature_c", s.temperature_c}});
  return out;
}

}  // namespace frank::lab
