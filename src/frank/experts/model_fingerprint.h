#pragma once
// The model fingerprint that plans and routing traces carry, so that a plan or trace made for
// one model is refused for another. It names what a plan's expert ids mean: the model family and
// the routed-expert shape ("deepseek_v4/43x256/top6" for DeepSeek-V4-Flash). Two checkpoints with
// the same shape share a fingerprint: a plan learned on one is valid, if not tuned, for the other.
#include <cstdint>
#include <string>

#include "frank/model/config.h"

namespace frank::experts {

std::string model_fingerprint(const std::string& model_type, uint32_t n_layers, uint32_t n_experts, uint32_t top_k);
std::string model_fingerprint(const model::ModelConfig& config);

// DeepSeek-V4-Flash: 43 MoE layers of 256 routed experts, 6 per token (config.json).
inline constexpr uint32_t kV4FlashLayers = 43;
inline constexpr uint32_t kV4FlashExperts = 256;
inline constexpr uint32_t kV4FlashTopK = 6;

}  // namespace frank::experts
