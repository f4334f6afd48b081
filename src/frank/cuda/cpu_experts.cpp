#include "frank/cuda/cpu_experts.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>

#include "frank/core/error.h"
#include "frank/cuda/device_array.h"
#include "frank/engine/cpu_routed_experts.h"

namespace frank::cuda {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Pinned host memory the GPU addresses at the same pointer (unified addressing: every 64-bit
// platform CUDA supports has it; checked rather than assumed).
template <class T>
T* mapped(int64_t count) {
  void* p = nullptr;
  check(cudaHostAlloc(&p, static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T), cudaHostAllocMapped),
        "cudaHostAlloc (CPU experts)");
  void* on_device = nullptr;
  const cudaError_t got = cudaHostGetDevicePointer(&on_device, p, 0);
  if (got != cudaSuccess || on_device != p) {
    cudaFreeHost(p);
    throw Error("CPU experts: the GPU does not address mapped host memory at its host address (no unified addressing)");
  }
  return static_cast<T*>(p);
}

template <class T>
void free_mapped(T*& p) {
  if (p != nullptr) cudaFreeHost(p);
  p = nullptr;
}

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(stream, &status), "cudaStreamIsCapturing");
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace

CpuExperts::CpuExperts(const model::ModelConfig& config, const model::ModelWeights& weights,
                       experts::ExpertHomes homes, unsigned threads)
    : config_(config), homes_(std::move(homes)) {
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
  try {
    allocate(captured_buffers_, kCapturedTokens);
    mailbox_ = mapped<HandshakeMailbox>(1);
    std::memset(mailbox_, 0, sizeof(HandshakeMailbox));
    void* p = nullptr;
    check(cudaMalloc(&p, sizeof(HandshakeCounters)), "cudaMalloc (CPU experts)");
    counters_ = static_cast<HandshakeCounters*>(p);
    const HandshakeCounters zero{};
    check(cudaMemcpy(counters_, &zero, sizeof zero, cudaMemcpyHostToDevice), "CPU experts (counters)");
    // The pool is made on the worker, whose thread it pins to core 0 as its calling thread (the
    // thread constructing this object keeps its own affinity).
    worker_ = std::make_unique<HandshakeWorker>(
        *mailbox_, [this, threads] { pool_ = std::make_unique<ThreadPool>(threads, /*pin=*/true); },
        [this](int32_t layer, int32_t n, double waited) { serve_layer(layer, n, waited); });
  } catch (...) {
    release(captured_buffers_);
    free_mapped(mailbox_);
    cudaFree(counters_);
    throw;
  }
}

CpuExperts::~CpuExperts() {
  worker_.reset();  // any GPU wait still pending passes (kAborted)
  cudaDeviceSynchronize();  // no kernel may touch the buffers once freed
  release(captured_buffers_);
  release(eager_buffers_);
  free_mapped(mailbox_);
  cudaFree(counters_);
  for (auto [a, b] : gpu_share_events_) cudaEventDestroy(a), cudaEventDestroy(b);
}

void CpuExperts::allocate(Buffers& b, int64_t tokens) {
  const int64_t D = config_.hidden_size, k = config_.experts_per_token;
  b.capacity_tokens = tokens;
  b.x = mapped<float>(tokens * D);
  b.partial = mapped<float>(tokens * D);
  b.experts = mapped<int32_t>(tokens * k);
  b.weights = mapped<float>(tokens * k);
}

void CpuExperts::release(Buffers& b) {
  free_mapped(b.x);
  free_mapped(b.experts);
  free_mapped(b.weights);
  free_mapped(b.partial);
  b.capacity_tokens = 0;
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

void CpuExperts::hand_over(int layer, const float* x, int n, const int32_t* experts, const float* weights, int k,
                           cudaStream_t stream) {
  if (k != config_.experts_per_token)
    throw Error(fmt::format("CPU experts: {} experts per token for a model of {}", k, config_.experts_per_token));
  if (layer < 0 || layer >= config_.num_layers) throw Error(fmt::format("CPU experts: no layer {}", layer));
  const bool captured = capturing(stream);
  if (captured && n > kCapturedTokens)
    throw Error(fmt::format("CPU experts: a captured split step of {} tokens, at most {}", n, kCapturedTokens));
  Buffers& b = buffers(n);
  if (n > b.capacity_tokens) {
    // The old buffers may be read by hand-overs in flight (the worker serves them meanwhile).
    check(cudaStreamSynchronize(stream), "CPU experts (grow buffers)");
    const int64_t capacity = std::max<int64_t>(n, 2 * b.capacity_tokens);
    release(b);
    allocate(b, capacity);
  }
  stream_ = stream;
  check(hand_over_layer(x, n, config_.hidden_size, experts, weights, k, layer, b.x, b.experts, b.weights, counters_,
                        mailbox_, stream),
        "CPU experts (hand over)");
  if (captured) captured_ += 1;
  else expect(1);
}

void CpuExperts::add_sum(float* out, int n, cudaStream_t stream) {
  check(wait_for_host(counters_, mailbox_, stream), "CPU experts (wait for the host)");
  check(add_partial(out, buffers(n).partial, int64_t{n} * config_.hidden_size, stream), "CPU experts (add the sum)");
}

void CpuExperts::expect(int64_t count) { worker_->expect(count); }

void CpuExperts::finish() {
  worker_->finish([&] {
    // A failed stream never reaches the hand-overs still expected.
    const cudaError_t state = cudaStreamQuery(stream_);
    if (state != cudaSuccess && state != cudaErrorNotReady)
      throw Error(fmt::format("CPU experts: the stream failed before handing its layers over: {}",
                              cudaGetErrorString(state)));
  });
}

void CpuExperts::serve_layer(int layer, int n, double waited) {
  times_.wait_seconds += waited;
  times_.layers += 1;
  const auto started = Clock::now();
  if (layer < 0 || layer >= config_.num_layers || n < 0 || n > buffers(n).capacity_tokens)
    throw Error(fmt::format("CPU experts: a hand-over of layer {} and {} tokens", layer, n));
  Buffers& b = buffers(n);
  try {
    engine::cpu_routed_experts(*pool_, config_, *moes_[static_cast<size_t>(layer)], runs_on_cpu(layer),
                               {b.x, n, b.experts, b.weights, config_.experts_per_token}, b.partial);
  } catch (const std::exception& e) {
    // The GPU still adds this sum (the worker answers the hand-over): zeros, not a stale layer's.
    std::fill_n(b.partial, int64_t{n} * config_.hidden_size, 0.0f);
    throw Error(fmt::format("CPU experts, layer {}: {}", layer, e.what()));
  }
  record_usage(layer, b, n);
  times_.compute_seconds += seconds_since(started);
}

void CpuExperts::record_usage(int layer, const Buffers& b, int n) {
  const auto on_cpu = runs_on_cpu(layer);
  std::set<int32_t> used, ran;  // CPU-homed experts routed to; those of them the host computed
  for (int64_t i = 0; i < int64_t{n} * config_.experts_per_token; ++i) {
    const int32_t e = b.experts[i];
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
}

CpuExperts::StepUsage CpuExperts::take_step_usage() {
  finish();
  return std::exchange(usage_, {});
}

void CpuExperts::gpu_share_begin(cudaStream_t stream) {
  if (!timing_ || capturing(stream)) return;
  if (gpu_shares_ == gpu_share_events_.size()) {
    cudaEvent_t a = nullptr, b = nullptr;
    check(cudaEventCreate(&a), "cudaEventCreate");
    check(cudaEventCreate(&b), "cudaEventCreate");
    gpu_share_events_.emplace_back(a, b);
  }
  check(cudaEventRecord(gpu_share_events_[gpu_shares_].first, stream), "cudaEventRecord");
}

void CpuExperts::gpu_share_end(cudaStream_t stream) {
  if (!timing_ || capturing(stream)) return;
  check(cudaEventRecord(gpu_share_events_[gpu_shares_++].second, stream), "cudaEventRecord");
}

CpuExperts::Times CpuExperts::take_times() {
  finish();
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
