#pragma once
// `frank lab fidelity`: the same reference prompts and forced-decode traces through engine A
// (started twice: the A/A run sets what "no difference" looks like, since some engines are not
// deterministic) and engine B, compared position by position (fidelity.h) and per item group.
//
// Items (JSONL, one per line): {"group": "code", "prompt": "text" | "prompt_ids": [ids],
// "completion_ids": [ids] | "generate": N}. Positions scored: each token of the completion (the
// distribution it was drawn from given everything before it). "generate": N takes A's first run's
// greedy continuation of N tokens as the completion for every run. Engines must accept frank's
// forced-decode extension (`forced_completion_ids`) and `return_tokens_as_token_ids`.
#include <chrono>
#include <functional>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frank/lab/fidelity.h"

namespace frank::lab {

struct FidelityItem {
  std::string group, origin;
  nlohmann::json prompt;  // a string or a list of token ids, as the completions API takes it
  std::vector<int32_t> completion;
  int generate = 0;
};

std::vector<FidelityItem> load_fidelity_items(const std::filesystem::path& path);

struct EngineCommand {
  std::string start;                             // shell command; `{port}` is replaced by a free port
  std::string url = "http://127.0.0.1:{port}";  // `{port}` likewise
  std::string health = "/health";
};

struct FidelityOptions {
  EngineCommand a, b;
  int top_k = 64;
  double kl_margin = 1e-3;     // B may exceed A/A's mean KL by this much (nats) and still pass
  double top1_margin = 0.01;   // ... and fall short of A/A's top-1 agreement by this much
  std::filesystem::path logs;  // engine logs
  std::chrono::seconds start_timeout{300};
  std::function<void(const std::string&)> progress = [](const std::string&) {};
};

struct GroupResult {
  std::string group;
  ComparisonSummary aa, ab;
  bool passed = false;
};

struct FidelityResult {
  std::vector<GroupResult> groups;
  bool passed = false;
  nlohmann::json to_json() const;
};

FidelityResult run_fidelity(std::vector<FidelityItem> items, const FidelityOptions& options);
std::string fidelity_report(const FidelityResult& result, const FidelityOptions& options);

}  // namespace frank::lab
