#pragma once
// What an EXL3 (ExLlamaV3) checkpoint declares about its quantised tensors, read from
// config.json's `quantization_config` and, when present, quantization_config.json's
// `tensor_storage` (docs/exl3-format.md §1.2, shared docs). Two kinds of pack:
//  - native ExLlamaV3 packs: every quantised Linear is EXL3;
//  - mixed packs (vLLM recipes): only routed experts are EXL3; the rest keep the official FP8 / FP4
//    / BF16 tensors (`non_routed_quantization`), which load as usual by dtype.
// The tensors themselves decide what is EXL3 (a `.trellis` next to the Linear's name); this only
// lets the loader check them against what the pack says, and rejects variants frank cannot read.
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "frank/core/linear_weight.h"

namespace frank::model {

struct Exl3TensorPlan {
  int bits = 0;                              // quantization_config.json's bits_per_weight
  std::optional<Exl3Codebook> codebook;      // from its mul1_multiplier / mcg_multiplier, if given
};

struct Exl3Pack {
  bool declared = false;                     // quantization_config.quant_method == "exl3"
  std::optional<Exl3Codebook> codebook;      // quantization_config.codebook
  bool mixed = false;                        // has non_routed_quantization: only routed experts are EXL3
  std::map<std::string, Exl3TensorPlan> tensor_storage;  // module key (no suffix) -> plan
};

// "mul1", "mcg" or "3inst"; otherwise frank::Error starting with `where`.
Exl3Codebook exl3_codebook_named(const std::string& name, const std::string& where);

// Reads <dir>/config.json (top level or `text_config`) and <dir>/quantization_config.json. A
// checkpoint without an EXL3 quantization_config gives an empty Exl3Pack (declared = false).
// Throws frank::Error naming the file and field for what frank cannot read: an unknown codebook,
// custom codebook multipliers (packs from before 2025-10-12), half-integer or out-of-range bit
// widths, or a re-laid trellis (permute_g8_manifest.json, the PF-G8 group-major layout).
Exl3Pack read_exl3_pack(const std::filesystem::path& dir);
Exl3Pack parse_exl3_pack(const nlohmann::json& config, const nlohmann::json* quantization_config_json,
                         bool has_relayout_manifest);

}  // namespace frank::model
