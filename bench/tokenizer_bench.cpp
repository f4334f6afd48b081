// Encoding throughput of frank's tokenizer, single thread. Prints one JSON line;
// bench/run_tokenizer_bench.sh runs it beside bench/tokenizer_hf.py (HF tokenizers, same text).
//
//   tokenizer_bench --tokenizer FILE --docs FILE.jsonl [--runs N] [--ids-out FILE]
//
// --docs holds one {"text": ...} per line (bench/make_bench_text.py); each document is one
// encode call. The first pass runs with an empty BPE cache ("cold"); the N passes after it reuse
// the cache, as a long-running server would. --ids-out writes all ids as little-endian int32.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "frank/core/error.h"
#include "frank/model/tokenizer.h"

namespace {

struct Options {
  std::string tokenizer;
  std::string docs;
  int runs = 5;
  std::string ids_out;
};

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) throw frank::Error(fmt::format("{} needs a value", arg));
    const std::string value = argv[++i];
    if (arg == "--tokenizer") o.tokenizer = value;
    else if (arg == "--docs") o.docs = value;
    else if (arg == "--runs") o.runs = std::stoi(value);
    else if (arg == "--ids-out") o.ids_out = value;
    else throw frank::Error(fmt::format("unknown option {}", arg));
  }
  if (o.tokenizer.empty() || o.docs.empty() || o.runs < 1)
    throw frank::Error("usage: tokenizer_bench --tokenizer FILE --docs FILE.jsonl [--runs N] [--ids-out FILE]");
  return o;
}

std::vector<std::string> read_documents(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw frank::Error(fmt::format("cannot open '{}'", path));
  std::vector<std::string> texts;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) texts.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
  return texts;
}

template <typename F>
double seconds(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse_args(argc, argv);
  const std::vector<std::string> texts = read_documents(o.docs);
  std::size_t bytes = 0;
  for (const auto& text : texts) bytes += text.size();

  std::optional<frank::model::Tokenizer> tokenizer;
  const double load_s = seconds([&] { tokenizer.emplace(frank::model::Tokenizer::load(o.tokenizer)); });
  std::vector<int32_t> ids;
  auto encode_all = [&] {
    ids.clear();
    for (const auto& text : texts) {
      const auto doc_ids = tokenizer->encode(text);
      ids.insert(ids.end(), doc_ids.begin(), doc_ids.end());
    }
  };
  const double cold_s = seconds(encode_all);
  std::vector<double> runs;
  for (int r = 0; r < o.runs; ++r) runs.push_back(seconds(encode_all));

  if (!o.ids_out.empty()) {
    std::ofstream out(o.ids_out, std::ios::binary);
    out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * sizeof(int32_t)));
  }
  std::vector<double> sorted = runs;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t mid = sorted.size() / 2;
  const double median = sorted.size() % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  const double mb = static_cast<double>(bytes) / 1e6;
  std::cout << fmt::format(
      "{{\"impl\": \"frank\", \"documents\": {}, \"bytes\": {}, \"tokens\": {}, \"load_s\": {:.3f}, "
      "\"cold_mb_s\": {:.2f}, \"median_mb_s\": {:.2f}, \"min_mb_s\": {:.2f}, \"max_mb_s\": {:.2f}, "
      "\"runs_s\": [{:.4f}]}}\n",
      texts.size(), bytes, ids.size(), load_s, mb / cold_s, mb / median, mb / sorted.back(), mb / sorted.front(),
      fmt::join(runs, ", "));
  return 0;
} catch (const std::exception& e) {
  std::cerr << "error: " << e.what() << "\n";
  return 1;
}
