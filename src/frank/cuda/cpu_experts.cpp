#include "frank/cuda/cpu_experts.h"

#include <fmt/format.h>

#include <chrono>
#include <set>
#include <utility>

#include "frank/core/error.h"
#include "frank/cuda/device_array.h"
#include "frank/engine/cpu_routed_experts.h"

namespace frank::cuda {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

template <class T>
void free_pinned(T*& p) {
  if (p != nullptr) cudaFreeHost(p);
  p = nullptr;
}

template <class T>
T* pinned(int64_t count) {
  void* p = nullptr;
  check(cudaMallocHost(&p, static_cast<size_t>(count > 0 ? count : 1) * sizeof(T)), "cudaMallocHost (CPU experts)");
  return static_cast<T*>(p);
}

}  // namespace

CpuExperts::CpuExperts(const model::ModelConfig& config, const model::ModelWeights& weights,
                       experts::ExpertHomes homes, unsigned threads)
    : config_(config), homes_(std::move(homes)), pool_(threads, /*pin=*/true) {
  if (homes_.n_layers() != config.num_layers || homes_.n_experts() != config.n_routed_experts ||
      std::ssize(weights.layers) != config.num_layers)
    throw Error(fmt::format("CPU experts: homes for {} layers x {} experts, a model of {} x {}", homes_.n_layers(),
                            homes_.n_experts(), config.num_layers, config.n_routed_experts));
  for (int l = 0; l < config.num_layers; ++l) {
    layers_.emplace(&weights.layers[static_cast<size_t>(l)].moe, l);
    moes_.push_back(&weights.layers[static_cast<size_t>(l)].moe);
    const auto flags = homes_.layer(l);
    runs_on_cpu_.insert(runs_on_cpu_.end(), flags.begin(), flags.end());
  }
  check(cudaEventCreateWithFlags(&arrived_, cudaEventDisableTiming), "cudaEventCreate");
}

CpuExperts::~CpuExperts() {
  free_pinned(x_);
  free_pinned(experts_);
  free_pinned(weights_);
  free_pinned(partial_);
  cudaEventDestroy(arrived_);
  for (auto [a, b] : gpu_share_events_) cudaEventDestroy(a), cudaEventDestroy(b);
}

int CpuExperts::layer_of(const model::MoeWeights& moe) const {
  const auto it = layers_.find(&moe);
  return it == layers_.end() ? -1 : it->second;
}

int CpuExperts::cpu_layer(const model::MoeWeights& moe) const {
  const int l = layer_of(moe);
  return l >= 0 && homes_.cpu_count(l) > 0 ? l : -1;
}

std::span<const uint8_t> CpuExperts::runs_on_cpu(int layer) const {
  const size_t E = static_cast<size_t>(homes_.n_experts());
  return std::span<const uint8_t>(runs_on_cpu_).subspan(static_cast<size_t>(layer) * E, E);
}

void CpuExperts::set_cached(int layer, int expert, bool cached) {
  if (!homes_.on_cpu(layer, expert))
    throw Error(fmt::format("CPU experts: layer {} expert {} is GPU-homed and cannot be cached", layer, expert));
  runs_on_cpu_[static_cast<size_t>(layer) * homes_.n_experts() + expert] = cached ? 0 : 1;
}

void CpuExperts::reserve(int n, cudaStream_t stream) {
  if (n <= capacity_tokens_) return;
  // The old buffers may be the source of an upload still in flight.
  check(cudaStreamSynchronize(stream), "CPU experts (grow buffers)");
  free_pinned(x_);
  free_pinned(experts_);
  free_pinned(weights_);
  free_pinned(partial_);
  capacity_tokens_ = std::max<int64_t>(n, 2 * capacity_tokens_);
  const int64_t D = config_.hidden_size, k = config_.experts_per_token;
  x_ = pinned<float>(capacity_tokens_ * D);
  partial_ = pinned<float>(capacity_tokens_ * D);
  experts_ = pinned<int32_t>(capacity_tokens_ * k);
  weights_ = pinned<float>(capacity_tokens_ * k);
}

void CpuExperts::download(const float* x, int n, const int32_t* experts, const float* weights, int k,
                          cudaStream_t stream) {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(stream, &capturing), "cudaStreamIsCapturing");
  if (capturing != cudaStreamCaptureStatusNone)
    throw Error("a step with CPU-homed experts cannot be captured as a CUDA graph yet (the host computes them "
                "between the GPU's kernels): issue it eagerly");
  if (k != config_.experts_per_token)
    throw Error(fmt::format("CPU experts: {} experts per token for a model of {}", k, config_.experts_per_token));
  reserve(n, stream);
  n_ = n;
  const size_t D = static_cast<size_t>(config_.hidden_size);
  check(cudaMemcpyAsync(x_, x, n * D * sizeof(float), cudaMemcpyDeviceToHost, stream), "CPU experts (download x)");
  check(cudaMemcpyAsync(experts_, experts, static_cast<size_t>(n) * k * sizeof(int32_t), cudaMemcpyDeviceToHost,
                        stream),
        "CPU experts (download routing)");
  check(cudaMemcpyAsync(weights_, weights, static_cast<size_t>(n) * k * sizeof(float), cudaMemcpyDeviceToHost, stream),
        "CPU experts (download routing weights)");
  check(cudaEventRecord(arrived_, stream), "cudaEventRecord");
}

const float* CpuExperts::compute(int layer, const model::MoeWeights& moe) {
  const auto waited = Clock::now();
  check(cudaEventSynchronize(arrived_), "CPU experts (wait for the routing)");
  const auto started = Clock::now();
  times_.wait_seconds += std::chrono::duration<double>(started - waited).count();
  const int k = config_.experts_per_token;
  const auto on_cpu = runs_on_cpu(layer);
  engine::cpu_routed_experts(pool_, config_, moe, on_cpu, {x_, n_, experts_, weights_, k}, partial_);
  times_.compute_seconds += seconds_since(started);
  times_.layers += 1;
  std::set<int32_t> used, ran;  // CPU-homed experts routed to; those of them the host computed
  for (int64_t i = 0; i < int64_t{n_} * k; ++i) {
    const int32_t e = experts_[i];
    if (e < 0 || e >= homes_.n_experts() || !homes_.on_cpu(layer, e)) continue;
    used.insert(e);
    if (on_cpu[static_cast<size_t>(e)]) {
      ran.insert(e);
      usage_.miss_routings += 1;
    } else {
      usage_.hit_routings += 1;
    }
  }
  times_.experts += std::ssize(ran);
  for (const int32_t e : used) usage_.used.push_back(static_cast<uint32_t>(layer * homes_.n_experts() + e));
  return partial_;
}

void CpuExperts::gpu_share_begin(cudaStream_t stream) {
  if (!timing_) return;
  if (gpu_shares_ == gpu_share_events_.size()) {
    cudaEvent_t a = nullptr, b = nullptr;
    check(cudaEventCreate(&a), "cudaEventCreate");
    check(cudaEventCreate(&b), "cudaEventCreate");
    gpu_share_events_.emplace_back(a, b);
  }
  check(cudaEventRecord(gpu_share_events_[gpu_shares_].first, stream), "cudaEventRecord");
}

void CpuExperts::gpu_share_end(cudaStream_t stream) {
  if (!timing_) return;
  check(cudaEventRecord(gpu_share_events_[gpu_shares_++].second, stream), "cudaEventRecord");
}

CpuExperts::Times CpuExperts::take_times() {
  for (size_t i = 0; i < gpu_shares_; ++i) {
    const auto [a, b] = gpu_share_events_[i];
    check(cudaEventSynchronize(b), "CPU experts (GPU share timing)");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    times_.gpu_share_seconds += ms * 1e-3;
  }
  gpu_shares_ = 0;
  return std::exchange(times_, {});
}

}  // namespace frank::cuda
