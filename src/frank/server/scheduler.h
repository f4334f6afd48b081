#pragma once
// One request executes at a time: jobs wait in a bounded FIFO queue and a single worker thread
// runs them in order of arrival.
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "frank/server/job.h"

namespace frank::server {

class Scheduler {
 public:
  using Executor = std::function<void(Job&)>;

  // `max_queue`: jobs that may wait besides the one running.
  Scheduler(size_t max_queue, Executor execute);
  ~Scheduler();  // finishes the running job, abandons nothing silently: waiting jobs end as cancelled
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // False when the queue is full (the caller answers 429).
  bool submit(const std::shared_ptr<Job>& job);
  size_t waiting() const;

 private:
  void run();

  const size_t max_queue_;
  Executor execute_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace frank::server
