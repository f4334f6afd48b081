// `frank generate`: continue a token sequence, greedy by default.
#include <fmt/format.h>

#include <chrono>
#include <iostream>

#include "commands.h"
#include "frank/engine/sampling.h"
#include "model_source.h"

namespace frank::cli {
namespace {

struct GenerateOptions {
  ModelSource source;
  std::string ids;
  int max_tokens = 16;
  engine::SamplingParams sampling;
  bool ignore_eos = false;
};

void run(const GenerateOptions& o) {
  const auto model = o.source.load();
  const auto& config = model->config();
  const auto prompt = o.ids.empty() ? std::vector<int32_t>{config.bos_token_id} : parse_ids(o.ids);
  engine::Sampler sampler(o.sampling);
  engine::Session session = model->new_session();

  const auto start = std::chrono::steady_clock::now();
  Tensor logits = model->forward(session, prompt);
  std::vector<int32_t> generated;
  while (static_cast<int>(generated.size()) < o.max_tokens) {
    const int32_t next = sampler.next(std::span<const float>(logits.row(logits.rows() - 1), logits.cols()));
    generated.push_back(next);
    if (next == config.eos_token_id && !o.ignore_eos) break;
    if (static_cast<int>(generated.size()) == o.max_tokens) break;
    logits = model->forward(session, std::span<const int32_t>(&next, 1));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << fmt::format("{} prompt + {} generated tokens in {:.3f} s\n", prompt.size(), generated.size(), seconds);
  std::cout << format_ids(generated) << "\n";
}

}  // namespace

void register_generate(CLI::App& app) {
  auto opts = std::make_shared<GenerateOptions>();
  auto* cmd = app.add_subcommand("generate", "continue a token sequence and print the new ids");
  opts->source.add_options(*cmd);
  cmd->add_option("--ids", opts->ids, "prompt token ids, comma-separated (default: the BOS token)");
  cmd->add_option("--max-tokens", opts->max_tokens, "tokens to generate")->capture_default_str()->check(
      CLI::PositiveNumber);
  cmd->add_option("--temperature", opts->sampling.temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--top-p", opts->sampling.top_p, "nucleus sampling mass")->capture_default_str();
  cmd->add_option("--seed", opts->sampling.seed, "seed of the sampler (with --temperature > 0)")->capture_default_str();
  cmd->add_flag("--ignore-eos", opts->ignore_eos, "keep generating after the end-of-sequence token");
  cmd->callback([opts] { run(*opts); });
}

}  // namespace frank::cli
