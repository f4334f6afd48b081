#pragma once
// Each subcommand of `frank` lives in its own cmd_*.cpp and registers itself here.
#include <CLI/CLI.hpp>
#include <string>

namespace frank::cli {

void register_logits(CLI::App& app);
void register_generate(CLI::App& app);
void register_serve(CLI::App& app);
void register_tokenize(CLI::App& app);  // tokenize and detokenize
void register_chat_encode(CLI::App& app);
void register_plan(CLI::App& app);
void register_lab(CLI::App& app);
void register_bench(CLI::App& app);  // bench decode (GPU)
// `lab draw`, `lab run` and `lab fidelity`: the parts of `frank lab` that drive engines.
void register_lab_engines(CLI::App& lab);

// --draft-tokens: "auto" (-1) or a count 0..16; throws frank::Error otherwise.
int parse_draft_tokens(const std::string& text);

}  // namespace frank::cli
