#include "frank/model/loader.h"

#include <fmt/format.h>

#include "frank/core/error.h"
#include "frank/model/checkpoint.h"
#include "frank/model/names.h"
#include "frank/model/slot_loader.h"

namespace frank::model {
namespace {

std::vector<int32_t> load_tid2eid(const ModelConfig& c, const Checkpoint& ck, int layer, SlotLoader& slots) {
  const auto official = fmt::format("layers.{}.ffn.gate.tid2eid", layer);
  const auto name = slots.find(official);
  if (!name)
    throw Error(fmt::format("checkpoint {} lacks the hash-routing table of layer {} ({})", ck.dir().string(), layer,
                            official));
  slots.mark_used(*name);
  const auto table = ck.read_i64(*name, {c.vocab_size, c.experts_per_token});
  std::vector<int32_t> out(table.size());
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i] < 0 || table[i] >= c.n_routed_experts)
      throw Error(fmt::format("tensor '{}': entry {} (token {}) is expert {}, outside [0, {})", *name, i,
                              i / c.experts_per_token, table[i], c.n_routed_experts));
    out[i] = static_cast<int32_t>(table[i]);
  }
  return out;
}

}  // namespace

ModelWeights load_weights(const ModelConfig& c, const Checkpoint& ck, std::vector<std::string>* unused) {
  ModelWeights w;
  SlotLoader slots(ck, c, name_candidates);
  const auto load_slot = [&](const WeightSlot& slot) { slots.load(slot); };
  for_each_weight(c, w, load_slot);
  // The MTP block is optional: loaded when the checkpoint has it (all of it), else absent.
  if (slots.find("mtp.0.e_proj.weight")) {
    w.mtp.emplace();
    for_each_mtp_weight(c, *w.mtp, load_slot);
  }
  for (int l = 0; l < c.num_layers; ++l)
    if (c.hash_routed[l]) w.layers[l].moe.tid2eid = load_tid2eid(c, ck, l, slots);

  if (unused != nullptr) *unused = slots.unused(is_mtp_tensor);
  return w;
}

LoadedModel load_model(const std::filesystem::path& model_dir) {
  LoadedModel m;
  m.config = load_config(model_dir);
  const auto ck = Checkpoint::open(model_dir);
  m.weights = load_weights(m.config, ck, &m.unused_tensors);
  return m;
}

}  // namespace frank::model
