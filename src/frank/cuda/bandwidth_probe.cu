#include "frank/cuda/bandwidth_probe.cuh"

namespace frank::cuda {
namespace {

constexpr int kThreads = 512;

__global__ void read_kernel(const float4* data, int64_t n, float* sink) {
  float s = 0.0f;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += int64_t{gridDim.x} * kThreads) {
    const float4 v = __ldg(data + i);
    s += v.x + v.y + v.z + v.w;
  }
  __shared__ float part[kThreads / 32];
  for (int o = 16; o > 0; o /= 2) s += __shfl_down_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (float p : part) t += p;
    sink[blockIdx.x] = t;
  }
}

}  // namespace

int read_probe_blocks() {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  return 4 * sms;  // enough loads in flight to saturate HBM
}

cudaError_t read_probe(const void* data, int64_t bytes, float* sink, cudaStream_t stream) {
  if (data == nullptr || sink == nullptr || bytes <= 0 || bytes % 16 != 0) return cudaErrorInvalidValue;
  read_kernel<<<read_probe_blocks(), kThreads, 0, stream>>>(static_cast<const float4*>(data), bytes / 16, sink);
  return cudaGetLastError();
}

}  // namespace frank::cuda
