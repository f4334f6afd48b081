#include "frank/engine/model.h"

#include <fmt/format.h>

#include <algorithm>

#include "frank/core/error.h"
#include "frank/core/sha256.h"
#include "frank/engine/cpu_ops.h"
#include "frank/engine/decoder_layer.h"

namespace frank::engine {
namespace {

// SHA-256 over the layer schedule, every weight's name and shape, and up to 64 evenly spaced values
// of each weight: cheap at load time, and two different checkpoints practically never collide.
std::string fingerprint_of(const model::ModelConfig& c, model::ModelWeights& w) {
  std::string text = fmt::format("{} v{} d{} L{} H{}x{} r{} E{}k{} W{}", c.model_type, c.vocab_size, c.hidden_size,
                                 c.num_layers, c.num_heads, c.head_dim, c.rope_dim, c.n_routed_experts,
                                 c.experts_per_token, c.sliding_window);
  for (int l = 0; l < c.num_layers; ++l) text += fmt::format(" {}:{}", c.compress_ratio[l], int{c.hash_routed[l]});
  model::for_each_weight(c, w, [&](const model::WeightSlot& slot) {
    text += slot.name + shape_string(slot.shape);
    auto sample = [&](const auto& values) {
      const size_t step = std::max<size_t>(1, values.size() / 64);
      for (size_t i = 0; i < values.size(); i += step)
        text.append(reinterpret_cast<const char*>(&values[i]), sizeof(values[i]));
    };
    if (slot.linear != nullptr && slot.linear->quantized) {
      text += "q";
      const QuantizedMatrix& q = *slot.linear->quantized;
      sample(q.values);
      sample(q.scales);
      sample(q.trellis);  // EXL3 (the others are empty for FP8 / FP4)
      sample(q.suh);
      sample(q.svh);
    } else {
      sample(slot.dst->data);
    }
  });
  for (const auto& layer : w.layers)
    text.append(reinterpret_cast<const char*>(layer.moe.tid2eid.data()), layer.moe.tid2eid.size() * sizeof(int32_t));
  return sha256_hex(text);
}

}  // namespace

Model::Model(model::ModelConfig config, model::ModelWeights weights)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      main_rope_(config_.rope_main, config_.rope_dim),
      compress_rope_(config_.rope_compress, config_.rope_dim) {
  attention_.reserve(config_.num_layers);
  for (int l = 0; l < config_.num_layers; ++l)
    attention_.emplace_back(config_, weights_.layers[l].attn, l, main_rope_, compress_rope_);
  fingerprint_ = fingerprint_of(config_, weights_);
}

void check_call(const model::CommonConfig& c, int64_t position, std::span<const int32_t> ids) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= c.vocab_size)
      throw Error(fmt::format("token id {} (at index {}) is outside the vocabulary [0, {})", ids[i], i,
                              c.vocab_size));
  if (position + static_cast<int64_t>(ids.size()) > c.max_position_embeddings)
    throw Error(fmt::format("sequence of {} tokens exceeds max_position_embeddings ({})",
                            position + static_cast<int64_t>(ids.size()), c.max_position_embeddings));
}

void Model::check_call(int64_t position, std::span<const int32_t> ids) const {
  engine::check_call(config_, position, ids);
}

Tensor Model::forward(Session& session, std::span<const int32_t> ids, Logits logits, Tensor* streams_out) const {
  check_call(session.position, ids);
  if (session.layers.size() != static_cast<size_t>(config_.num_layers))
    throw Error("session was made for a different model");
  const int64_t n = static_cast<int64_t>(ids.size());
  CpuOps ops(topk_dump_);
  ForcedRouting forced;
  if (routing_replay_ != nullptr) {
    forced = routing_replay_->take(n);
    ops.replay_routing(forced, weights_);
  }
  const std::vector<int32_t> tokens(ids.begin(), ids.end());
  Tensor out = model_forward(ops, config_, weights_, attention_, session.layers, session.position, tokens,
                             logits == Logits::Last ? n - 1 : 0, streams_out);
  session.position += n;
  return out;
}

Session Model::rewind(const SessionCheckpoint& before, const Session& after, int64_t keep) const {
  const int64_t start = before.position, call = after.position - before.position;
  if (call < 0 || keep < 0 || keep > call || call > config_.sliding_window)
    throw Error(fmt::format("rewind: keeping {} of a {}-token call (window {}) is not possible", keep, call,
                            config_.sliding_window));
  for (const auto& layer : after.layers)
    for (const Tensor* t : {&layer.last_call.compressor_kv, &layer.last_call.indexer_kv})
      if (!t->empty() && t->rows() != call)
        throw Error("rewind: the session's last forward call is not the one after the checkpoint");
  Session s = restore_checkpoint(before, after);
  auto first_rows = [keep](const Tensor& t) {
    return t.empty() ? Tensor()
                     : Tensor({keep, t.cols()}, std::vector<float>(t.data.begin(), t.data.begin() + keep * t.cols()));
  };
  for (int l = 0; l < config_.num_layers; ++l) {
    attention_[l].replay(s.layers[l], after.layers[l], start, keep);
    // The record now describes a call of the kept tokens (so the same checkpoint can rewind it
    // again, to fewer), and keeps everything the original call routed to (what it cost).
    const CallRecord& call = after.layers[l].last_call;
    s.layers[l].last_call = {first_rows(call.compressor_kv), first_rows(call.compressor_gate),
                             first_rows(call.indexer_kv), first_rows(call.indexer_gate), call.experts};
  }
  s.position = start + keep;
  return s;
}

}  // namespace frank::engine
