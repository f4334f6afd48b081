#pragma once
// A SessionBackend wrapper for tests of the prefix cache's tiers: what was made, resumed and fed.
#include <cstdint>
#include <memory>
#include <span>
#include <utility>

#include "frank/core/error.h"
#include "frank/engine/session_backend.h"

namespace frank::test {

// Another backend's sessions, counting the sessions made fresh or resumed and the tokens fed; a
// session can be made to fail (as a device error would) at its `fail_at`-th forward call.
class CountingSessions : public engine::SessionBackend {
 public:
  explicit CountingSessions(engine::SessionBackend& inner) : inner_(inner) {}
  std::unique_ptr<engine::BackendSession> fresh() override {
    ++fresh_made;
    return std::make_unique<Counted>(inner_.fresh(), *this);
  }
  std::unique_ptr<engine::BackendSession> resume(engine::Session state) override {
    ++resumed;
    return std::make_unique<Counted>(inner_.resume(std::move(state)), *this);
  }
  int fresh_made = 0, resumed = 0;
  int64_t tokens_fed = 0;
  int fail_next_at = 0;  // forward call at which the next session made fails (0: never)

 private:
  class Counted : public engine::BackendSession {
   public:
    Counted(std::unique_ptr<engine::BackendSession> inner, CountingSessions& owner)
        : inner_(std::move(inner)), owner_(owner), fail_at_(std::exchange(owner.fail_next_at, 0)) {}
    Tensor forward(std::span<const int32_t> ids) override {
      if (++calls_ == fail_at_) throw Error("CUDA: kernel launch: an illegal memory access was encountered");
      owner_.tokens_fed += std::ssize(ids);
      return inner_->forward(ids);
    }
    int64_t position() const override { return inner_->position(); }
    engine::SessionCheckpoint checkpoint() const override { return inner_->checkpoint(); }
    engine::Session to_host() const override { return inner_->to_host(); }
    engine::Speculation speculation() override { return inner_->speculation(); }  // not counted

   private:
    std::unique_ptr<engine::BackendSession> inner_;
    CountingSessions& owner_;
    int fail_at_, calls_ = 0;
  };
  engine::SessionBackend& inner_;
};

}  // namespace frank::test
