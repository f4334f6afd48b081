#include "frank/model/loader_v41.h"

#include <fmt/format.h>

#include <algorithm>

#include "frank/core/error.h"
#include "frank/model/checkpoint.h"
#include "frank/model/names.h"
#include "frank/model/names_v41.h"
#include "frank/model/slot_loader.h"

namespace frank::model {
namespace {

// transformers' float Engram table may carry `weight_scale_inv`, which it ignores unless the table is
// FP8 (reference notes W3); a float table is used unscaled, so only all-ones scales are unambiguous.
void check_float_table_scales(const V41Config& c, const Checkpoint& ck, SlotLoader& slots) {
  for (size_t k = 0; k < c.engram.layer_ids.size(); ++k) {
    const int l = c.engram.layer_ids[k];
    for (const auto& name : {fmt::format("model.engram_tables.{}.weight_scale_inv", l),
                             fmt::format("layers.{}.engram.embed.scale", l)}) {
      const TensorInfo* info = ck.find(name);
      if (info == nullptr) continue;
      const auto scales = ck.read_f32(name, info->shape);
      for (float s : scales)
        if (s != 1.0f)
          throw Error(fmt::format("tensor '{}': the Engram table of layer {} is a float table with scales other than "
                                  "1 (found {}); frank reads float tables unscaled and FP8 tables are not supported "
                                  "yet",
                                  name, l, s));
      slots.mark_used(name);
    }
  }
}

}  // namespace

V41Weights load_v41_weights(const V41Config& c, const Checkpoint& ck, std::vector<std::string>* notes,
                            std::vector<std::string>* unused) {
  V41Weights w;
  SlotLoader slots(ck, c, v41_name_candidates);
  // The drafter is loaded when the config declares it and the checkpoint has any mtp.* tensor; then
  // every one of its tensors must be there (a missing one is named).
  const bool ships_draft =
      std::ranges::any_of(ck.names(), [](const std::string& name) { return is_mtp_tensor(name); });
  if (c.dspark && ships_draft) w.dspark.emplace();
  for_each_v41_weight(c, w, [&](const WeightSlot& slot) { slots.load(slot); });
  check_float_table_scales(c, ck, slots);

  int vision = 0, draft = 0;
  const auto skipped = slots.unused([](const std::string&) { return false; });
  for (const auto& name : skipped) {
    if (is_v41_vision_tensor(name))
      ++vision;
    else if (is_mtp_tensor(name) && !w.dspark)  // the config declares no drafter
      ++draft;
    else if (unused != nullptr)
      unused->push_back(name);
  }
  if (notes != nullptr && vision > 0)
    notes->push_back(fmt::format("{} vision tensors (vision tower, aligner, image embeddings) were not loaded: images "
                                 "are not supported",
                                 vision));
  if (notes != nullptr && draft > 0)
    notes->push_back(fmt::format("{} DSpark draft tensors (mtp.*) were not loaded: config.json declares no drafter "
                                 "(num_nextn_predict_layers is 0)",
                                 draft));
  return w;
}

LoadedV41Model load_v41_model(const std::filesystem::path& model_dir, std::filesystem::path engram_data) {
  LoadedV41Model m;
  m.config = load_v41_config(model_dir);
  m.notes = m.config.notes;
  const auto ck = Checkpoint::open(model_dir);
  m.weights = load_v41_weights(m.config, ck, &m.notes, &m.unused_tensors);
  if (!m.config.engram.layer_ids.empty()) {
    if (engram_data.empty()) engram_data = model_dir / "engram_hash.safetensors";
    if (!std::filesystem::exists(engram_data))
      throw Error(fmt::format("the Engram layers need the tokenizer's normalised-token map and the hash multipliers "
                              "(engram.token_map, engram.multipliers); '{}' does not exist",
                              engram_data.string()));
    m.engram = load_engram_layout(m.config, engram_data);
  }
  return m;
}

}  // namespace frank::model
