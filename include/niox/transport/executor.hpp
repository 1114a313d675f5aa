// Executor: the narrow face of an event loop that the transport needs — run a task on the loop
// thread, tell whether we are on it, and run a task after a delay. The EventLoop implements it;
// EmbeddedChannel implements it with a task queue and a manual clock for tests.
//
// Contract for implementations:
//  - execute() may be called from any thread; tasks run on the loop thread, in submission order,
//    never inside the execute() call itself.
//  - schedule() returns at once; the task runs on the loop thread no earlier than now() + delay,
//    unless cancelled first. Ties run in scheduling order.
//  - now() is the clock schedule() measures against (a manual one in tests).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>

namespace niox {

namespace detail {
// Shared between a ScheduledFuture and the executor's timer entry. The executor claims it
// (pending -> ran) right before running the task; cancel() claims it (pending -> cancelled).
// Whoever wins the exchange decides, so a task runs at most once and never after cancel()
// returned true, also across threads.
struct ScheduledState {
  enum : int { pending = 0, ran = 1, cancelled = 2 };
  std::atomic<int> status{pending};
  bool is_done() const noexcept { return status.load(std::memory_order_acquire) != pending; }
  bool claim_for_run() noexcept {
    int expected = pending;
    return status.compare_exchange_strong(expected, ran, std::memory_order_acq_rel);
  }
};
}  // namespace detail

// Handle to a scheduled task. Default-constructed: no task (cancel() returns false).
class ScheduledFuture {
 public:
  ScheduledFuture() = default;
  explicit ScheduledFuture(std::shared_ptr<detail::ScheduledState> state) noexcept
      : state_(std::move(state)) {}

  // True if this call prevented the task from running; false if it ran, is running, or was
  // cancelled before.
  bool cancel() noexcept {
    if (!state_) {
      return false;
    }
    int expected = detail::ScheduledState::pending;
    return state_->status.compare_exchange_strong(expected, detail::ScheduledState::cancelled,
                                                  std::memory_order_acq_rel);
  }
  bool is_cancelled() const noexcept {
    return state_ &&
           state_->status.load(std::memory_order_acquire) == detail::ScheduledState::cancelled;
  }
  bool is_done() const noexcept {
    return state_ &&
           state_->status.load(std::memory_order_acquire) != detail::ScheduledState::pending;
  }
  bool valid() const noexcept { return state_ != nullptr; }

 private:
  std::shared_ptr<detail::ScheduledState> state_;
};

class Executor {
 public:
  using Task = std::function<void()>;
  using Clock = std::chrono::steady_clock;

  virtual ~Executor() = default;

  virtual void execute(Task task) = 0;
  virtual bool in_event_loop() const noexcept = 0;
  virtual ScheduledFuture schedule(std::chrono::nanoseconds delay, Task task) = 0;
  virtual Clock::time_point now() const noexcept { return Clock::now(); }
};

}  // namespace niox
