#pragma once
#include <CLI/CLI.hpp>

namespace frank::cli {

void register_logits(CLI::App& app);
void register_generate(CLI::App& app);

}  // namespace frank::cli
