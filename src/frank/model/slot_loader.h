#pragma once
// Fills WeightSlots (weights.h) from a checkpoint: each official name is tried in every spelling a
// family's name mapping gives, Linear weights keep their FP8/FP4 form (linear_loader.h) or, where
// the checkpoint has a `.trellis` instead of a `.weight`, their EXL3 form (exl3_linear_loader.h),
// and routed experts may come stacked per layer (transformers). Shared by the V4 and V4.1 loaders.
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "frank/model/checkpoint.h"
#include "frank/model/config_common.h"
#include "frank/model/exl3_pack.h"
#include "frank/model/weights.h"

namespace frank::model {

class SlotLoader {
 public:
  using NameCandidates = std::function<std::vector<std::string>(const std::string& official)>;

  // `dims` gives the stacked experts' shapes.
  SlotLoader(const Checkpoint& checkpoint, const CommonConfig& dims, NameCandidates names);

  // Reads the slot's tensor; throws frank::Error naming it and every spelling tried when absent.
  void load(const WeightSlot& slot);
  // The first spelling of `official` the checkpoint has, if any.
  std::optional<std::string> find(const std::string& official) const;
  void mark_used(const std::string& name) { used_.insert(name); }
  // Checkpoint tensors never read, except those `ignore` accepts.
  std::vector<std::string> unused(const std::function<bool(const std::string&)>& ignore) const;

 private:
  // Fills one expert's w1/w3/w2 from the layer's stacked tensors; false when there are none.
  bool fill_stacked(int layer, int expert, const std::string& which, Tensor& dst);
  // The checkpoint's EXL3 declarations, read when the first EXL3 Linear is met.
  const Exl3Pack& exl3_pack();

  const Checkpoint& ck_;
  const CommonConfig& dims_;
  NameCandidates names_;
  std::set<std::string> used_;
  std::map<std::string, std::vector<float>> stacked_;  // stacked tensor name -> its values
  std::optional<Exl3Pack> exl3_pack_;
};

}  // namespace frank::model
