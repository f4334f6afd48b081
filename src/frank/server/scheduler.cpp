#include "frank/server/scheduler.h"

namespace frank::server {

Scheduler::Scheduler(size_t max_queue, Executor execute)
    : max_queue_(max_queue), execute_(std::move(execute)), worker_([this] { run(); }) {}

Scheduler::~Scheduler() {
  std::deque<std::shared_ptr<Job>> abandoned;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    abandoned.swap(queue_);
  }
  cv_.notify_all();
  worker_.join();
  for (auto& job : abandoned) job->push(JobEnd{"cancelled", "server is shutting down"});
}

bool Scheduler::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || queue_.size() >= max_queue_) return false;
    queue_.push_back(job);
  }
  cv_.notify_one();
  return true;
}

size_t Scheduler::waiting() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

void Scheduler::run() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = queue_.front();
      queue_.pop_front();
    }
    execute_(*job);
  }
}

}  // namespace frank::server
