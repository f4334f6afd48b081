// `frank logits`: the logits of a token sequence, written as little-endian float32 [n, vocab].
#include <fmt/format.h>

#include <bit>
#include <fstream>
#include <iostream>

#include "commands.h"
#include "frank/core/error.h"
#include "frank/engine/run_modes.h"
#include "model_source.h"
#include "v41_backend.h"

namespace frank::cli {
namespace {

static_assert(std::endian::native == std::endian::little, "logits files are written in native order");

struct LogitsOptions {
  ModelSource source;
  std::string ids;
  std::string mode = "full";
  int64_t prefill = -1;
  std::string out;
};

void run(const LogitsOptions& o) {
  const auto ids = parse_ids(o.ids);
  auto mode = engine::parse_feed_mode(o.mode);
  if (o.prefill >= 0) {
    if (mode.kind != engine::FeedMode::Kind::Incremental) throw Error("--prefill applies to --mode incremental only");
    mode.prefill = o.prefill;
  }
  Tensor logits;
  if (o.source.is_v41()) {
    const auto model = o.source.load_v41();
    V41Backend backend(*model, o.source);
    const auto runner = backend.new_runner();
    logits = engine::sequence_logits(*runner, model->config().vocab_size, ids, mode);
  } else {
    const auto model = o.source.load();
    Backend backend(*model, o.source);
    const auto runner = backend.new_runner();
    logits = engine::sequence_logits(*runner, model->config().vocab_size, ids, mode);
  }
  std::ofstream out(o.out, std::ios::binary);
  if (!out) throw Error(fmt::format("cannot open '{}' for writing", o.out));
  out.write(reinterpret_cast<const char*>(logits.data.data()), static_cast<std::streamsize>(logits.numel() * 4));
  if (!out) throw Error(fmt::format("writing '{}' failed", o.out));
  std::cout << fmt::format("shape {} {}\n", logits.rows(), logits.cols());
}

}  // namespace

void register_logits(CLI::App& app) {
  auto opts = std::make_shared<LogitsOptions>();
  auto* cmd = app.add_subcommand("logits", "write the logits of a token sequence as float32 [n, vocab]");
  opts->source.add_options(*cmd);
  cmd->add_option("--ids", opts->ids, "token ids, comma-separated")->required();
  cmd->add_option("--mode", opts->mode, "full | incremental | chunked:N")->capture_default_str();
  cmd->add_option("--prefill", opts->prefill, "incremental: ids in the first call (default: half)");
  cmd->add_option("--out", opts->out, "output file")->required();
  cmd->callback([opts] { run(*opts); });
}

}  // namespace frank::cli
