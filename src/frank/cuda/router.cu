// MoE routing (ops.cuh: route; reference engine::route). One block per token: its threads score
// the token's experts into shared memory, one expert each (the double-precision exp and log1p of
// the scores are the long part; one warp looping over 256 experts took ~10 us a call on an H200).
// Then warp 0 takes the k best one at a time, each round a warp argmax over the experts that come
// after the previous pick in the reference's order (higher key first, ties by lower expert). That
// order is total on selectable keys, so k rounds give exactly engine::top_k_indices without
// marking anything as taken. Each lane keeps its experts' keys in registers for the k rounds.
// Forced experts (routing replay) and hash layers skip the choice: lane j reads the j-th expert.
#include <cmath>

#include "frank/cuda/ops.cuh"
#include "frank/cuda/launch.cuh"

namespace frank::cuda {
namespace {

constexpr int kThreads = 256;        // scoring threads per token (block)
constexpr int kMaxRouteK = 32;       // one lane holds each pick
constexpr int kMaxExperts = 1'024;   // shared memory: 2 * E floats per block, 8 KB

// sqrt(softplus(logit)), torch's softplus (threshold 20). The reference rounds exp and log1p to
// float one after the other; computing each in double and rounding it to float gives the correctly
// rounded float that the CPU's expf/log1pf return (to within their 0.5 ulp), where CUDA's float
// expf (2 ulp) would often differ in the last bit. Equal scores on both sides keep the expert
// choice the same even where two keys lie an ulp apart.
__device__ float router_score(float logit) {
  if (logit > 20.0f) return sqrtf(logit);
  const float e = static_cast<float>(exp(static_cast<double>(logit)));
  return sqrtf(static_cast<float>(log1p(static_cast<double>(e))));
}

// NaN and -inf are never chosen (engine::top_k_indices).
__device__ bool selectable(float v) { return !isnan(v) && v != -INFINITY; }

// True when (v, i) comes before (w, j) in the choice order: higher first, ties by lower index.
__device__ bool before(float v, int i, float w, int j) { return v > w || (v == w && i < j); }

// KeysPerLane: keys a lane holds, at least E / 32 (a few sizes, so that the k rounds loop over
// only as many registers as the model has experts).
template <int KeysPerLane>
__global__ void __launch_bounds__(kThreads)
    route_kernel(const float* __restrict__ logits, int E, int k, const float* __restrict__ bias,
                 const int32_t* __restrict__ tid2eid, const int32_t* __restrict__ ids,
                 const int32_t* __restrict__ forced, float scaling, float gate_temp, int32_t* __restrict__ experts,
                 float* __restrict__ weights) {
  follow_previous_kernel();
  extern __shared__ float smem[];
  const int t = blockIdx.x, lane = threadIdx.x % 32;
  float* score = smem;
  float* key = score + E;  // score + bias: what the choice ranks
  const float* row = logits + static_cast<size_t>(t) * E;
  for (int e = threadIdx.x; e < E; e += kThreads) {
    score[e] = router_score(row[e] / gate_temp);  // x / 1 is x: V4 unchanged
    key[e] = bias ? score[e] + bias[e] : score[e];
  }
  __syncthreads();
  if (threadIdx.x >= 32) return;

  int mine = -1;  // lane j's pick: the j-th expert of the token
  if (forced) {
    if (lane < k) mine = forced[static_cast<size_t>(t) * k + lane];
  } else if (tid2eid) {
    if (lane < k) mine = tid2eid[static_cast<size_t>(ids[t]) * k + lane];
  } else {
    float keys[KeysPerLane];  // lane's experts lane, lane + 32, ..
#pragma unroll
    for (int i = 0; i < KeysPerLane; ++i) keys[i] = lane + 32 * i < E ? key[lane + 32 * i] : NAN;
    float last_v = INFINITY;
    int last_i = -1;  // before any pick every selectable key qualifies (+inf at index >= 0 too)
    for (int j = 0; j < k; ++j) {
      float best_v = 0.0f;
      int best_i = -1;  // -1: none yet
#pragma unroll
      for (int i = 0; i < KeysPerLane; ++i) {
        const float v = keys[i];
        const int e = lane + 32 * i;
        if (!selectable(v) || !before(last_v, last_i, v, e)) continue;  // taken already, or past E (NaN)
        if (best_i < 0 || before(v, e, best_v, best_i)) best_v = v, best_i = e;
      }
      for (int offset = 16; offset > 0; offset /= 2) {
        const float v = __shfl_xor_sync(0xffffffffu, best_v, offset);
        const int i = __shfl_xor_sync(0xffffffffu, best_i, offset);
        if (i >= 0 && (best_i < 0 || before(v, i, best_v, best_i))) best_v = v, best_i = i;
      }
      if (lane == j) mine = best_i;
      if (best_i < 0) break;  // fewer than k selectable keys: the rest stay -1 (weight 0)
      last_v = best_v, last_i = best_i;
    }
  }

  // Weights from the unbiased scores, summed in pick order as the reference does; a missing pick
  // (or an id outside the table) adds 0.
  const float s = mine >= 0 && mine < E ? score[mine] : 0.0f;
  float sum = 0.0f;
  for (int j = 0; j < k; ++j) sum += __shfl_sync(0xffffffffu, s, j);
  if (lane < k) {
    experts[static_cast<size_t>(t) * k + lane] = mine;
    weights[static_cast<size_t>(t) * k + lane] = s / (sum + 1e-20f) * scaling;
  }
}

}  // namespace

cudaError_t route(const float* logits, int n, int E, int k, const float* bias, const int32_t* tid2eid,
                  const int32_t* ids, float scaling, int32_t* experts, float* weights, cudaStream_t stream,
                  const int32_t* forced, float gate_temp) {
  if (n < 0 || E < 1 || E > kMaxExperts || k < 1 || k > kMaxRouteK || k > E || !(gate_temp > 0.0f))
    return cudaErrorInvalidValue;
  if (!logits || !experts || !weights || (tid2eid && !ids)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const size_t smem = sizeof(float) * 2 * E;
  const auto kernel = E <= 256 ? route_kernel<8> : E <= 512 ? route_kernel<16> : route_kernel<kMaxExperts / 32>;
  if (const cudaError_t e = launch_dependent(kernel, dim3(n), dim3(kThreads), smem, stream, logits, E, k, bias, tid2eid,
                                             ids, forced, scaling, gate_temp, experts, weights))
    return e;
  return cudaGetLastError();
}

}  // namespace frank::cuda
