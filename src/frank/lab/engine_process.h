#pragma once
// An engine under test, started from its shell command in a process group of its own (so that
// stopping it stops everything the command started), with its output in a log file.
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>

namespace frank::lab {

class EngineProcess {
 public:
  // Runs `sh -c command`; stdout and stderr go to `log`.
  EngineProcess(const std::string& command, const std::filesystem::path& log);
  ~EngineProcess();  // stops the engine if it still runs
  EngineProcess(const EngineProcess&) = delete;
  EngineProcess& operator=(const EngineProcess&) = delete;

  // Polls GET url+health until it answers 2xx. Throws frank::Error when the process exits first
  // or `timeout` passes (the message has the end of the log).
  void wait_healthy(const std::string& url, const std::string& health, std::chrono::seconds timeout);
  bool running();
  // True when the engine has ended or ends within `grace` (a killed process takes a moment to be
  // reaped after its connections already broke).
  bool ended_within(std::chrono::milliseconds grace);
  // SIGTERM to the group, SIGKILL after `grace`. Returns how it ended ("exit 0", "signal 9", ...).
  std::string stop(std::chrono::seconds grace = std::chrono::seconds(10));
  pid_t pid() const { return pid_; }
  std::string exit_description() const { return ended_; }
  std::string log_tail(size_t bytes = 2000) const;

 private:
  pid_t pid_ = -1;
  std::filesystem::path log_;
  std::string ended_;  // empty while running
  void record_exit(int status);
};

// A TCP port that was free on 127.0.0.1 a moment ago, for `{port}` in arm commands and URLs.
int free_local_port();
// The command or URL with every `{port}` replaced.
std::string with_port(std::string text, int port);

}  // namespace frank::lab
