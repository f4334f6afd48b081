#include "frank/experts/model_fingerprint.h"

#include <fmt/format.h>

namespace frank::experts {

std::string model_fingerprint(const std::string& model_type, uint32_t n_layers, uint32_t n_experts, uint32_t top_k) {
  return fmt::format("{}/{}x{}/top{}", model_type, n_layers, n_experts, top_k);
}

std::string model_fingerprint(const model::ModelConfig& config) {
  return model_fingerprint(config.model_type, static_cast<uint32_t>(config.num_layers),
                           static_cast<uint32_t>(config.n_routed_experts),
                           static_cast<uint32_t>(config.experts_per_token));
}

}  // namespace frank::experts
