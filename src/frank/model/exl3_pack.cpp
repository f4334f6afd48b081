#include "frank/model/exl3_pack.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <fstream>

#include "frank/core/error.h"
#include "frank/cpu/quant/exl3_trellis.h"  // codebook constants and bit range
#include "frank/model/config_common.h"

namespace frank::model {
namespace {

constexpr const char* kQuantFile = "quantization_config.json";

// A multiplier field must hold the locked constant (as uint32 or as the int32 it is stored as).
void check_multiplier(const nlohmann::json& entry, const char* field, std::uint32_t locked, const std::string& where) {
  const auto it = entry.find(field);
  if (it == entry.end() || it->is_null()) return;
  if (!it->is_number_integer())
    throw Error(fmt::format("{}: '{}' is {}: expected an integer", where, field, it->dump()));
  const std::int64_t value = it->get<std::int64_t>();
  if (value != static_cast<std::int64_t>(locked) && value != static_cast<std::int32_t>(locked))
    throw Error(fmt::format("{}: custom {} {} (frank decodes only the locked 0x{:08X}; packs from before "
                            "2025-10-12 could carry other multipliers)",
                            where, field, value, locked));
}

Exl3TensorPlan tensor_plan(const nlohmann::json& entry, const std::string& where) {
  Exl3TensorPlan plan;
  const auto bits = entry.find("bits_per_weight");
  if (bits == entry.end() || !bits->is_number())
    throw Error(fmt::format("{}: 'bits_per_weight' is missing or not a number", where));
  const double value = bits->get<double>();
  if (value != std::floor(value))
    throw Error(fmt::format("{}: {} bits per weight is a half-integer bitrate, which frank does not read", where,
                            value));
  if (value < cpu::kExl3MinBits || value > cpu::kExl3MaxBits)
    throw Error(fmt::format("{}: {} bits per weight (EXL3 has {}..{})", where, value, cpu::kExl3MinBits,
                            cpu::kExl3MaxBits));
  plan.bits = static_cast<int>(value);
  check_multiplier(entry, "mul1_multiplier", cpu::kExl3Mul1Multiplier, where);
  check_multiplier(entry, "mcg_multiplier", cpu::kExl3McgMultiplier, where);
  if (entry.contains("mul1_multiplier") && entry.contains("mcg_multiplier"))
    throw Error(fmt::format("{}: both mul1 and mcg multipliers are given", where));
  if (entry.contains("mul1_multiplier")) plan.codebook = Exl3Codebook::Mul1;
  if (entry.contains("mcg_multiplier")) plan.codebook = Exl3Codebook::Mcg;
  return plan;
}

const nlohmann::json* quantization_config(const nlohmann::json& config) {
  for (const nlohmann::json* j : {&config, config.contains("text_config") ? &config["text_config"] : nullptr})
    if (j != nullptr && j->is_object() && j->contains("quantization_config")) return &(*j)["quantization_config"];
  return nullptr;
}

}  // namespace

Exl3Codebook exl3_codebook_named(const std::string& name, const std::string& where) {
  if (name == "mul1") return Exl3Codebook::Mul1;
  if (name == "mcg") return Exl3Codebook::Mcg;
  if (name == "3inst") return Exl3Codebook::ThreeInst;
  throw Error(fmt::format("{}: EXL3 codebook '{}' is unknown (frank reads mul1, mcg and 3inst)", where, name));
}

Exl3Pack parse_exl3_pack(const nlohmann::json& config, const nlohmann::json* quantization_config_json,
                         bool has_relayout_manifest) {
  Exl3Pack pack;
  const nlohmann::json* q = quantization_config(config);
  if (q == nullptr || !q->is_object() || q->value("quant_method", "") != "exl3") return pack;
  pack.declared = true;
  if (has_relayout_manifest)
    throw Error("permute_g8_manifest.json: this EXL3 pack re-lays its trellises group-major (PF-G8); frank reads "
                "only ExLlamaV3's own tile order");
  const auto codebook = q->find("codebook");
  if (codebook != q->end() && !codebook->is_null()) {
    if (!codebook->is_string()) throw Error("config.json: quantization_config.codebook is not a string");
    pack.codebook = exl3_codebook_named(codebook->get<std::string>(), "config.json quantization_config");
  }
  pack.mixed = q->contains("non_routed_quantization");
  if (quantization_config_json == nullptr) return pack;
  const auto storage = quantization_config_json->find("tensor_storage");
  if (storage == quantization_config_json->end()) return pack;
  if (!storage->is_object()) throw Error(fmt::format("{}: 'tensor_storage' is not an object", kQuantFile));
  for (const auto& [key, entry] : storage->items()) {
    if (!entry.is_object() || entry.value("quant_format", "") != "exl3") continue;  // unquantised modules
    pack.tensor_storage[key] = tensor_plan(entry, fmt::format("{} tensor_storage['{}']", kQuantFile, key));
  }
  return pack;
}

Exl3Pack read_exl3_pack(const std::filesystem::path& dir) {
  const nlohmann::json config = read_config_json(dir);
  std::optional<nlohmann::json> quant;
  if (std::ifstream in(dir / kQuantFile); in) {
    try {
      quant = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{}: not JSON ({})", (dir / kQuantFile).string(), e.what()));
    }
  }
  return parse_exl3_pack(config, quant ? &*quant : nullptr, std::filesystem::exists(dir / "permute_g8_manifest.json"));
}

}  // namespace frank::model
