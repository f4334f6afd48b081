#include "frank/engine/prefix_store.h"

#include <algorithm>

#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <sstream>

#include "frank/core/error.h"
#include "frank/core/sha256.h"
#include "frank/engine/state_codec.h"

namespace frank::engine {
namespace {

constexpr std::string_view kMagic = "FRANKPC1";
constexpr std::string_view kSuffix = ".fpc";

std::string tokens_hash(std::span<const int32_t> tokens) {
  return sha256_hex(std::string_view(reinterpret_cast<const char*>(tokens.data()), tokens.size_bytes()));
}

std::string file_name(std::span<const int32_t> tokens) {
  return fmt::format("{}-{}{}", tokens.size(), tokens_hash(tokens), kSuffix);
}

void check_compressor(const CompressorState& c, int64_t position, int ratio, int width, int dim, bool overlapping,
                      const char* what, int layer) {
  auto require = [&](bool ok) {
    if (!ok) throw Error(fmt::format("layer {} {} state does not fit the model", layer, what));
  };
  if (ratio == 0) {
    require(c.pending == 0 && c.n_entries == 0 && c.entries.empty() && c.pending_kv.empty() && c.overlap_kv.empty());
    return;
  }
  require(c.pending >= 0 && c.pending < ratio && c.pending == position % ratio && c.n_entries == position / ratio);
  require(c.pending_kv.size() == static_cast<size_t>(c.pending) * width && c.pending_gate.size() == c.pending_kv.size());
  require(c.entries.size() == static_cast<size_t>(c.n_entries) * dim);
  const size_t overlap = overlapping && c.has_overlap ? static_cast<size_t>(ratio) * dim : 0;
  require(c.overlap_kv.size() == overlap && c.overlap_gate.size() == overlap && (!c.has_overlap || overlapping));
}

}  // namespace

void check_session_shape(const model::ModelConfig& c, const Session& s) {
  if (s.layers.size() != static_cast<size_t>(c.num_layers) || s.position < 0 ||
      s.position > c.max_position_embeddings)
    throw Error("session does not fit the model");
  for (int l = 0; l < c.num_layers; ++l) {
    const auto& L = s.layers[l];
    if (L.window.size() != static_cast<size_t>(c.sliding_window) * c.head_dim)
      throw Error(fmt::format("layer {} window does not fit the model", l));
    const auto kind = c.attention[l];
    const bool csa = kind == model::AttentionKind::CompressedSparse;
    const int ratio = c.compress_ratio[l];
    check_compressor(L.compressor, s.position, ratio, (csa ? 2 : 1) * c.head_dim, c.head_dim, csa, "compressor", l);
    check_compressor(L.indexer, s.position, csa ? ratio : 0, 2 * c.index_head_dim, c.index_head_dim, true, "indexer",
                     l);
  }
}

PrefixStore::PrefixStore(std::filesystem::path dir, const Model& model, Warn warn, uint64_t budget_bytes)
    : dir_(std::move(dir)), model_(model), warn_(std::move(warn)), budget_bytes_(budget_bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw Error(fmt::format("cannot create prefix cache directory {}: {}", dir_.string(), ec.message()));
}

void PrefixStore::save(const std::vector<int32_t>& tokens, const Session& session,
                       const std::vector<SessionCheckpoint>& checkpoints) const {
  Encoder payload;
  payload.ints(tokens);
  payload.session(session);
  payload.u64(checkpoints.size());
  for (const auto& c : checkpoints) payload.checkpoint(c);

  Encoder header;
  const std::string& fingerprint = model_.fingerprint();
  header.u64(fingerprint.size());
  const std::string digest = sha256_hex(payload.bytes());
  std::string file = std::string(kMagic) + header.bytes() + fingerprint + digest + payload.bytes();

  const auto path = dir_ / file_name(tokens);
  const auto tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(file.data(), static_cast<std::streamsize>(file.size()));
    if (!out) {
      warn_(fmt::format("prefix cache: cannot write {}", tmp));
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) warn_(fmt::format("prefix cache: cannot rename {}: {}", tmp, ec.message()));
  else enforce_budget(path);
}

void PrefixStore::enforce_budget(const std::filesystem::path& keep) const {
  if (budget_bytes_ == 0) return;
  struct Stored {
    std::filesystem::file_time_type used;
    uint64_t bytes;
    std::filesystem::path path;
  };
  std::vector<Stored> files;
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    if (entry.path().extension() != ".fpc") continue;
    std::error_code e1, e2;
    const auto bytes = entry.file_size(e1);
    const auto used = entry.last_write_time(e2);
    if (e1 || e2) continue;
    files.push_back({used, bytes, entry.path()});
    total += bytes;
  }
  std::sort(files.begin(), files.end(), [](const Stored& a, const Stored& b) { return a.used < b.used; });
  for (const auto& f : files) {
    if (total <= budget_bytes_) break;
    if (f.path == keep) continue;
    std::error_code removed;
    if (std::filesystem::remove(f.path, removed)) total -= f.bytes;
    else warn_(fmt::format("prefix cache: cannot delete {} to stay within its budget", f.path.string()));
  }
}

std::optional<StoredConversation> PrefixStore::load_longest_prefix(std::span<const int32_t> prompt) const {
  // Candidates by name: <count>-<sha256 of the first count tokens>.fpc with count < prompt length.
  std::vector<std::pair<size_t, std::filesystem::path>> candidates;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(kSuffix)) continue;
    size_t count = 0;
    const auto [ptr, err] = std::from_chars(name.data(), name.data() + name.size(), count);
    if (err != std::errc() || *ptr != '-' || count == 0 || count >= prompt.size()) continue;
    if (name == file_name(prompt.first(count))) candidates.emplace_back(count, entry.path());
  }
  std::sort(candidates.rbegin(), candidates.rend());
  for (const auto& [count, path] : candidates)
    if (auto c = load(path, prompt)) {
      // A conversation resumed from is recently used: the budget deletes others first.
      std::error_code ec;
      std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now(), ec);
      return c;
    }
  return std::nullopt;
}

std::optional<StoredConversation> PrefixStore::load(const std::filesystem::path& path,
                                                    std::span<const int32_t> prompt) const {
  try {
    std::ifstream in(path, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string file = buffer.str();
    const std::string& fingerprint = model_.fingerprint();
    const size_t header = kMagic.size() + 8 + fingerprint.size() + 64;
    if (file.size() < header || std::string_view(file).substr(0, kMagic.size()) != kMagic)
      throw Error("not a frank prefix cache file");
    Decoder lengths(std::string_view(file).substr(kMagic.size(), 8));
    if (lengths.u64() != fingerprint.size() || file.compare(kMagic.size() + 8, fingerprint.size(), fingerprint) != 0)
      throw Error("it was written for another model");
    const std::string_view digest = std::string_view(file).substr(kMagic.size() + 8 + fingerprint.size(), 64);
    const std::string_view payload = std::string_view(file).substr(header);
    if (sha256_hex(payload) != digest) throw Error("its checksum does not match (damaged)");

    Decoder d(payload);
    StoredConversation c;
    c.tokens = d.ints();
    c.session = d.session();
    const uint64_t n = d.u64();
    for (uint64_t i = 0; i < n; ++i) c.checkpoints.push_back(d.checkpoint());
    if (!d.done()) throw Error("it has trailing bytes");
    if (c.tokens.size() >= prompt.size() || !std::equal(c.tokens.begin(), c.tokens.end(), prompt.begin()))
      throw Error("its tokens do not match its name");
    if (c.session.position != static_cast<int64_t>(c.tokens.size())) throw Error("its session does not match its tokens");
    check_session_shape(model_.config(), c.session);
    for (const auto& k : c.checkpoints) check_session_shape(model_.config(), restore_checkpoint(k, c.session));
    return c;
  } catch (const Error& e) {
    warn_(fmt::format("prefix cache: ignoring {}: {}", path.string(), e.what()));
    return std::nullopt;
  }
}

}  // namespace frank::engine
