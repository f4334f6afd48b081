#pragma once
// HandshakeWorker: a host thread that serves numbered requests another agent publishes in shared
// memory, one at a time and in order: the host side of a split MoE step's handshake with the GPU
// (cuda/cpu_experts.h; the GPU's side is cuda/hybrid_moe.cuh). The requester publishes request s
// (its arguments, then s with a release store) only after the worker answered s - 1 (done = s - 1),
// so one mailbox serves every request.
//
// The worker does not learn from the mailbox that requests are coming: the host tells it
// (expect(count)), and it spins for exactly that many, then sleeps. Whoever issues the requester's
// work knows the count (a CUDA graph: what its capture issued). The worker answers every request
// it serves, even when serving it threw (finish() rethrows that), so the requester never waits for
// an answer that will not come; the destructor answers any request still waiting with kAborted.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace frank {

// The words both sides share (for a GPU: host-mapped pinned memory); each side writes its own cache line.
struct HandshakeMailbox {
  static constexpr uint64_t kAborted = UINT64_MAX;  // the worker stopped: every wait passes

  alignas(64) uint64_t request;  // requester -> worker: the sequence number of the last request (from 1)
  int32_t layer, tokens;         // ... its arguments, published with it
  alignas(64) uint64_t done;     // worker -> requester: the last sequence number answered, or kAborted
};

class HandshakeWorker {
 public:
  // Runs on the worker for each request, in order; `waited`: seconds the worker spun for it.
  using Serve = std::function<void(int32_t layer, int32_t tokens, double waited)>;
  static constexpr std::chrono::milliseconds kPollPeriod{100};

  // `mailbox` zeroed, outliving the worker. `start` runs first on the worker thread (what must be
  // made there); an exception from it is the constructor's.
  HandshakeWorker(HandshakeMailbox& mailbox, const std::function<void()>& start, Serve serve);
  // Stops the worker (a request being served completes first), then answers kAborted.
  ~HandshakeWorker();
  HandshakeWorker(const HandshakeWorker&) = delete;
  HandshakeWorker& operator=(const HandshakeWorker&) = delete;

  // `count` more requests will be published.
  void expect(int64_t count);
  // Waits until every expected request was answered, calling `poll` every kPollPeriod meanwhile (it
  // may throw to stop waiting: a requester that failed and will not publish). Rethrows the first
  // exception serving threw since the last finish().
  void finish(const std::function<void()>& poll);

 private:
  void serve_requests();

  HandshakeMailbox& mailbox_;
  Serve serve_;
  std::mutex mutex_;
  std::condition_variable work_, answered_;
  uint64_t expected_ = 0, answered_count_ = 0;  // requests; request s is the s-th
  std::exception_ptr error_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace frank
