#include "frank/model/slot_loader.h"

#include <fmt/format.h>

#include <regex>

#include "frank/core/error.h"
#include "frank/model/exl3_linear_loader.h"
#include "frank/model/linear_loader.h"
#include "frank/model/names.h"

namespace frank::model {
namespace {

std::string tried(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

const std::string* first_present(const Checkpoint& ck, const std::vector<std::string>& names) {
  for (const auto& n : names)
    if (ck.has(n)) return &n;
  return nullptr;
}

}  // namespace

SlotLoader::SlotLoader(const Checkpoint& checkpoint, const CommonConfig& dims, NameCandidates names)
    : ck_(checkpoint), dims_(dims), names_(std::move(names)) {}

std::optional<std::string> SlotLoader::find(const std::string& official) const {
  const auto names = names_(official);
  if (const std::string* name = first_present(ck_, names)) return *name;
  return std::nullopt;
}

void SlotLoader::load(const WeightSlot& slot) {
  static const std::regex expert_name(R"(layers\.(\d+)\.ffn\.experts\.(\d+)\.(w[123])\.weight)");
  const auto names = names_(slot.name);
  if (const std::string* name = first_present(ck_, names)) {
    if (slot.linear != nullptr) {
      load_linear(ck_, *name, slot.shape, *slot.linear, used_);
      return;
    }
    *slot.dst = Tensor(slot.shape, ck_.read_f32(*name, slot.shape));
    used_.insert(*name);
    return;
  }
  if (slot.linear != nullptr)
    for (const auto& name : names)
      if (exl3_trellis_name(ck_, name)) {
        load_exl3_linear(ck_, name, slot.shape, exl3_pack(), *slot.linear, used_);
        return;
      }
  std::smatch m;
  if (std::regex_match(slot.name, m, expert_name)) {
    slot.dst->shape = slot.shape;
    if (fill_stacked(std::stoi(m[1]), std::stoi(m[2]), m[3], *slot.dst)) return;
  }
  throw Error(fmt::format("checkpoint {} lacks tensor '{}' (tried: {})", ck_.dir().string(), slot.name, tried(names)));
}

// Routed experts may come stacked per layer (transformers) instead of one tensor per expert
// (official); each stacked tensor is read once and each expert takes its slice.
bool SlotLoader::fill_stacked(int layer, int expert, const std::string& which, Tensor& dst) {
  const int64_t E = dims_.n_routed_experts, I = dims_.moe_intermediate_size, D = dims_.hidden_size;
  const bool down = which == "w2";
  const auto names = down ? stacked_down_names(layer) : stacked_gate_up_names(layer);
  const std::string* name = first_present(ck_, names);
  if (name == nullptr) return false;
  auto it = stacked_.find(*name);
  if (it == stacked_.end()) {
    const std::vector<int64_t> shape = down ? std::vector<int64_t>{E, D, I} : std::vector<int64_t>{E, 2 * I, D};
    it = stacked_.emplace(*name, ck_.read_f32(*name, shape)).first;
    used_.insert(*name);
  }
  const auto& all = it->second;
  const int64_t per_expert = down ? D * I : 2 * I * D;
  const int64_t offset = expert * per_expert + (which == "w3" ? I * D : 0);
  const int64_t n = down ? D * I : I * D;
  dst.data.assign(all.begin() + offset, all.begin() + offset + n);
  return true;
}

const Exl3Pack& SlotLoader::exl3_pack() {
  if (!exl3_pack_) exl3_pack_ = read_exl3_pack(ck_.dir());
  return *exl3_pack_;
}

std::vector<std::string> SlotLoader::unused(const std::function<bool(const std::string&)>& ignore) const {
  std::vector<std::string> out;
  for (const auto& name : ck_.names())
    if (!used_.contains(name) && !ignore(name)) out.push_back(name);
  return out;
}

}  // namespace frank::model
