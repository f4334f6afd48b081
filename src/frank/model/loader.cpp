#include "frank/model/loader.h"

#include <fmt/format.h>

#include <map>
#include <regex>
#include <set>

#include "frank/core/error.h"
#include "frank/model/checkpoint.h"
#include "frank/model/linear_loader.h"
#include "frank/model/names.h"

namespace frank::model {
namespace {

const std::string* first_present(const Checkpoint& ck, const std::vector<std::string>& names) {
  for (const auto& n : names)
    if (ck.has(n)) return &n;
  return nullptr;
}

std::string tried(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// Routed experts may come stacked per layer (transformers) instead of one tensor per expert
// (official); this reads each stacked tensor once and hands out the expert's slice.
class StackedExperts {
 public:
  StackedExperts(const ModelConfig& c, const Checkpoint& ck, std::set<std::string>& used)
      : c_(c), ck_(ck), used_(used) {}

  // Returns false when the layer has no stacked tensors.
  bool fill(int layer, int expert, const std::string& which, Tensor& dst) {
    const int64_t E = c_.n_routed_experts, I = c_.moe_intermediate_size, D = c_.hidden_size;
    const bool down = which == "w2";
    const auto names = down ? stacked_down_names(layer) : stacked_gate_up_names(layer);
    const std::string* name = first_present(ck_, names);
    if (name == nullptr) return false;
    auto it = cache_.find(*name);
    if (it == cache_.end()) {
      const std::vector<int64_t> shape = down ? std::vector<int64_t>{E, D, I} : std::vector<int64_t>{E, 2 * I, D};
      it = cache_.emplace(*name, ck_.read_f32(*name, shape)).first;
      used_.insert(*name);
    }
    const auto& all = it->second;
    const int64_t per_expert = down ? D * I : 2 * I * D;
    const int64_t offset = expert * per_expert + (which == "w3" ? I * D : 0);
    const int64_t n = down ? D * I : I * D;
    dst.data.assign(all.begin() + offset, all.begin() + offset + n);
    return true;
  }

 private:
  const ModelConfig& c_;
  const Checkpoint& ck_;
  std::set<std::string>& used_;
  std::map<std::string, std::vector<float>> cache_;
};

std::vector<int32_t> load_tid2eid(const ModelConfig& c, const Checkpoint& ck, int layer,
                                  std::set<std::string>& used) {
  const auto names = name_candidates(fmt::format("layers.{}.ffn.gate.tid2eid", layer));
  const std::string* name = first_present(ck, names);
  if (name == nullptr)
    throw Error(fmt::format("checkpoint {} lacks the hash-routing table of layer {} (tried: {})", ck.dir().string(),
                            layer, tried(names)));
  used.insert(*name);
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
  std::set<std::string> used;
  StackedExperts stacked(c, ck, used);
  static const std::regex expert_name(R"(layers\.(\d+)\.ffn\.experts\.(\d+)\.(w[123])\.weight)");

  const auto load_slot = [&](const WeightSlot& slot) {
    const auto names = name_candidates(slot.name);
    if (const std::string* name = first_present(ck, names)) {
      if (slot.linear != nullptr) {
        load_linear(ck, *name, slot.shape, *slot.linear, used);
        return;
      }
      *slot.dst = Tensor(slot.shape, ck.read_f32(*name, slot.shape));
      used.insert(*name);
      return;
    }
    std::smatch m;
    if (std::regex_match(slot.name, m, expert_name)) {
      slot.dst->shape = slot.shape;
      if (stacked.fill(std::stoi(m[1]), std::stoi(m[2]), m[3], *slot.dst)) return;
    }
    throw Error(fmt::format("checkpoint {} lacks tensor '{}' (tried: {})", ck.dir().string(), slot.name,
                            tried(names)));
  };
  for_each_weight(c, w, load_slot);
  // The MTP block is optional: loaded when the checkpoint has it (all of it), else absent.
  if (first_present(ck, name_candidates("mtp.0.e_proj.weight")) != nullptr) {
    w.mtp.emplace();
    for_each_mtp_weight(c, *w.mtp, load_slot);
  }
  for (int l = 0; l < c.num_layers; ++l)
    if (c.hash_routed[l]) w.layers[l].moe.tid2eid = load_tid2eid(c, ck, l, used);

  if (unused != nullptr)
    for (const auto& name : ck.names())
      if (!used.contains(name) && !is_known_unused(name)) unused->push_back(name);
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
