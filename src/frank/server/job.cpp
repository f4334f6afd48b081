#include "frank/server/job.h"

namespace frank::server {

std::optional<JobEvent> Job::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  JobEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

void Job::push(JobEvent e) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(e));
  }
  cv_.notify_one();
}

}  // namespace frank::server
