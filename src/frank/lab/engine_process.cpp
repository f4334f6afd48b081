#include "frank/lab/engine_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "frank/core/error.h"
#include "frank/lab/engine_client.h"

namespace frank::lab {

EngineProcess::EngineProcess(const std::string& command, const std::filesystem::path& log) : log_(log) {
  if (!log.parent_path().empty()) std::filesystem::create_directories(log.parent_path());
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("cannot open engine log '{}'", log.string()));
  pid_ = fork();
  if (pid_ < 0) {
    close(fd);
    throw Error("fork failed while starting an engine");
  }
  if (pid_ == 0) {
    setpgid(0, 0);  // its own group: stop() signals the shell and everything it started
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // a killed runner leaves no engine behind holding its port
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid_, pid_);  // also from the parent, so that stop() cannot race the child's own call
  close(fd);
}

EngineProcess::~EngineProcess() {
  if (ended_.empty()) stop(std::chrono::seconds(5));
}

void EngineProcess::record_exit(int status) {
  ended_ = WIFEXITED(status) ? fmt::format("exit {}", WEXITSTATUS(status))
                             : fmt::format("signal {}", WIFSIGNALED(status) ? WTERMSIG(status) : -1);
}

bool EngineProcess::running() {
  if (!ended_.empty()) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    record_exit(status);
    // The shell is gone; make sure nothing it started lingers.
    kill(-pid_, SIGKILL);
    return false;
  }
  return true;
}

bool EngineProcess::ended_within(std::chrono::milliseconds grace) {
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (running()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void EngineProcess::wait_healthy(const std::string& url, const std::string& health, std::chrono::seconds timeout) {
  EngineClient client(url, std::chrono::seconds(5));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (!running())
      throw Error(fmt::format("the engine exited ({}) before it was healthy; log {}:\n{}", ended_, log_.string(),
                              log_tail()));
    if (client.get(health).ok()) return;
    if (std::chrono::steady_clock::now() > deadline)
      throw Error(fmt::format("the engine was not healthy at {}{} within {} s; log {}:\n{}", url, health,
                              timeout.count(), log_.string(), log_tail()));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::string EngineProcess::stop(std::chrono::seconds grace) {
  if (!running()) return ended_;
  kill(-pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (running() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (running()) {
    kill(-pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    record_exit(status);
  }
  return ended_;
}

std::string EngineProcess::log_tail(size_t bytes) const {
  std::ifstream in(log_, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  return all.size() > bytes ? all.substr(all.size() - bytes) : all;
}

int free_local_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error("cannot open a socket to find a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t length = sizeof addr;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0;
  close(fd);
  if (!ok) throw Error("cannot find a free local port");
  return ntohs(addr.sin_port);
}

std::string with_port(std::string text, int port) {
  const std::string key = "{port}", value = std::to_string(port);
  for (size_t at; (at = text.find(key)) != std::string::npos;) text.replace(at, key.size(), value);
  return text;
}

}  // namespace frank::lab
