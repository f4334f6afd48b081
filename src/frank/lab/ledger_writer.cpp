#include "frank/lab/ledger_writer.h"

#include <fcntl.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "frank/core/error.h"
#include "frank/core/sha256.h"

namespace frank::lab {
namespace {

using nlohmann::json;

// Walks the file's lines, checking each one's "prev" against the hash of the line before.
// Returns the hash of the last line.
std::string walk_chain(const std::filesystem::path& path, std::vector<json>& lines) {
  std::string last = kChainStart;
  std::ifstream in(path, std::ios::binary);
  if (!in) return last;
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!all.empty() && all.back() != '\n')
    throw Error(fmt::format("{}: the last line is incomplete (no newline): the ledger was cut; it is not "
                            "extended or repaired automatically",
                            path.string()));
  size_t begin = 0;
  for (int64_t number = 1; begin < all.size(); ++number) {
    const size_t end = all.find('\n', begin);
    const std::string text = all.substr(begin, end - begin);
    begin = end + 1;
    const std::string origin = fmt::format("{}:{}", path.string(), number);
    json row = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (row.is_discarded() || !row.is_object()) throw Error(fmt::format("{}: not a JSON object", origin));
    if (!row.contains("prev") || row["prev"] != last)
      throw Error(fmt::format("{}: the hash chain is broken here (\"prev\" is not the SHA-256 of line {}): the "
                              "ledger was edited, reordered or truncated",
                              origin, number - 1));
    last = sha256_hex(text);
    lines.push_back(std::move(row));
  }
  return last;
}

std::string utc_now() {
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::chrono::system_clock::to_time_t(
                                                   std::chrono::system_clock::now())));
}

}  // namespace

std::vector<json> read_chained_ledger(const std::filesystem::path& path) {
  std::vector<json> lines;
  walk_chain(path, lines);
  return lines;
}

LedgerWriter::LedgerWriter(const std::filesystem::path& path, std::vector<json>& existing) : path_(path) {
  last_hash_ = walk_chain(path, existing);
  fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(fmt::format("cannot open ledger '{}' for appending", path.string()));
}

LedgerWriter::~LedgerWriter() {
  if (fd_ >= 0) close(fd_);
}

void LedgerWriter::append(json row) {
  row["prev"] = last_hash_;
  if (!row.contains("time")) row["time"] = utc_now();
  const std::string text = row.dump();
  const std::string line = text + "\n";
  if (write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size()) || fsync(fd_) != 0)
    throw Error(fmt::format("writing to ledger '{}' failed", path_.string()));
  last_hash_ = sha256_hex(text);
}

}  // namespace frank::lab
