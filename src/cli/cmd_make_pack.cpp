// `frank make-pack`: writes a synthetic DeepSeek-V4.1-shaped EXL3 pack (model/synthetic_v41_pack.h)
// for loader tests and for benchmarking EXL3 experts on a machine without the real weights.
#include <fmt/format.h>

#include <iostream>

#include "commands.h"
#include "frank/core/error.h"
#include "frank/model/exl3_pack.h"
#include "frank/model/synthetic_v41_pack.h"

namespace frank::cli {
namespace {

struct MakePackOptions {
  std::string out;
  int layers = 2;
  std::vector<int> bits = {2, 3, 4};
  std::string codebook = "mul1";
  std::vector<std::string> overrides;
  bool dense_experts = false;
  uint64_t seed = 1;
};

// "key=value" with a JSON value ("hidden_size=256", "rope_scaling={...}").
void apply_override(nlohmann::json& overrides, const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error(fmt::format("--set '{}': expected KEY=VALUE (a text_config field and a JSON value)", text));
  try {
    overrides[text.substr(0, eq)] = nlohmann::json::parse(text.substr(eq + 1));
  } catch (const nlohmann::json::exception&) {
    throw Error(fmt::format("--set '{}': the value is not JSON", text));
  }
}

void run(const MakePackOptions& o) {
  model::V41PackOptions p;
  p.layers = o.layers;
  p.expert_bits = o.bits;
  p.dense_experts = o.dense_experts;
  p.seed = o.seed;
  p.codebook = model::exl3_codebook_named(o.codebook, "--codebook");
  for (const auto& s : o.overrides) apply_override(p.overrides, s);
  model::write_v41_pack(o.out, p);
  std::cout << fmt::format("wrote a {}-layer DeepSeek-V4.1 {} pack to {}\n", o.layers,
                           o.dense_experts ? "dense-expert" : "EXL3", o.out);
}

}  // namespace

void register_make_pack(CLI::App& app) {
  auto opts = std::make_shared<MakePackOptions>();
  auto* cmd = app.add_subcommand(
      "make-pack",
      "write a synthetic DeepSeek-V4.1 checkpoint: released names and shapes, routed experts as EXL3 with random "
      "trellises, the rest FP8/BF16/F32 as released");
  cmd->add_option("--out", opts->out, "directory to write")->required();
  cmd->add_option("--layers", opts->layers, "the first N layers of the released stack")->capture_default_str();
  cmd->add_option("--bits", opts->bits, "EXL3 bit widths, cycled over the routed experts")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--codebook", opts->codebook, "mul1 | mcg | 3inst")->capture_default_str();
  cmd->add_option("--set", opts->overrides,
                  "KEY=JSON: replace a released text_config value (e.g. hidden_size=256 to shrink)");
  cmd->add_flag("--dense-experts", opts->dense_experts,
                "write the routed experts as their F32 dequantised weights instead (the dense twin, for tests)");
  cmd->add_option("--seed", opts->seed, "random seed")->capture_default_str();
  cmd->callback([opts] { run(*opts); });
}

}  // namespace frank::cli
