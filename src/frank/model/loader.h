#pragma once
// Loads a DeepSeek-V4 checkpoint directory (config.json + safetensors) into ModelWeights: fp32,
// with Linear weights kept in FP8/FP4 where the checkpoint ships them so (linear_loader.h).
#include <filesystem>
#include <string>
#include <vector>

#include "frank/model/config.h"
#include "frank/model/weights.h"

namespace frank::model {

class Checkpoint;

struct LoadedModel {
  ModelConfig config;
  ModelWeights weights;
  std::vector<std::string> unused_tensors;  // present in the checkpoint, not read (mtp.* excluded)
};

// Throws frank::Error naming the tensor and the problem (missing, wrong shape, unsupported dtype,
// tid2eid entry outside the expert range, ...).
ModelWeights load_weights(const ModelConfig& config, const Checkpoint& checkpoint,
                          std::vector<std::string>* unused_tensors = nullptr);
LoadedModel load_model(const std::filesystem::path& model_dir);

}  // namespace frank::model
