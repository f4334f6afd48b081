#pragma once
// Loads a DeepSeek-V4.1 checkpoint directory (config.json + safetensors, released or transformers
// names) into V41Weights, plus the Engram hash data, and the DSpark drafter (released mtp.* names) when
// the config declares one and the checkpoint ships it. Images are not supported: their tensors are
// skipped and said so in `notes`.
#include <filesystem>
#include <string>
#include <vector>

#include "frank/model/config_v41.h"
#include "frank/model/engram_layout.h"
#include "frank/model/weights_v41.h"

namespace frank::model {

class Checkpoint;

struct LoadedV41Model {
  V41Config config;
  V41Weights weights;
  EngramLayout engram;                      // empty when the model has no Engram layers
  std::vector<std::string> unused_tensors;  // present, not read, and neither vision nor DSpark
  std::vector<std::string> notes;           // what was skipped, for the user
};

// Throws frank::Error naming the tensor and the problem (missing, wrong shape, unsupported dtype).
// `notes` receives what was skipped; `unused` the tensors nothing reads.
V41Weights load_v41_weights(const V41Config& config, const Checkpoint& checkpoint, std::vector<std::string>* notes,
                            std::vector<std::string>* unused);

// `engram_data` holds the Engram token map and multipliers (engram_layout.h); by default
// <model_dir>/engram_hash.safetensors. It is read only when the model has Engram layers.
LoadedV41Model load_v41_model(const std::filesystem::path& model_dir, std::filesystem::path engram_data = {});

}  // namespace frank::model
