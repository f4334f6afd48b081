// HandshakeWorker (core/handshake_worker.h), the host side of the split MoE step's handshake, with
// a thread in the GPU's place: it publishes requests as hybrid_moe.cu's kernels do (arguments,
// then the sequence number with a release store) and spins for each answer.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "frank/core/error.h"
#include "frank/core/handshake_worker.h"

namespace frank {
namespace {

uint64_t load(uint64_t& word) { return std::atomic_ref<uint64_t>(word).load(std::memory_order_acquire); }
void store(uint64_t& word, uint64_t v) { std::atomic_ref<uint64_t>(word).store(v, std::memory_order_release); }

// The requester's side of request `seq`: publish, then wait for the answer; returns it.
uint64_t request(HandshakeMailbox& m, uint64_t seq, int32_t layer, int32_t tokens) {
  m.layer = layer;
  m.tokens = tokens;
  store(m.request, seq);
  uint64_t done = 0;
  while ((done = load(m.done)) < seq) std::this_thread::yield();
  return done;
}

void no_poll() {}

// Requests in bursts as graph launches make them: the host announces each burst (before or after
// the requester starts it); every request is served once, in order, with its own arguments.
TEST(HandshakeWorker, ServesEveryAnnouncedRequestInOrder) {
  constexpr int kBursts = 50, kBurst = 7;
  HandshakeMailbox mailbox{};
  std::vector<std::pair<int32_t, int32_t>> served;
  HandshakeWorker worker(mailbox, [] {}, [&](int32_t layer, int32_t tokens, double) {
    served.emplace_back(layer, tokens);
  });
  std::atomic<int> bursts_started{0};
  std::thread gpu([&] {
    for (int b = 0; b < kBursts; ++b) {
      bursts_started = b + 1;
      for (int i = 0; i < kBurst; ++i) {
        const uint64_t seq = static_cast<uint64_t>(b) * kBurst + i + 1;
        EXPECT_EQ(request(mailbox, seq, i, b), seq);
      }
    }
  });
  for (int b = 0; b < kBursts; ++b) {
    if (b % 2 == 1)
      while (bursts_started < b + 1) std::this_thread::yield();  // announced after the requester began
    worker.expect(kBurst);
    worker.finish(no_poll);
    ASSERT_EQ(served.size(), static_cast<size_t>(b + 1) * kBurst);
  }
  gpu.join();
  for (size_t s = 0; s < served.size(); ++s) {
    EXPECT_EQ(served[s].first, static_cast<int32_t>(s % kBurst));
    EXPECT_EQ(served[s].second, static_cast<int32_t>(s / kBurst));
  }
}

// A request whose serving throws is still answered (the requester goes on); finish() rethrows the
// first error once, and the requests after it are served.
TEST(HandshakeWorker, AFailedRequestIsAnsweredAndReportedByFinish) {
  HandshakeMailbox mailbox{};
  int served = 0;
  HandshakeWorker worker(mailbox, [] {}, [&](int32_t layer, int32_t, double) {
    if (layer == 2 || layer == 3) throw Error("layer " + std::to_string(layer) + " failed");
    ++served;
  });
  worker.expect(5);
  std::thread gpu([&] {
    for (uint64_t s = 1; s <= 5; ++s) request(mailbox, s, static_cast<int32_t>(s), 1);
  });
  try {
    worker.finish(no_poll);
    ADD_FAILURE() << "finish() did not rethrow";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "layer 2 failed");
  }
  gpu.join();
  EXPECT_EQ(served, 3);
  EXPECT_NO_THROW(worker.finish(no_poll));  // reported once
}

// A requester waiting for an answer the host never announced is released by the destructor, as is
// a worker spinning for an announced request that never comes.
TEST(HandshakeWorker, DestructionReleasesBothSides) {
  HandshakeMailbox mailbox{};
  auto worker = std::make_unique<HandshakeWorker>(mailbox, [] {}, [](int32_t, int32_t, double) {});
  std::atomic<uint64_t> answer{0};
  std::thread gpu([&] { answer = request(mailbox, 1, 0, 1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(answer, 0u) << "answered a request nobody announced";
  worker.reset();
  gpu.join();
  EXPECT_EQ(answer, HandshakeMailbox::kAborted);

  HandshakeMailbox unused{};
  worker = std::make_unique<HandshakeWorker>(unused, [] {}, [](int32_t, int32_t, double) {});
  worker->expect(1);  // spins: nothing is published
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  worker.reset();  // returns (a hang fails the test by its timeout)
  EXPECT_EQ(load(unused.done), HandshakeMailbox::kAborted);
}

// finish() polls while it waits, and a poll that throws (the requester failed) ends the wait.
TEST(HandshakeWorker, FinishStopsWaitingWhenThePollThrows) {
  HandshakeMailbox mailbox{};
  HandshakeWorker worker(mailbox, [] {}, [](int32_t, int32_t, double) {});
  worker.expect(1);
  int polls = 0;
  EXPECT_THROW(worker.finish([&] {
    if (++polls == 2) throw Error("the requester failed");
  }),
               Error);
  EXPECT_EQ(polls, 2);
}

TEST(HandshakeWorker, AFailedStartIsTheConstructorsError) {
  HandshakeMailbox mailbox{};
  EXPECT_THROW(HandshakeWorker(mailbox, [] { throw std::runtime_error("no pool"); }, [](int32_t, int32_t, double) {}),
               std::runtime_error);
}

}  // namespace
}  // namespace frank
