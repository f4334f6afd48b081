#pragma once
// Options shared by the subcommands that run a model: where it comes from (--model DIR or
// --synthetic NAME, the embedded default when neither is given) and the token ids to feed.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "frank/engine/model.h"

namespace frank::cli {

struct ModelSource {
  std::string model_dir;
  std::string synthetic;
  uint64_t seed = 0;
  std::string backend = "cpu";

  void add_options(CLI::App& app);
  // Loads the model; prints a warning for checkpoint tensors it did not use.
  std::unique_ptr<engine::Model> load() const;
};

// "5,17,3" -> {5, 17, 3}; throws frank::Error on anything that is not a comma-separated list of
// non-negative integers.
std::vector<int32_t> parse_ids(const std::string& text);
std::string format_ids(const std::vector<int32_t>& ids);

}  // namespace frank::cli
