// `frank kv-capacity`: how many tokens of one sequence's K=V state fit in a given memory, for a
// model and each K=V row format (engine/kv_capacity.h).
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <iostream>

#include "commands.h"
#include "frank/core/error.h"
#include "frank/engine/kv_capacity.h"
#include "frank/model/config.h"
#include "frank/model/synthetic.h"

namespace frank::cli {
namespace {

struct CapacityOptions {
  std::string checkpoint;
  std::string synthetic;
  std::string memory;
  std::string kv_dtype;  // empty: every format
};

}  // namespace

int64_t parse_byte_size(const std::string& text) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  const std::string unit(ptr, end);
  static const std::pair<const char*, double> units[] = {
      {"", 1},        {"B", 1},       {"KB", 1e3},  {"MB", 1e6},         {"GB", 1e9},         {"TB", 1e12},
      {"KiB", 1024.}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1099511627776.}};
  for (const auto& [name, factor] : units)
    if (ec == std::errc() && unit == name && value >= 0 && value * factor < 9e18)
      return static_cast<int64_t>(std::llround(value * factor));
  throw Error(fmt::format("'{}' is not a memory size (e.g. 40GiB, 80GB, 512MiB, or bytes)", text));
}

std::string format_kv_capacity_line(const model::ModelConfig& c, engine::KvFormat format, int64_t context) {
  const int64_t row = engine::kv_row_layout(format, c.head_dim, c.rope_dim).row_bytes;
  const engine::KvCapacity k = engine::kv_capacity(c, row, int64_t{1} << 30);
  return fmt::format("K=V state ({} rows, {} B each): {:.1f} B per token + {:.2f} MB fixed per sequence; a sequence "
                     "of {} tokens holds {:.2f} MB",
                     engine::kv_format_name(format), row, k.bytes_per_token, k.fixed_bytes / 1e6, context,
                     (static_cast<double>(k.fixed_bytes) + k.bytes_per_token * static_cast<double>(context)) / 1e6);
}

namespace {

void run(const CapacityOptions& o) {
  if (o.checkpoint.empty() == o.synthetic.empty()) throw Error("give one of --checkpoint DIR or --synthetic v4-flash");
  if (!o.synthetic.empty() && o.synthetic != "v4-flash") throw Error("--synthetic: only v4-flash is available");
  const model::ModelConfig c = o.checkpoint.empty() ? model::v4_flash_config(43) : model::load_config(o.checkpoint);
  const int64_t memory = parse_byte_size(o.memory);
  const auto sizes = engine::kv_row_sizes(c);
  bool listed = false;
  std::cout << fmt::format("# K=V capacity of {} ({} layers) in {} ({} bytes), one sequence\n\n",
                           o.checkpoint.empty() ? "DeepSeek-V4-Flash" : o.checkpoint, c.num_layers, o.memory, memory);
  std::cout << "| K=V rows | bytes per row | bytes per token | fixed MB per sequence | tokens that fit |\n"
               "|---|---|---|---|---|\n";
  for (const auto& s : sizes) {
    if (!o.kv_dtype.empty() && o.kv_dtype != s.name) continue;
    listed = true;
    const engine::KvCapacity k = engine::kv_capacity(c, s.row_bytes, memory);
    std::cout << fmt::format("| {}{} | {} | {:.2f} | {:.2f} | {} |\n", s.name,
                             s.stored_by_frank ? "" : " (V4.1 record, capacity only)", s.row_bytes, k.bytes_per_token,
                             k.fixed_bytes / 1e6, k.tokens ? fmt::format("{}", *k.tokens) : "any (nothing grows)");
  }
  if (!listed) throw Error(fmt::format("--kv-dtype '{}': expected fp32, bf16, fp8 or v4.1-fp8", o.kv_dtype));
  std::cout << "\nPer token: every compressed layer's entry row / ratio, plus fp32 indexer keys (CSA) / ratio. Fixed: "
               "every layer's window ring (sliding_window rows) and the compressors' fp32 pending and overlap "
               "buffers. Not counted: weights, activations, the prefix cache, entry-array growth slack.\n";
}

}  // namespace

void register_kv_capacity(CLI::App& app) {
  auto o = std::make_shared<CapacityOptions>();
  auto* cmd = app.add_subcommand("kv-capacity", "tokens of K=V state that fit in a memory, per K=V row format");
  auto* checkpoint = cmd->add_option("--checkpoint", o->checkpoint, "checkpoint directory (only config.json is read)");
  cmd->add_option("--synthetic", o->synthetic, "a model shape: v4-flash (all 43 layers)")->excludes(checkpoint);
  cmd->add_option("--memory", o->memory, "memory for K=V state, e.g. 40GiB, 80GB")->required();
  cmd->add_option("--kv-dtype", o->kv_dtype, "one row format only: fp32, bf16, fp8 or v4.1-fp8 (default: all)");
  cmd->callback([o] { run(*o); });
}

}  // namespace frank::cli
