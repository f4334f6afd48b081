#include "frank/core/handshake_worker.h"

#include <future>
#include <utility>

namespace frank {
namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

HandshakeWorker::HandshakeWorker(HandshakeMailbox& mailbox, const std::function<void()>& start, Serve serve)
    : mailbox_(mailbox), serve_(std::move(serve)) {
  std::promise<void> started;
  std::future<void> result = started.get_future();
  thread_ = std::thread([this, start, started = std::move(started)]() mutable {
    try {
      start();
    } catch (...) {
      started.set_exception(std::current_exception());
      return;
    }
    started.set_value();
    serve_requests();
  });
  try {
    result.get();
  } catch (...) {
    thread_.join();
    throw;
  }
}

HandshakeWorker::~HandshakeWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  thread_.join();
  std::atomic_ref<uint64_t>(mailbox_.done).store(HandshakeMailbox::kAborted, std::memory_order_release);
}

void HandshakeWorker::expect(int64_t count) {
  {
    std::lock_guard lock(mutex_);
    expected_ += static_cast<uint64_t>(count);
  }
  work_.notify_all();
}

void HandshakeWorker::finish(const std::function<void()>& poll) {
  std::unique_lock lock(mutex_);
  while (!answered_.wait_for(lock, kPollPeriod, [&] { return answered_count_ == expected_; })) {
    lock.unlock();
    poll();
    lock.lock();
  }
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void HandshakeWorker::serve_requests() {
  using Clock = std::chrono::steady_clock;
  while (true) {
    uint64_t seq = 0;
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [&] { return stopping_ || answered_count_ < expected_; });
      if (stopping_) return;
      seq = answered_count_ + 1;
    }
    // Requests are coming: spin for this one (a sleep would add a wake-up to every request).
    const auto waiting = Clock::now();
    while (std::atomic_ref<uint64_t>(mailbox_.request).load(std::memory_order_acquire) < seq) {
      if (stopping_.load(std::memory_order_relaxed)) return;
      cpu_relax();
    }
    const double waited = std::chrono::duration<double>(Clock::now() - waiting).count();
    try {
      serve_(mailbox_.layer, mailbox_.tokens, waited);  // published with seq: read after the acquire
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    std::atomic_ref<uint64_t>(mailbox_.done).store(seq, std::memory_order_release);
    {
      std::lock_guard lock(mutex_);
      answered_count_ = seq;
    }
    answered_.notify_all();
  }
}

}  // namespace frank
