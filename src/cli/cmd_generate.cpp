// `frank generate`: continue a token sequence, greedy by default; with --draft-tokens K the model's
// MTP block drafts K tokens per verify step (the same tokens for greedy, the same distribution
// when sampling).
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <optional>

#include "commands.h"
#include "frank/core/error.h"
#include "frank/engine/draft_length.h"
#include "frank/engine/sampling.h"
#include "frank/engine/speculative.h"
#include "frank/server/engine_worker.h"
#include "model_source.h"
#include "v41_backend.h"

namespace frank::cli {
namespace {

struct GenerateOptions {
  ModelSource source;
  std::string ids;
  int max_tokens = 16;
  engine::SamplingParams sampling;
  bool ignore_eos = false;
  std::string draft_tokens = "0";
  std::string routing_from;  // a routing trace whose experts the calls route to (routing_replay.h)
};

// Ends the generated ids at the end-of-sequence token (kept) unless it is ignored, and at the limit.
void finish(std::vector<int32_t>& generated, const GenerateOptions& o, int32_t eos) {
  if (!o.ignore_eos)
    if (auto it = std::find(generated.begin(), generated.end(), eos); it != generated.end())
      generated.erase(it + 1, generated.end());
  if (static_cast<int>(generated.size()) > o.max_tokens) generated.resize(static_cast<size_t>(o.max_tokens));
}

// Verify steps with the model's drafter (V4: the MTP block, V4.1: DSpark; on the backend's device:
// the GPU's drafts from what the target leaves in device memory) until the limit or the
// end-of-sequence token; `draft_tokens` is a count or auto (chosen per step from measured costs).
std::vector<int32_t> speculative(const engine::Speculation& speculation, const GenerateOptions& o,
                                 const std::vector<int32_t>& prompt, int draft_tokens, int32_t eos) {
  engine::VerifyTarget& target = *speculation.target;
  engine::Drafter& drafter = *speculation.drafter;
  std::optional<engine::DraftLengthChooser> chooser;
  if (draft_tokens == server::kAutoDraftTokens)
    chooser.emplace(engine::DraftLengthChooser::auto_limit(target.max_verify_tokens()));
  engine::SpeculativeDecoder decoder(target, drafter, draft_tokens, o.sampling, chooser ? &*chooser : nullptr);
  Tensor streams;
  const Tensor logits =
      target.forward(prompt, engine::Model::Logits::Last, drafter.reads_host_streams() ? &streams : nullptr);
  decoder.start(std::span<const float>(logits.row(0), static_cast<size_t>(logits.cols())), streams, 0);
  std::vector<int32_t> tokens = prompt;
  while (static_cast<int>(tokens.size() - prompt.size()) < o.max_tokens &&
         (o.ignore_eos || std::find(tokens.begin() + static_cast<int64_t>(prompt.size()), tokens.end(), eos) ==
                              tokens.end()))
    decoder.step(tokens, decoder.draft_tokens());
  const auto& st = decoder.stats();
  std::cerr << fmt::format(
      "{} verify steps, {} drafted, {} accepted ({:.2f} tokens per verify step)\n", st.verify_steps, st.drafted,
      st.accepted, static_cast<double>(st.emitted) / static_cast<double>(std::max<int64_t>(1, st.verify_steps)));
  return {tokens.begin() + static_cast<int64_t>(prompt.size()), tokens.end()};
}

// Plain decoding on one session: the token after the prompt, then one token per call until the limit
// or the end-of-sequence token. Greedy is chosen where the logits are (on the GPU for --backend cuda).
std::vector<int32_t> decode(engine::SessionRunner& runner, const GenerateOptions& o, const std::vector<int32_t>& prompt,
                            int32_t eos) {
  engine::Sampler sampler(o.sampling);
  auto next_after = [&](std::span<const int32_t> ids) {
    if (o.sampling.temperature == 0.0f) return runner.forward_greedy(ids);
    const Tensor logits = runner.forward(ids, engine::Model::Logits::Last);
    return sampler.next(std::span<const float>(logits.row(0), static_cast<size_t>(logits.cols())));
  };
  std::vector<int32_t> generated;
  int32_t next = next_after(prompt);
  while (true) {
    generated.push_back(next);
    if (next == eos && !o.ignore_eos) break;
    if (static_cast<int>(generated.size()) == o.max_tokens) break;
    next = next_after(std::span<const int32_t>(&next, 1));
  }
  return generated;
}

void report(const std::vector<int32_t>& prompt, const std::vector<int32_t>& generated,
            std::chrono::steady_clock::time_point start) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << fmt::format("{} prompt + {} generated tokens in {:.3f} s\n", prompt.size(), generated.size(), seconds);
}

// DeepSeek-V4.1 on either backend; --draft-tokens drafts with its DSpark drafter.
void run_v41(const GenerateOptions& o) {
  const int draft_tokens = parse_draft_tokens(o.draft_tokens);
  if (!o.routing_from.empty()) throw Error("--routing-from: routing replay is not supported for DeepSeek-V4.1 yet");
  const auto model = o.source.load_v41();
  const auto& config = model->config();
  const auto prompt = o.ids.empty() ? std::vector<int32_t>{config.bos_token_id} : parse_ids(o.ids);
  V41Backend backend(*model, o.source);
  const auto start = std::chrono::steady_clock::now();
  std::vector<int32_t> generated =
      draft_tokens != 0
          ? speculative(backend.new_speculation().on_session, o, prompt, draft_tokens, config.eos_token_id)
          : decode(*backend.new_runner(), o, prompt, config.eos_token_id);
  finish(generated, o, config.eos_token_id);
  report(prompt, generated, start);
  std::cout << format_ids(generated) << "\n";
}

void run(const GenerateOptions& o) {
  if (o.source.is_v41()) return run_v41(o);
  const auto model = o.source.load();
  const auto& config = model->config();
  const auto prompt = o.ids.empty() ? std::vector<int32_t>{config.bos_token_id} : parse_ids(o.ids);
  Backend backend(*model, o.source);
  std::optional<engine::RoutingReplay> replay;
  if (!o.routing_from.empty()) {
    replay.emplace(engine::RoutingReplay::from_file(o.routing_from, config));
    backend.replay_routing(&*replay);
  }
  const auto runner = backend.new_runner();

  const auto start = std::chrono::steady_clock::now();
  const int draft_tokens = parse_draft_tokens(o.draft_tokens);
  std::vector<int32_t> generated =
      draft_tokens != 0
          ? speculative(backend.new_speculation().on_session, o, prompt, draft_tokens, config.eos_token_id)
          : decode(*runner, o, prompt, config.eos_token_id);
  finish(generated, o, config.eos_token_id);
  report(prompt, generated, start);
  if (const std::string gpu = backend.step_summary(); !gpu.empty()) std::cerr << gpu << "\n";
  if (replay)
    std::cerr << fmt::format("routing replayed from '{}' ({} tokens, cycled)\n", replay->source(),
                             replay->trace_tokens());
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
  cmd->add_option("--draft-tokens", opts->draft_tokens,
                  "speculative decoding: tokens the model's drafter (V4: the MTP block, V4.1: DSpark) drafts per "
                  "verify step (0: off; auto: chosen from measured step costs; needs mtp.* tensors)")
      ->capture_default_str();
  cmd->add_option("--routing-from", opts->routing_from,
                  "route every token to the experts of a routing trace (frank plan generate-trace, "
                  "--record-routing), in order and cycled, instead of the router's choice; for benchmarks")
      ->check(CLI::ExistingFile);
  cmd->callback([opts] { run(*opts); });
}

}  // namespace frank::cli
