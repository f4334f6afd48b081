#include "frank/cuda/device_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>

#include "frank/core/error.h"
#include "frank/core/splitmix64.h"
#include "frank/cpu/quant/exl3_matrix.h"
#include "frank/cpu/quantized_linear.h"
#include "frank/cuda/exl3_packed.h"
#include "frank/cuda/device_array.h"
#include "frank/cuda/native_weight.h"
#include "frank/cuda/synthetic_fill.cuh"

namespace frank::cuda {
namespace {

// fp32 -> bf16 bits, round to nearest even (NaN kept quiet).
uint16_t to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The FP8 / FP4 type of a weight as shipped; nothing for a dense or EXL3 one.
std::optional<WeightType> shipped_type(const LinearWeight& w) {
  if (!w.quantized || w.quantized->format == QuantizedMatrix::Format::Exl3) return std::nullopt;
  return native_type(*w.quantized);
}

// fp32 as given, or rounded to bf16.
std::vector<uint8_t> dense_bytes(std::span<const float> values, WeightType type) {
  if (type == WeightType::F32) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(values.data());
    return std::vector<uint8_t>(bytes, bytes + values.size_bytes());
  }
  if (type != WeightType::BF16) throw Error("dense weights are stored as fp32 or bf16");
  std::vector<uint8_t> out(values.size() * sizeof(uint16_t));
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t bits = to_bf16(values[i]);
    std::memcpy(out.data() + i * sizeof(uint16_t), &bits, sizeof(bits));
  }
  return out;
}

// The one FP8 / FP4 type of every matrix of `experts` whose rows the MoE kernels' 16-byte loads
// fit (moe_experts: 16 e4m3 or 32 e2m1); nothing when there are none, when any is dense or EXL3 or
// its rows do not fit, or when they differ.
std::optional<WeightType> native_expert_type(std::span<const model::ExpertWeights* const> experts) {
  std::optional<WeightType> type;
  for (const model::ExpertWeights* x : experts)
    for (const LinearWeight* m : {&x->gate, &x->up, &x->down}) {
      const std::optional<WeightType> t = shipped_type(*m);
      if (!t || (type && t != type) || m->cols() % (t == WeightType::Fp4 ? 32 : 16) != 0) return std::nullopt;
      type = t;
    }
  return type;
}

// The bits of gate, up and down when every matrix of `experts` is EXL3 and each role has one bit
// width across them (the MoE kernels take it as a template parameter: exl3_moe.cuh); nothing
// otherwise. Codebooks may differ (each matrix carries its own).
std::optional<std::array<int, 3>> exl3_role_bits(std::span<const model::ExpertWeights* const> experts) {
  std::optional<std::array<int, 3>> bits;
  for (const model::ExpertWeights* x : experts) {
    const LinearWeight* roles[3] = {&x->gate, &x->up, &x->down};
    std::array<int, 3> b{};
    for (int r = 0; r < 3; ++r) {
      const auto& q = roles[r]->quantized;
      if (!q || q->format != QuantizedMatrix::Format::Exl3 || q->bits < 1 || q->bits > 8) return std::nullopt;
      b[r] = q->bits;
    }
    if (bits && *bits != b) return std::nullopt;
    bits = b;
  }
  return bits;
}

// An EXL3 weight with a shape but no trellis (model::skeleton_weights at an EXL3 format).
bool exl3_shape_only(const LinearWeight& w) {
  return w.quantized && w.quantized->format == QuantizedMatrix::Format::Exl3 && w.quantized->trellis.empty();
}

}  // namespace

ExpertTypes expert_types(std::span<const model::ExpertWeights* const> routed, const model::ExpertWeights& shared,
                         WeightType dense) {
  const model::ExpertWeights* const shared_one[] = {&shared};
  ExpertTypes types{native_expert_type(routed).value_or(dense), native_expert_type(shared_one).value_or(dense)};
  if (const auto bits = exl3_role_bits(routed)) {
    types.routed = WeightType::Exl3;
    std::copy(bits->begin(), bits->end(), types.exl3_bits);
  }
  return types;
}

std::vector<uint8_t> stored_bytes(const LinearWeight& host, WeightType type) {
  if (is_quantized(type)) {
    if (shipped_type(host) != type) throw Error("a weight stored as shipped must be FP8 / FP4 of the table's type");
    return native_bytes(*host.quantized);
  }
  if (host.quantized) return dense_bytes(cpu::dequantize(*host.quantized), type);
  if (host.dense.data.empty() && host.rows() > 0)
    throw Error("a weight with a shape but no data lives only in device memory: it has no host bytes to copy");
  return dense_bytes(host.dense.data, type);
}

WeightType parse_weight_type(const std::string& text) {
  if (text == "fp32") return WeightType::F32;
  if (text == "bf16") return WeightType::BF16;
  throw Error(fmt::format("unknown weight type '{}': expected fp32 or bf16", text));
}

DeviceWeights::~DeviceWeights() {
  cache_.reset();  // first: its copies in flight write into the expert tables freed below
  for (void* p : buffers_) cudaFree(p);
}

void* DeviceWeights::allocate(size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc (weights)");
  buffers_.push_back(p);
  bytes_ += bytes;
  return p;
}

// Synchronous: weights are uploaded once, before (or at) the first step that uses them.
void* DeviceWeights::upload(const void* src, size_t bytes) {
  void* p = allocate(bytes);
  check(cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice), "weight upload");
  return p;
}

void* DeviceWeights::generate(int64_t count, WeightType type, float stddev) {
  void* p = allocate(static_cast<size_t>(count) * (type == WeightType::BF16 ? 2 : 4));
  check(fill_uniform(p, type, count, stddev, splitmix64_finalize(seed_ + ++generated_), stream_), "fill_uniform");
  check(cudaStreamSynchronize(stream_), "fill_uniform");
  return p;
}

const float* DeviceWeights::tensor(const Tensor& host) {
  auto it = plain_.find(&host);
  if (it == plain_.end()) {
    const int64_t count = Tensor::count(host.shape);
    void* p = host.data.empty() && count > 0 ? generate(count, WeightType::F32, 1.0f)
                                             : upload(host.data.data(), host.data.size() * sizeof(float));
    it = plain_.emplace(&host, p).first;
  }
  return static_cast<const float*>(it->second);
}

const void* DeviceWeights::upload_linear(std::span<const float> values) {
  const std::vector<uint8_t> bytes = dense_bytes(values, linear_type_);
  return upload(bytes.data(), bytes.size());
}

const DeviceWeights::Linear& DeviceWeights::linear(const LinearWeight& host) {
  if (!host.quantized || host.quantized->format == QuantizedMatrix::Format::Exl3) return dense_linear(host);
  auto it = linear_.find(&host);
  if (it != linear_.end()) return it->second;
  const QuantizedMatrix& q = *host.quantized;
  cpu::check_quantized_matrix(q);
  const std::vector<uint8_t> bytes = native_bytes(q);
  const Linear l{upload(bytes.data(), bytes.size()), native_type(q), q.rows, q.cols};
  return linear_.emplace(&host, l).first->second;
}

const DeviceWeights::Linear& DeviceWeights::dense_linear(const LinearWeight& host) {
  auto it = linear_.find(&host);
  if (it != linear_.end()) return it->second;
  Linear l{nullptr, linear_type_, host.rows(), host.cols()};
  if (exl3_shape_only(host)) {
    l.data = generate(l.rows * l.cols, linear_type_, static_cast<float>(1.0 / std::sqrt(static_cast<double>(l.cols))));
  } else if (host.quantized) {
    // Decoded on the host: FP8 / FP4 values are exact in fp32 and bf16 alike, so the GPU computes
    // with the checkpoint's weights, at 2-8x their memory.
    l.data = upload_linear(cpu::dequantize(*host.quantized));
  } else if (host.dense.data.empty() && l.rows > 0) {
    l.data = generate(l.rows * l.cols, linear_type_, static_cast<float>(1.0 / std::sqrt(static_cast<double>(l.cols))));
  } else {
    l.data = upload_linear(host.dense.data);
  }
  return linear_.emplace(&host, l).first->second;
}

Exl3DeviceMatrix DeviceWeights::exl3_matrix(const LinearWeight& host) {
  const QuantizedMatrix& q = *host.quantized;
  const size_t bytes = static_cast<size_t>(exl3_buffer_bytes(q));
  auto* p = static_cast<uint16_t*>(allocate(bytes));
  const Exl3DeviceMatrix m = exl3_device_matrix(q, p);
  const int64_t words = exl3_trellis_words(m);
  if (exl3_shape_only(host)) {
    // Random trellis words, sign vectors of random signs: suh +-1/sqrt(cols), svh +-1 (the scales
    // of model::random_exl3's host matrices, without their 0.5..1.5 spread). H is orthonormal and
    // the codebooks' values have about unit variance, so W's entries are ~1/sqrt(cols), as the dense
    // synthetic weights' are.
    const auto seed = [&] { return splitmix64_finalize(seed_ + ++generated_); };
    check(fill_random_words(p, words, seed(), stream_), "fill_random_words");
    check(fill_random_signs(p + words, m.padded_cols(),
                            static_cast<float>(1.0 / std::sqrt(static_cast<double>(q.cols))), seed(), stream_),
          "fill_random_signs");
    check(fill_random_signs(p + words + m.padded_cols(), m.padded_rows(), 1.0f, seed(), stream_),
          "fill_random_signs");
    check(cudaStreamSynchronize(stream_), "fill_random_signs");
    return m;
  }
  std::vector<uint8_t> buffer(bytes);
  write_exl3_buffer(q, buffer.data());
  check(cudaMemcpy(p, buffer.data(), bytes, cudaMemcpyHostToDevice), "weight upload");
  return m;
}

const float* DeviceWeights::inv_freq(const engine::RopeTable& rope) {
  auto it = plain_.find(&rope);
  if (it == plain_.end())
    it = plain_.emplace(&rope, upload(rope.inv_freq().data(), rope.inv_freq().size() * sizeof(float))).first;
  return static_cast<const float*>(it->second);
}

const int32_t* DeviceWeights::tid2eid(const model::MoeWeights& moe) {
  auto it = plain_.find(&moe.tid2eid);
  if (it == plain_.end())
    it = plain_.emplace(&moe.tid2eid, upload(moe.tid2eid.data(), moe.tid2eid.size() * sizeof(int32_t))).first;
  return static_cast<const int32_t*>(it->second);
}

const ExpertTables& DeviceWeights::experts(const model::MoeWeights& moe) {
  auto it = experts_.find(&moe);
  if (it != experts_.end()) return it->second;
  // The routed experts' type covers the CPU-homed ones too: the cache slots hold their copies in it.
  std::vector<const model::ExpertWeights*> routed;
  for (const model::ExpertWeights& x : moe.experts) routed.push_back(&x);
  const ExpertTypes types = expert_types(routed, moe.shared, linear_type_);
  // The experts the GPU holds: the routed ones not homed on the CPU (null: stays in host memory),
  // then the shared one at E. EXL3 routed experts: each entry points at its Exl3DeviceMatrix in one
  // device array of the layer's [3][E] (gate, up, down), filled in below.
  const int layer = cpu_experts_ ? cpu_experts_->layer_of(moe) : -1;
  const size_t E = moe.experts.size();
  const bool exl3 = types.routed == WeightType::Exl3;
  std::vector<Exl3DeviceMatrix> packed(exl3 ? 3 * E : 0);
  const Exl3DeviceMatrix* packed_device =
      exl3 ? static_cast<const Exl3DeviceMatrix*>(allocate(packed.size() * sizeof(Exl3DeviceMatrix))) : nullptr;
  std::vector<const void*> tables[3];
  for (size_t e = 0; e <= E; ++e) {
    const bool is_shared = e == E;
    if (!is_shared && layer >= 0 && cpu_experts_->homes().on_cpu(layer, static_cast<int>(e))) {
      for (auto& t : tables) t.push_back(nullptr);
      continue;
    }
    const model::ExpertWeights& x = is_shared ? moe.shared : moe.experts[e];
    const LinearWeight* roles[3] = {&x.gate, &x.up, &x.down};
    const WeightType type = is_shared ? types.shared : types.routed;
    for (int r = 0; r < 3; ++r) {
      if (type == WeightType::Exl3) {
        packed[r * E + e] = exl3_matrix(*roles[r]);
        tables[r].push_back(packed_device + r * E + e);
      } else {
        tables[r].push_back(is_quantized(type) ? linear(*roles[r]).data : dense_linear(*roles[r]).data);
      }
    }
  }
  if (exl3)
    check(cudaMemcpy(const_cast<Exl3DeviceMatrix*>(packed_device), packed.data(),
                     packed.size() * sizeof(Exl3DeviceMatrix), cudaMemcpyHostToDevice),
          "weight upload");
  const size_t bytes = tables[0].size() * sizeof(const void*);
  ExpertTables t{static_cast<const void* const*>(upload(tables[0].data(), bytes)),
                 static_cast<const void* const*>(upload(tables[1].data(), bytes)),
                 static_cast<const void* const*>(upload(tables[2].data(), bytes)), types.routed, types.shared};
  std::copy(std::begin(types.exl3_bits), std::end(types.exl3_bits), t.exl3_bits);
  return experts_.emplace(&moe, t).first->second;
}

void DeviceWeights::set_cpu_experts(std::unique_ptr<CpuExperts> cpu) {
  if (!experts_.empty())
    throw Error("CPU-homed experts must be set before the first step: experts were already uploaded");
  cpu_experts_ = std::move(cpu);
}

void DeviceWeights::set_expert_cache(size_t slots, const experts::CachePolicy& policy) {
  if (!experts_.empty()) throw Error("the GPU expert cache must be set before the first step");
  if (!has_cpu_experts() || slots == 0) return;
  cache_ = std::make_unique<ExpertCacheSlots>(slots, policy, cpu_experts_->homes());
}

void DeviceWeights::end_step() {
  if (cache_) cache_->end_step(*this, *cpu_experts_, stream_);
  else if (cpu_experts_) cpu_experts_->take_step_usage();  // no policy to feed: dropped, not kept growing
}

void DeviceWeights::wait_for_expert_copies() {
  if (cache_) cache_->wait_for_copies(stream_);
}

const uint8_t* DeviceWeights::cpu_homes(const model::MoeWeights& moe) {
  const int layer = cpu_experts_ ? cpu_experts_->layer_of(moe) : -1;
  if (layer < 0) throw Error("CUDA MoE: no CPU-homed experts in this layer");
  auto it = plain_.find(&moe.experts);  // keyed by the experts vector: the MoE's own address keys its tables
  if (it == plain_.end()) {
    const auto flags = cpu_experts_->runs_on_cpu(layer);
    it = plain_.emplace(&moe.experts, upload(flags.data(), flags.size())).first;
  }
  return static_cast<const uint8_t*>(it->second);
}

}  // namespace frank::cuda
