#pragma once
// Each subcommand of `frank` lives in its own cmd_*.cpp and registers itself here.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "frank/engine/kv_record.h"
#include "frank/model/config.h"

namespace frank::cli {

void register_logits(CLI::App& app);
void register_generate(CLI::App& app);
void register_serve(CLI::App& app);
void register_tokenize(CLI::App& app);  // tokenize and detokenize
void register_chat_encode(CLI::App& app);
void register_plan(CLI::App& app);
void register_lab(CLI::App& app);
void register_bench(CLI::App& app);  // bench decode (GPU)
void register_kv_capacity(CLI::App& app);
void register_make_pack(CLI::App& app);  // synthetic V4.1 EXL3 packs
// `lab draw`, `lab run` and `lab fidelity`: the parts of `frank lab` that drive engines.
void register_lab_engines(CLI::App& lab);

// "40GiB", "80GB", "512MiB", "1000" -> bytes; throws frank::Error otherwise.
int64_t parse_byte_size(const std::string& text);
// One line for a log: the K=V state a sequence of `context` tokens keeps with rows in `format`.
std::string format_kv_capacity_line(const model::ModelConfig& c, engine::KvFormat format, int64_t context);

// --draft-tokens: "auto" (-1) or a count 0..16; throws frank::Error otherwise.
int parse_draft_tokens(const std::string& text);

}  // namespace frank::cli
