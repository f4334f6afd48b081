#pragma once
// The runner's side of the ledger: an append-only JSONL file whose every line carries
// "prev", the SHA-256 (hex) of the previous line's exact bytes (64 zeros on the first line), so an
// edited, dropped or reordered line breaks the chain at that point (verify_ledger_chain finds it).
// Each line is written with one write(2) on an O_APPEND descriptor and fsync'd before the runner
// goes on, so a killed runner leaves whole lines only.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace frank::lab {

inline constexpr const char* kChainStart = "0000000000000000000000000000000000000000000000000000000000000000";

// Reads every line of a ledger and checks the chain; throws frank::Error naming the first line
// that does not follow from the one before (or is not JSON). A missing file is an empty ledger.
std::vector<nlohmann::json> read_chained_ledger(const std::filesystem::path& path);

class LedgerWriter {
 public:
  // Opens (creating if needed) and verifies the existing chain; `existing` receives its lines.
  LedgerWriter(const std::filesystem::path& path, std::vector<nlohmann::json>& existing);
  ~LedgerWriter();
  LedgerWriter(const LedgerWriter&) = delete;
  LedgerWriter& operator=(const LedgerWriter&) = delete;
  // Adds "prev" and a UTC "time", writes the line and syncs it to disk.
  void append(nlohmann::json row);

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::string last_hash_ = kChainStart;
};

}  // namespace frank::lab
