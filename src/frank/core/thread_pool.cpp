#include "frank/core/thread_pool.h"

#include <pthread.h>
#include <sched.h>

namespace frank {
namespace {

void pin_to_cpu(std::thread::native_handle_type handle, unsigned cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(handle, sizeof set, &set);  // best effort: a restricted cpuset just refuses
}

}  // namespace

ThreadPool::ThreadPool(unsigned threads, bool pin) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 1; i < threads; ++i) {
    workers_.emplace_back([this, i] { work(i); });
    if (pin) pin_to_cpu(workers_.back().native_handle(), i);
  }
  if (pin) pin_to_cpu(pthread_self(), 0);
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::drain() {
  while (true) {
    int64_t i;
    {
      std::lock_guard lock(mutex_);
      if (next_ >= tasks_) return;
      i = next_++;
    }
    try {
      (*task_)(i);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!failure_) failure_ = std::current_exception();
    }
    std::lock_guard lock(mutex_);
    if (++finished_ == tasks_) done_.notify_all();
  }
}

void ThreadPool::work(unsigned) {
  uint64_t seen = 0;
  while (true) {
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    drain();
  }
}

void ThreadPool::parallel_for(int64_t tasks, const std::function<void(int64_t)>& task) {
  if (tasks <= 0) return;
  {
    std::lock_guard lock(mutex_);
    task_ = &task;
    tasks_ = tasks;
    next_ = 0;
    finished_ = 0;
    failure_ = nullptr;
    ++generation_;
  }
  start_.notify_all();
  drain();
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return finished_ == tasks_; });
  task_ = nullptr;
  if (failure_) std::rethrow_exception(failure_);
}

}  // namespace frank
