#pragma once
#include <cuda_runtime.h>

#include <cstdlib>
#include <mutex>
#include <set>

namespace frank::cuda {

// Experiment: FRANK_STREAM_PRIORITY=1 puts the branch stream first, =2 the main stream,
// =3 the branch first except the MoE's shared expert.
inline int priority_mode() {
  static const int mode = [] { const char* e = std::getenv("FRANK_STREAM_PRIORITY"); return e ? std::atoi(e) : 0; }();
  return mode;
}
// Mode 3: the branch first in attention only; launches made while this is set carry priority 0.
inline thread_local bool g_plain_priority = false;
// Experiment: FRANK_CARVEOUT=P sets every step kernel's preferred shared-memory carveout to P%.
inline void set_carveout(const void* kernel) {
  static const int percent = [] { const char* e = std::getenv("FRANK_CARVEOUT"); return e ? std::atoi(e) : -1; }();
  if (percent < 0) return;
  static std::mutex m;
  static std::set<const void*> done;
  std::lock_guard<std::mutex> lock(m);
  if (done.insert(kernel).second) cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, percent);
}
inline int greatest_priority() {
  int least = 0, greatest = 0;
  cudaDeviceGetStreamPriorityRange(&least, &greatest);
  return greatest;
}

}  // namespace frank::cuda
