#pragma once
// Stop sequences on streamed text: text is released only when it can no longer be the start of a
// stop sequence, so a client never sees part of a stop string.
#include <string>
#include <vector>

namespace frank::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Adds text; returns what may be sent now. After a stop sequence is found, `stopped()` is true
  // and the returned text ends right before it.
  std::string push(const std::string& text);
  // At the end of generation: everything still held back.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace frank::server
