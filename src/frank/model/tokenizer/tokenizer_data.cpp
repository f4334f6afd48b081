#include "frank/model/tokenizer/tokenizer_data.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "frank/core/error.h"
#include "frank/model/tokenizer/byte_level.h"

namespace frank::model::tok {
namespace {

using nlohmann::json;

// DeepSeek's names, for a tokenizer.json that comes without tokenizer_config.json.
constexpr std::string_view kDefaultBos = "<｜begin▁of▁sentence｜>";
constexpr std::string_view kDefaultEos = "<｜end▁of▁sentence｜>";

json read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot open '{}'", path.string()));
  std::stringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::parse_error& e) {
    throw Error(fmt::format("{}: not valid JSON ({})", path.string(), e.what()));
  }
}

void check_normalizer(const json& spec) {
  const bool no_op = spec.is_null() || (spec.value("type", "") == "Sequence" && spec.value("normalizers", json::array()).empty());
  if (!no_op) throw Error(fmt::format("normalizer {} is not supported (only none)", spec.dump()));
}

void check_decoder(const json& spec) {
  if (!spec.is_object() || spec.value("type", "") != "ByteLevel")
    throw Error(fmt::format("decoder {} is not supported (only ByteLevel)", spec.dump()));
}

// Options of HF's BPE model that would change the result and that this encoder does not do.
void check_bpe_options(const json& model) {
  const std::string type = model.value("type", "");
  if (type != "BPE") throw Error(fmt::format("model type '{}' is not supported (only BPE)", type));
  auto set = [&](const char* key) { return model.contains(key) && !model[key].is_null() && model[key] != false && model[key] != ""; };
  for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix", "byte_fallback", "ignore_merges"})
    if (set(key)) throw Error(fmt::format("BPE option '{}' = {} is not supported", key, model[key].dump()));
}

std::pair<std::string, std::string> merge_parts(const json& merge, std::size_t rank) {
  if (merge.is_array() && merge.size() == 2) return {merge[0].get<std::string>(), merge[1].get<std::string>()};
  if (merge.is_string()) {
    const auto text = merge.get<std::string>();
    const auto space = text.find(' ');
    if (space != std::string::npos && text.find(' ', space + 1) == std::string::npos)
      return {text.substr(0, space), text.substr(space + 1)};
  }
  throw Error(fmt::format("merge {} is not a pair of tokens: {}", rank, merge.dump()));
}

int32_t vocab_id(const std::unordered_map<std::string, int32_t>& vocab, const std::string& token, std::size_t rank) {
  const auto it = vocab.find(token);
  if (it == vocab.end()) throw Error(fmt::format("merge {}: token '{}' is not in the vocab", rank, token));
  return it->second;
}

MergeTable read_merges(const json& merges, const std::unordered_map<std::string, int32_t>& vocab) {
  MergeTable table(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto [left, right] = merge_parts(merges[rank], rank);
    const int32_t left_id = vocab_id(vocab, left, rank);
    const int32_t right_id = vocab_id(vocab, right, rank);
    table.insert(left_id, right_id, {static_cast<int32_t>(rank), vocab_id(vocab, left + right, rank)});
  }
  return table;
}

std::array<int32_t, 256> byte_token_ids(const std::unordered_map<std::string, int32_t>& vocab) {
  std::array<int32_t, 256> ids{};
  for (int b = 0; b < 256; ++b) {
    const std::string spelling = byte_level_spelling(static_cast<uint8_t>(b));
    const auto it = vocab.find(spelling);
    if (it == vocab.end()) throw Error(fmt::format("the vocab has no token for byte 0x{:02X} ('{}')", b, spelling));
    ids[b] = it->second;
  }
  return ids;
}

// Ids index tables, so a corrupt file must not ask for billions of entries.
int32_t read_id(const json& value, std::string_view what) {
  constexpr int64_t kMaxId = (1 << 24) - 1;
  if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > kMaxId)
    throw Error(fmt::format("{} has id {}, expected an integer in 0..{}", what, value.dump(), kMaxId));
  return static_cast<int32_t>(value.get<int64_t>());
}

// The BPE vocab: token (byte-level spelling) -> id.
std::unordered_map<std::string, int32_t> read_vocab(const json& model) {
  if (!model.contains("vocab") || !model["vocab"].is_object()) throw Error("model.vocab must be an object");
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<uint8_t> id_used;
  for (const auto& [token, id_json] : model["vocab"].items()) {
    const int32_t id = read_id(id_json, fmt::format("vocab token '{}'", token));
    // BPE compares merged tokens by id, which only means "the same string" if ids are unique.
    if (static_cast<std::size_t>(id) >= id_used.size()) id_used.resize(static_cast<std::size_t>(id) + 1);
    if (id_used[id]) throw Error(fmt::format("vocab id {} is given to more than one token", id));
    id_used[id] = 1;
    vocab.emplace(token, id);
  }
  return vocab;
}

AddedToken read_added_token(const json& spec) {
  AddedToken token;
  token.content = spec.at("content").get<std::string>();
  token.id = read_id(spec.at("id"), fmt::format("added token '{}'", token.content));
  token.special = spec.value("special", false);
  token.normalized = spec.value("normalized", !token.special);  // HF's default
  token.single_word = spec.value("single_word", false);
  token.lstrip = spec.value("lstrip", false);
  token.rstrip = spec.value("rstrip", false);
  return token;
}

// The content of tokenizer_config.json's bos_token / eos_token: a string or {"content": ...}.
std::optional<std::string> configured_token(const json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content")) return it->at("content").get<std::string>();
  throw Error(fmt::format("tokenizer_config.json: '{}' is neither a string nor an added token", key));
}

// The BOS/EOS ids: named by tokenizer_config.json beside the file, else DeepSeek's names if present.
std::pair<std::optional<int32_t>, std::optional<int32_t>> boundary_tokens(
    const std::filesystem::path& tokenizer_json, const std::unordered_map<std::string, int32_t>& ids_by_token) {
  std::optional<std::string> bos, eos;
  const auto config_path = tokenizer_json.parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    const json config = read_json(config_path);
    bos = configured_token(config, "bos_token");
    eos = configured_token(config, "eos_token");
  }
  auto resolve = [&](const std::optional<std::string>& name, std::string_view fallback) -> std::optional<int32_t> {
    const auto it = ids_by_token.find(name ? *name : std::string(fallback));
    if (it != ids_by_token.end()) return it->second;
    if (name) throw Error(fmt::format("tokenizer_config.json names '{}', which is not a token", *name));
    return std::nullopt;
  };
  return {resolve(bos, kDefaultBos), resolve(eos, kDefaultEos)};
}

TokenizerData parse(const std::filesystem::path& path, const json& file) {
  if (!file.is_object() || !file.contains("model")) throw Error("no 'model' section");
  const json& model = file.at("model");
  check_bpe_options(model);
  check_normalizer(file.value("normalizer", json()));
  check_decoder(file.value("decoder", json()));

  if (!model.contains("merges") || !model["merges"].is_array()) throw Error("model.merges must be an array");
  std::unordered_map<std::string, int32_t> vocab = read_vocab(model);
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab) max_id = std::max(max_id, id);
  std::vector<AddedToken> added;
  for (const json& spec : file.value("added_tokens", json::array())) {
    added.push_back(read_added_token(spec));
    max_id = std::max(max_id, added.back().id);
  }

  const std::size_t size = static_cast<std::size_t>(max_id) + 1;
  std::vector<std::string> bytes_by_id(size);
  std::vector<uint8_t> id_exists(size), id_is_special(size);
  for (const auto& [token, id] : vocab) {
    bytes_by_id[id] = byte_level_decode(token);
    id_exists[id] = 1;
  }
  // HF decodes an added token's content (through the same ByteLevel decoder), not the vocab entry.
  for (const AddedToken& token : added) {
    bytes_by_id[token.id] = byte_level_decode(token.content);
    id_exists[token.id] = 1;
    id_is_special[token.id] = token.special;
  }

  MergeTable merges = read_merges(model.at("merges"), vocab);
  const auto byte_ids = byte_token_ids(vocab);
  // HF's token_to_id looks at the added tokens first.
  auto ids_by_token = std::move(vocab);
  for (const AddedToken& token : added) ids_by_token[token.content] = token.id;
  auto [bos, eos] = boundary_tokens(path, ids_by_token);
  return TokenizerData{AddedTokenMatcher(added),
                       PreTokenizer::from_json(file.value("pre_tokenizer", json())),
                       BytePairEncoder(byte_ids, std::move(merges)),
                       std::move(ids_by_token),
                       std::move(bytes_by_id),
                       std::move(id_exists),
                       std::move(id_is_special),
                       bos,
                       eos};
}

}  // namespace

TokenizerData read_tokenizer_file(const std::filesystem::path& tokenizer_json) {
  const json file = read_json(tokenizer_json);
  try {
    return parse(tokenizer_json, file);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", tokenizer_json.string(), e.what()));
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: unexpected structure ({})", tokenizer_json.string(), e.what()));
  }
}

}  // namespace frank::model::tok
