// Private: one stop callback per task, lent to whichever operation the task waits on.
//
// A task waits on one operation at a time. Registering a std::stop_callback for each of them
// costs two lock-protected list updates and a reference count pair per operation, which on a
// busy connection is most of what a cancellable receive costs beyond the system call. So the
// task registers one callback, at its first cancellable operation, and each operation arms the
// relay with what cancels it:
//
//   owner (the task's thread)               stop request (any thread)
//   arm(target)    armed_ = target   ─┐      callback: CAS armed_ target -> target|busy
//     stop already requested? disarm  │                cancel(target); armed_ = 0
//   ... the operation runs ...        │
//   disarm()       CAS armed_ -> 0  ──┘      (a callback holding busy is waited for)
//
// After disarm() returns, no cancel of that target runs or is still running, so the target may
// be freed. arm() stores with sequential consistency and then reads the token: a request
// either sees the armed target or is seen by arm(), never neither (a store buffered past the
// load would let both miss, and the operation would wait forever).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <thread>
#include <utility>

namespace niox::detail {

class StopRelay {
 public:
  using Cancel = void (*)(void* target) noexcept;

  StopRelay() = default;
  StopRelay(const StopRelay&) = delete;
  StopRelay& operator=(const StopRelay&) = delete;

  // From now until disarm(), a stop request on `token` calls cancel(target) once, on the
  // requesting thread. False when the stop was already requested: nothing is armed. `token`
  // must be the same on every call (the task's).
  bool arm(const std::stop_token& token, Cancel cancel, void* target) {
    if (!callback_) {
      if (!token.stop_possible()) return true;
      if (token.stop_requested()) return false;
      callback_.emplace(token, OnStop{this});
    }
    cancel_ = cancel;
    armed_.store(reinterpret_cast<std::uintptr_t>(target), std::memory_order_seq_cst);
    if (token.stop_requested()) {
      disarm();
      return false;
    }
    return true;
  }

  // Owner's thread. Waits for a cancel of the armed target running on another thread.
  void disarm() noexcept {
    std::uintptr_t cur = armed_.load(std::memory_order_acquire);
    if (cur == 0) return;
    if ((cur & busy) == 0 && armed_.compare_exchange_strong(cur, 0, std::memory_order_acq_rel,
                                                            std::memory_order_acquire)) {
      return;
    }
    while (armed_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  }

 private:
  static constexpr std::uintptr_t busy = 1;  // targets are at least 2-aligned

  struct OnStop {
    StopRelay* self;
    void operator()() const noexcept { self->fire(); }
  };

  void fire() noexcept {
    std::uintptr_t cur = armed_.load(std::memory_order_acquire);
    while (cur != 0 && (cur & busy) == 0) {
      if (armed_.compare_exchange_weak(cur, cur | busy, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
        cancel_(reinterpret_cast<void*>(cur));
        armed_.store(0, std::memory_order_release);
        return;
      }
    }
  }

  std::atomic<std::uintptr_t> armed_{0};
  Cancel cancel_ = nullptr;  // written before armed_, read after claiming it
  std::optional<std::stop_callback<OnStop>> callback_;
};

// What a cancellable awaiter holds: the relay of the task it waits in, from arm() in
// await_suspend until disarm() when it is resumed or destroyed (once per arming: a named awaiter
// may outlive its co_await while the task's next operation holds the relay). One pointer.
class StopRelayLease {
 public:
  // Lends `target` to the relay of the coroutine whose promise is `p`. A coroutine other than
  // a Task's has no stop to relay: nothing is armed. False when the task's stop was already
  // requested: nothing is armed either.
  template <class Promise>
  bool arm(Promise& p, StopRelay::Cancel cancel, void* target) {
    if constexpr (requires { p.relay.arm(p.stop, cancel, target); }) {
      if (!p.relay.arm(p.stop, cancel, target)) return false;
      relay_ = &p.relay;
    }
    return true;
  }
  // Waits for a cancel of the target running on another thread; afterwards none runs.
  void disarm() noexcept {
    if (relay_) std::exchange(relay_, nullptr)->disarm();
  }

 private:
  StopRelay* relay_ = nullptr;
};

}  // namespace niox::detail
