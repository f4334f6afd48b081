#pragma once
// A synthetic DeepSeek-V4.1-shaped EXL3 checkpoint written to disk: the released V4.1-Flash config
// cut to its first few layers, every tensor under its released name and shape, the routed experts
// as EXL3 (random trellises, which are always valid encodings: docs/exl3-format.md §2) at a mix of
// bit widths, and the rest in the release's own formats (dsv41-model.md §9): FP8 e4m3 with 32x32
// ue8m0 scales, BF16, F32. The layout is a mixed vLLM-style pack (`non_routed_quantization`) with a
// quantization_config.json `tensor_storage`, so frank's loader reads and checks it as a real pack.
//
// Differences from the release: no DSpark (mtp.*) layers; the Engram tables are BF16 (frank reads
// float tables only) with as many rows as `engram_vocab_size` gives (the release's 16e6 gives ~384M
// rows per layer), and the Engram hash data (token map, multipliers) is random in
// engram_hash.safetensors. Sizes may be shrunk through `overrides` for tests.
#include <cstdint>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "frank/core/linear_weight.h"

namespace frank::model {

struct V41PackOptions {
  int layers = 2;
  // text_config fields replacing the released values, e.g. {"hidden_size": 256} to shrink a test
  // pack. num_hidden_layers and the layer schedule come from `layers`.
  nlohmann::json overrides = nlohmann::json::object();
  std::vector<int> expert_bits = {2, 3, 4};  // cycled over the experts of all layers
  Exl3Codebook codebook = Exl3Codebook::Mul1;
  // Write each routed expert as the F32 dequantised weight of the EXL3 expert the same options
  // would write (everything else byte-identical): the dense twin for tests.
  bool dense_experts = false;
  uint64_t seed = 1;
};

// K of routed expert `expert` of `layer`.
int v41_pack_expert_bits(const V41PackOptions& options, int layer, int expert, int experts_per_layer);

// config.json of the pack (composite deepseek_v41 with text_config and quantization_config).
nlohmann::json v41_pack_config(const V41PackOptions& options);

// Writes config.json, quantization_config.json (EXL3 packs), model.safetensors and
// engram_hash.safetensors into `dir` (created). Throws frank::Error for options that give no valid
// V4.1 config (the config's own message) or bit widths outside 1..8.
void write_v41_pack(const std::filesystem::path& dir, const V41PackOptions& options);

}  // namespace frank::model
