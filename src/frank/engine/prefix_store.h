#pragma once
// The prefix cache on disk: one file per kept conversation, so a restarted server resumes long
// agent contexts. A file is named by its token count and the SHA-256 of its tokens, and carries
// the model fingerprint and a SHA-256 of its contents; any file that fails a check (damaged,
// another model, tokens that do not match its name, state that does not fit the model) is
// ignored with a warning, so nothing wrong is ever served from it.
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "frank/engine/model.h"
#include "frank/engine/session_checkpoint.h"

namespace frank::engine {

struct StoredConversation {
  std::vector<int32_t> tokens;
  Session session;
  std::vector<SessionCheckpoint> checkpoints;
};

class PrefixStore {
 public:
  using Warn = std::function<void(const std::string&)>;

  // budget_bytes: the most the directory's conversations may take (0: no limit); above it the least
  // recently saved or loaded conversations are deleted after each save.
  PrefixStore(std::filesystem::path dir, const Model& model, Warn warn, uint64_t budget_bytes = 0);

  // Writes atomically (temporary file, then rename); an existing file for the same tokens is replaced.
  void save(const std::vector<int32_t>& tokens, const Session& session,
            const std::vector<SessionCheckpoint>& checkpoints) const;

  // The longest stored conversation whose tokens are a prefix of `prompt` and shorter than it.
  std::optional<StoredConversation> load_longest_prefix(std::span<const int32_t> prompt) const;

 private:
  std::optional<StoredConversation> load(const std::filesystem::path& file, std::span<const int32_t> prompt) const;
  // Deletes the least recently used conversations until the directory fits the budget; `keep` is
  // never deleted.
  void enforce_budget(const std::filesystem::path& keep) const;

  std::filesystem::path dir_;
  const Model& model_;
  Warn warn_;
  uint64_t budget_bytes_;
};

// Throws frank::Error when the session's state cannot belong to `config` at its position.
void check_session_shape(const model::ModelConfig& config, const Session& session);

}  // namespace frank::engine
