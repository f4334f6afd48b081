#pragma once
// Runs the `frank` binary (FRANK_BINARY) as a script or a user would, for the CLI tests.
#include <sys/wait.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "../unit/safetensors_test_util.h"

namespace frank::test {

// The first n ids as `--ids` takes them: comma-separated.
inline std::string join_ids(const std::vector<int32_t>& ids, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

struct FrankRun {
  int exit_code = 0;
  std::string out;  // stdout
  std::string err;  // stderr
  std::string output() const { return out + err; }
  std::string last_line() const {  // of stdout
    const auto end = out.find_last_not_of('\n');
    if (end == std::string::npos) return {};
    const auto start = out.rfind('\n', end);
    return out.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
  }
};

// `frank ARGS`, with `input` on stdin when given.
inline FrankRun run_frank(const std::string& args, const std::optional<std::string>& input = std::nullopt) {
  TempDir tmp;
  std::string cmd = std::string(FRANK_BINARY) + " " + args + " 2> " + (tmp / "stderr").string();
  if (input) {
    write_file(tmp / "stdin", *input);
    cmd += " < " + (tmp / "stdin").string();
  }
  FILE* pipe = popen(cmd.c_str(), "r");
  FrankRun run;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) run.out.append(buf.data(), n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream err(tmp / "stderr");
  run.err.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
  return run;
}

}  // namespace frank::test
