// Executor: a thread that runs tasks, and the rules every niox executor keeps (Netty's
// EventExecutor). EventLoop is the real one; EmbeddedEventLoop (transport/embedded_channel.hpp)
// is a manual one for tests.
//
//  - execute(task) may be called from any thread. The task runs on the executor's thread, in
//    submission order, never inside the execute() call itself.
//  - schedule(delay, task) may be called from any thread and returns at once. The task runs on
//    the executor's thread no earlier than now() + delay, unless cancelled first; ties run in
//    scheduling order. ScheduledFuture::cancel() may be called from any thread.
//  - in_event_loop() tells whether the calling thread is the executor's.
//
// Lifetime.  Channels, promises and timers keep an ExecutorLink, not the executor itself: once
// the executor is gone (an EventLoop destroyed, an EventLoopGroup shut down), the link refuses
// new tasks instead of touching freed memory, and whoever holds it fails its work cleanly
// (a channel's operations complete with channel_closed, a promise runs its listeners on the
// completing thread).
//
// Blocking.  A loop thread must never wait for something only a loop can finish. Every waiting
// call in niox (ChannelFuture::sync()) throws BlockingOperationException on a thread that runs
// an EventLoop, instead of freezing it.
#pragma once

#include <niox/loop/detail/unique_function.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>

namespace niox {

// What executors run: a move-only callable (captures up to 64 bytes are stored inline).
using Runnable = detail::UniqueFunction<void()>;

// Netty's BlockingOperationException: a wait was attempted on an event loop thread, where it
// could only deadlock or stall every other channel of that loop.
class BlockingOperationException : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// Java's IllegalStateException: a call made where the object's state or thread does not allow
// it (an EventLoop operation started from another thread than the loop's).
class IllegalStateException : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
// Shared between a ScheduledFuture and the executor's timer. The executor claims it
// (pending -> ran) right before running the task; cancel() claims it (pending -> cancelled).
// Whoever wins the exchange decides, so a task runs at most once and never after cancel()
// returned true, also across threads.
class ExecutorLink;
struct ScheduledState {
  enum : int { pending = 0, ran = 1, cancelled = 2 };
  std::atomic<int> status{pending};
  // Used on the executor's thread only: the task (released there once it can no longer run)
  // and the executor's own name for the timer.
  Runnable task;
  std::uint32_t timer_index = 0, timer_generation = 0;
  // Set by the executor before the state is shared: lets a successful cancel() release the
  // timer at once instead of at its deadline.
  void (*on_cancel)(const std::shared_ptr<ScheduledState>&) = nullptr;
  std::weak_ptr<ExecutorLink> owner;
  bool is_done() const noexcept { return status.load(std::memory_order_acquire) != pending; }
  bool claim_for_run() noexcept {
    int expected = pending;
    return status.compare_exchange_strong(expected, ran, std::memory_order_acq_rel);
  }
};
std::shared_ptr<ScheduledState> new_scheduled_state();

class ExecutorLink;
// The calling thread's id as the loop compares it (gettid, cached per thread).
int current_thread_id() noexcept;
// True while the calling thread is inside an EventLoop (run, run_once, shutdown, destructor).
bool on_loop_thread() noexcept;
}  // namespace detail

// Handle to a scheduled task. Default-constructed: no task (cancel() returns false).
class ScheduledFuture {
 public:
  ScheduledFuture() = default;
  explicit ScheduledFuture(std::shared_ptr<detail::ScheduledState> state) noexcept
      : state_(std::move(state)) {}

  // Any thread. True if this call prevented the task from running (a periodic task: from
  // running again); false if it ran, is running, or was cancelled before.
  bool cancel() noexcept {
    if (!state_) {
      return false;
    }
    int expected = detail::ScheduledState::pending;
    if (!state_->status.compare_exchange_strong(expected, detail::ScheduledState::cancelled,
                                                std::memory_order_acq_rel)) {
      return false;
    }
    if (state_->on_cancel) {
      state_->on_cancel(state_);
    }
    return true;
  }
  bool is_cancelled() const noexcept {
    return state_ &&
           state_->status.load(std::memory_order_acquire) == detail::ScheduledState::cancelled;
  }
  // Ran (one-shot) or cancelled.
  bool is_done() const noexcept { return state_ && state_->is_done(); }
  bool valid() const noexcept { return state_ != nullptr; }

 private:
  std::shared_ptr<detail::ScheduledState> state_;
};

class Executor {
 public:
  using Clock = std::chrono::steady_clock;

  virtual ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  virtual void execute(Runnable task) = 0;
  virtual bool in_event_loop() const noexcept = 0;
  virtual ScheduledFuture schedule(std::chrono::nanoseconds delay, Runnable task) = 0;
  virtual Clock::time_point now() const noexcept { return Clock::now(); }

  // What outlives the executor in its place (see Lifetime above).
  const std::shared_ptr<detail::ExecutorLink>& link() const noexcept { return link_; }

 protected:
  // How the link tells whether a thread is the executor's, without touching a dead executor.
  enum class ThreadCheck {
    ask,         // calls in_event_loop() under the link's lock (any executor)
    bound,       // the thread given to bind_thread() (EventLoop)
    any_thread,  // every thread counts as the executor's (a single-threaded test executor)
  };
  explicit Executor(ThreadCheck check = ThreadCheck::ask);
  // A derived executor calls this first in its destructor, before its own state goes: from
  // then on the link refuses tasks. Idempotent.
  void retire() noexcept;
  // The loop thread binds itself (EventLoop::run and friends).
  void bind_thread(int thread_id) noexcept;

 private:
  std::shared_ptr<detail::ExecutorLink> link_;
};

namespace detail {
class ExecutorLink {
 public:
  static constexpr int any_thread = -1;
  static constexpr int ask = -2;
  ExecutorLink(Executor* target, int thread) noexcept : target_(target), thread_(thread) {}

  // Any thread: hands `task` to the executor; false (the task untouched) once it is gone.
  bool execute(Runnable& task);
  // Any thread, no lock: whether the calling thread is the live executor's thread.
  bool in_event_loop() const noexcept {
    int t = thread_.load(std::memory_order_acquire);
    if (t == ask) {
      return ask_executor();
    }
    return t == any_thread || is_bound_thread(t);
  }
  bool alive() const noexcept { return alive_.load(std::memory_order_acquire); }
  // An EventLoop that no thread has run yet: its owner is still setting it up.
  bool unbound() const noexcept { return thread_.load(std::memory_order_acquire) == 0 && alive(); }
  // The executor itself; only on its own thread (in_event_loop()), where it cannot go away.
  Executor& executor() const noexcept { return *target_; }

 private:
  friend class niox::Executor;
  // The calling thread is the one bound_to (the executor's, bound by bind_thread()).
  static bool is_bound_thread(int bound_to) noexcept {
    return bound_to > 0 && bound_to == current_thread_id();
  }
  bool ask_executor() const noexcept;
  mutable std::mutex mutex_;
  Executor* target_;
  std::atomic<bool> alive_{true};
  std::atomic<int> thread_;
};
}  // namespace detail

}  // namespace niox
