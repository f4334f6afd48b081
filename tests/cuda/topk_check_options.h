#pragma once
// The command line shared by frank_topk_check and frank_v41_topk_check (CLI11, as `frank` uses),
// and the device line both print first.
#include <CLI/CLI.hpp>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "cuda_util.h"

namespace frank_test {

struct TopkCheckOptions {
  uint64_t seed;
  int random = 200;    // random cases after the edge and real-shaped ones
  int launches;        // timed launches per configuration (--bench)
  bool bench = false;  // time the kernels instead of checking them
  bool small = false;  // the few cases that reach every path (the sanitizers' run)
};

// Adds the shared options to `app` (the caller adds its own, then parses with CLI11_PARSE).
inline void add_topk_check_options(CLI::App& app, TopkCheckOptions& o) {
  app.add_option("--seed", o.seed, "seed of the generated cases")->capture_default_str();
  app.add_option("--random", o.random, "random cases")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--launches", o.launches, "timed launches per configuration (--bench)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--bench", o.bench, "time the kernels instead of checking them");
  app.add_flag("--small", o.small, "only the small cases that reach every path (for compute-sanitizer)");
}

// "device NAME (sm_XY, N SMs, M MB L2), CUDA driver API D, runtime R".
inline void print_device() {
  int device = 0, driver = 0, runtime = 0;
  cudaDeviceProp p{};
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaGetDeviceProperties(&p, device));
  CUDA_OK(cudaDriverGetVersion(&driver));
  CUDA_OK(cudaRuntimeGetVersion(&runtime));
  std::printf("device %s (sm_%d%d, %d SMs, %d MB L2), CUDA driver API %d, runtime %d\n", p.name, p.major, p.minor,
              p.multiProcessorCount, p.l2CacheSize >> 20, driver, runtime);
}

}  // namespace frank_test
