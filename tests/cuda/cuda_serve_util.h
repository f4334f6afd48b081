#pragma once
// `frank serve` started as a user starts it, for the CUDA server tests: a byte-level tokenizer for
// the fixtures (vocabulary 256, prompts given as ids), a server on a free port, greedy completions
// with their top-2 log-probabilities, and /metrics values.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/frank_binary.h"
#include "frank/lab/engine_client.h"
#include "frank/lab/engine_process.h"
#include "frank/model/tokenizer/byte_level.h"

namespace frank::test::serve {

namespace fs = std::filesystem;
using nlohmann::json;

inline bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// A byte-level tokenizer with one token per byte (ids 0..255), no merges: the fixture's vocabulary
// is 256 and its prompts are token ids, so the tokenizer only names tokens.
inline fs::path write_byte_tokenizer(const fs::path& dir) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[model::tok::byte_level_spelling(static_cast<uint8_t>(b))] = b;
  const json file{{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
                  {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}},
                  {"decoder", {{"type", "ByteLevel"}}},
                  {"added_tokens", json::array()}};
  const fs::path path = dir / "tokenizer.json";
  std::ofstream(path) << file.dump();
  return path;
}

// One `frank serve` on a free port, stopped at the end of the test.
struct Server {
  Server(const std::string& args, const fs::path& log) : port(lab::free_local_port()) {
    const std::string command = fmt::format("exec {} serve --port {} {}", frank_binary().string(), port, args);
    process = std::make_unique<lab::EngineProcess>(command, log);
    process->wait_healthy(url(), "/health", std::chrono::seconds(180));
    client = std::make_unique<lab::EngineClient>(url(), std::chrono::seconds(120));
  }
  std::string url() const { return fmt::format("http://127.0.0.1:{}", port); }
  int port;
  std::unique_ptr<lab::EngineProcess> process;
  std::unique_ptr<lab::EngineClient> client;
};

struct Completion {
  std::vector<int32_t> ids;
  std::vector<double> logprobs;
  std::vector<double> top2_gap;  // CPU side: logprob of the best token minus the second's
  int cached_tokens = -1;
  std::string text;
};

inline int32_t token_id(const std::string& name) { return std::stoi(name.substr(name.find(':') + 1)); }

// A greedy completion of `prompt` (token ids), `max_tokens` long, with the top-2 log-probabilities.
inline Completion complete(Server& s, const std::vector<int32_t>& prompt, int max_tokens) {
  const json body{{"prompt", prompt},    {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true},
                  {"logprobs", 2},       {"return_tokens_as_token_ids", true}};
  const lab::HttpReply reply = s.client->post_json("/v1/completions", body);
  if (!reply.ok()) throw std::runtime_error(s.url() + ": " + reply.failure());
  const json doc = json::parse(reply.body);
  if (doc.contains("error")) throw std::runtime_error(s.url() + ": " + doc.dump());
  const json& lp = doc.at("choices").at(0).at("logprobs");
  Completion c;
  for (size_t i = 0; i < lp.at("tokens").size(); ++i) {
    c.ids.push_back(token_id(lp["tokens"][i].get<std::string>()));
    c.logprobs.push_back(lp["token_logprobs"][i].get<double>());
    std::vector<double> top;
    for (const auto& [name, value] : lp["top_logprobs"][i].items()) top.push_back(value.get<double>());
    std::sort(top.begin(), top.end(), std::greater<>());
    c.top2_gap.push_back(top.size() >= 2 ? top[0] - top[1] : INFINITY);
  }
  c.cached_tokens = doc.at("usage").at("prompt_tokens_details").at("cached_tokens").get<int>();
  c.text = doc.at("choices").at(0).at("text").get<std::string>();
  return c;
}

inline std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Value of an unlabelled counter in a /metrics text (-1 when absent).
inline double metric(Server& s, const std::string& name) {
  const std::string text = s.client->get("/metrics").body;
  const auto at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
}

// Value of a counter series with labels, e.g. frank_prefix_cache_hits_total{tier="gpu"} (0 when absent).
inline double labelled(Server& s, const std::string& name_and_labels) {
  const std::string text = s.client->get("/metrics").body, key = "\n" + name_and_labels + " ";
  const auto at = text.find(key);
  return at == std::string::npos ? 0 : std::stod(text.substr(at + key.size()));
}

}  // namespace frank::test::serve
