// Starting Tasks: sync_wait() from an ordinary thread, co_spawn() onto an executor, and the
// awaitables that move a coroutine between threads or through time.
//
//   int main() { return sync_wait(serve(loop)); }          // blocks this thread
//   co_spawn(loop, handle(connection));                     // detached: errors go to the log
//   co_spawn(loop, compute(), [](std::exception_ptr e, int v) { ... });  // on the loop thread
//   co_await resume_on(other_loop);                         // continue on another thread
//   co_await sleep_for(loop, 50ms);                         // a timer, no thread blocked
#pragma once

#include <niox/async/task.hpp>
#include <niox/base/log.hpp>
#include <niox/loop/event_loop.hpp>
#include <niox/loop/executor.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <coroutine>
#include <exception>
#include <mutex>
#include <memory>
#include <optional>
#include <stop_token>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace niox {

namespace detail {

template <class T>
using NonVoidResult = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

// An eager coroutine that destroys itself at its end: the driver under sync_wait, co_spawn and
// when_all. Its body catches everything.
struct Detached {
  struct promise_type : CachedFrame {
    Detached get_return_object() const noexcept { return {}; }
    std::suspend_never initial_suspend() const noexcept { return {}; }
    std::suspend_never final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept { std::terminate(); }
  };
};

template <class T>
struct SyncWaitState {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  std::optional<T> value;
};
template <>
struct SyncWaitState<void> {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
};

template <class T>
Detached drive_sync_wait(Task<T> task, SyncWaitState<T>& s) {
  {
    // The task (its frames, their copy of an exception) is gone before the waiter wakes up.
    Task<T> t = std::move(task);
    try {
      if constexpr (std::is_void_v<T>) {
        co_await t;
      } else {
        s.value.emplace(co_await t);
      }
    } catch (...) {
      s.error = std::current_exception();
    }
  }
  // Notified under the lock: once the waiter sees `done` it may return and free `s`.
  std::lock_guard lock(s.mutex);
  s.done = true;
  s.cv.notify_all();
}

template <class T, class Callback>
Detached drive_spawned(Task<T> task, Callback callback) {
  std::exception_ptr error;
  std::optional<NonVoidResult<T>> value;
  {
    // The task's frames are gone before the callback runs.
    Task<T> t = std::move(task);
    try {
      if constexpr (std::is_void_v<T>) {
        co_await t;
        value.emplace();
      } else {
        value.emplace(co_await t);
      }
    } catch (...) {
      error = std::current_exception();
    }
  }
  if constexpr (std::is_void_v<T>) {
    callback(error);
  } else {
    callback(error, value ? std::move(*value) : T{});
  }
}

inline void log_detached_failure(const std::exception_ptr& e) noexcept {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    log(LogLevel::error, "a detached task failed: {}", ex.what());
  } catch (...) {
    log(LogLevel::error, "a detached task failed with a non-standard exception");
  }
}

}  // namespace detail

// Runs `task` on the calling thread until it completes (it may hop to other threads meanwhile,
// the calling thread waits) and returns its value or rethrows its exception. For main() and
// tests. Throws BlockingOperationException on a thread that runs an event loop.
template <class T>
T sync_wait(Task<T> task) {
  if (detail::on_loop_thread()) {
    throw BlockingOperationException(
        "niox: sync_wait() on an event loop thread would block the loop; co_await the task or "
        "co_spawn it");
  }
  detail::SyncWaitState<T> s;
  detail::drive_sync_wait(std::move(task), s);
  std::unique_lock lock(s.mutex);
  s.cv.wait(lock, [&] { return s.done; });
  if (s.error) {
    std::rethrow_exception(s.error);
  }
  if constexpr (!std::is_void_v<T>) {
    return std::move(*s.value);
  }
}

// Starts `task` on `executor`'s thread (in a later turn; any thread may call this) and calls
// `callback(std::exception_ptr, T)` there when it ends (`callback(std::exception_ptr)` for
// Task<void>; a value-initialised T comes with an exception). The task owns what it captured
// until then.
template <class T, class Callback>
void co_spawn(Executor& executor, Task<T> task, Callback callback) {
  executor.execute([t = std::move(task), cb = std::move(callback)]() mutable {
    detail::drive_spawned(std::move(t), std::move(cb));
  });
}

// Detached: starts `task` on `executor`; an exception that ends it is reported through the log
// sink (niox/base/log.hpp).
template <class T>
void co_spawn(Executor& executor, Task<T> task) {
  if constexpr (std::is_void_v<T>) {
    co_spawn(executor, std::move(task), [](std::exception_ptr e) {
      if (e) detail::log_detached_failure(e);
    });
  } else {
    co_spawn(executor, std::move(task), [](std::exception_ptr e, T&&) {
      if (e) detail::log_detached_failure(e);
    });
  }
}

// co_await resume_on(executor): continues the coroutine on `executor`'s thread (at once when
// already there). Throws IllegalStateException when the executor is gone.
class ResumeOn {
 public:
  explicit ResumeOn(Executor& executor) noexcept : executor_(&executor) {}
  bool await_ready() const noexcept { return executor_->link()->in_event_loop(); }
  bool await_suspend(std::coroutine_handle<> h) {
    Runnable resume([h] { h.resume(); });
    if (executor_->link()->execute(resume)) {
      return true;  // from here on the other thread may already run (and free) this frame
    }
    gone_ = true;
    return false;
  }
  void await_resume() const {
    if (gone_) {
      throw IllegalStateException("niox: resume_on(): the executor is gone");
    }
  }

 private:
  Executor* executor_;
  bool gone_ = false;
};
inline ResumeOn resume_on(Executor& executor) noexcept { return ResumeOn(executor); }

// co_await sleep_for(loop, d): resumes on `loop`'s thread after `d` (a timer; no thread
// blocks). A stop request on the task's token ends it at once (on the loop thread) with
// std::system_error(operation_aborted()). Destroying the suspended coroutine cancels the timer.
// Throws IllegalStateException when the loop is gone.
class SleepFor {
 public:
  SleepFor(EventLoop& loop, std::chrono::nanoseconds delay) noexcept
      : loop_(&loop), delay_(delay) {}
  SleepFor(const SleepFor&) = delete;
  SleepFor& operator=(const SleepFor&) = delete;
  ~SleepFor() {
    disarm();  // waits for a stop's cancel running on another thread
    if (state_) state_->timer.cancel();
  }
  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) {
    if (!loop_->link()->alive()) {
      gone_ = true;
      return false;
    }
    // Shared with the timer and the stop callback; whichever claims it first resumes, once.
    EventLoop* loop = loop_;
    auto st = std::allocate_shared<State>(detail::CachedObjectAllocator<State>());
    st->h = h;
    state_ = st;
    // Once the task's stop relay is armed, a stop on another thread may resume this frame, but
    // only through a task on the loop that runs after `arm` (see on_stop): from here on only
    // locals are used until `arm` has been handed over.
    auto arm = [st, loop, d = delay_] {
      st->armed = true;
      if (st->stop_pending) {
        if (!st->claimed.exchange(true)) {
          st->aborted = true;
          st->h.resume();
        }
        return;
      }
      st->timer = loop->schedule(d, [st] {
        if (!st->claimed.exchange(true)) st->h.resume();
      });
    };
    if (!relay_.arm(h.promise(), &on_stop, this)) {
      state_.reset();  // stopped already
      aborted_ = true;
      return false;
    }
    if (loop->in_event_loop()) {
      arm();  // the timer and a stop's task run on this thread, after this returns
      return true;
    }
    Runnable r(std::move(arm));
    if (loop->link()->execute(r)) {
      return true;  // from here on the loop may already run (and free) this frame
    }
    // The loop is gone: no task of it, so no stop's either, can resume the frame.
    disarm();
    state_.reset();
    gone_ = true;
    return false;
  }
  void await_resume() {
    disarm();
    if (gone_) {
      throw IllegalStateException("niox: sleep_for(): the event loop is gone");
    }
    if (aborted_ || (state_ && state_->aborted)) {
      throw std::system_error(operation_aborted(), "sleep_for");
    }
  }

 private:
  struct State {
    std::atomic<bool> claimed{false};
    // On the loop thread only: `armed` once await_suspend's task ran; `stop_pending` when a
    // stop's task came first, so that the arming ends the sleep instead.
    bool aborted = false;
    bool armed = false;
    bool stop_pending = false;
    std::coroutine_handle<> h;
    ScheduledFuture timer;
  };
  // The relay's target is this awaiter, alive until disarm() returns.
  static void on_stop(void* target) noexcept {
    auto* self = static_cast<SleepFor*>(target);
    // Ends the sleep on the loop thread, where the timer also runs.
    try {
      Runnable r([st = self->state_] {
        if (!st->armed) {
          // await_suspend may still be running on its thread: the arming ends the sleep.
          st->stop_pending = true;
          return;
        }
        if (!st->claimed.exchange(true)) {
          st->timer.cancel();
          st->aborted = true;
          st->h.resume();
        }
      });
      self->loop_->link()->execute(r);
    } catch (...) {
      // Out of memory: the sleep ends at its deadline instead.
    }
  }
  void disarm() noexcept { relay_.disarm(); }

  EventLoop* loop_;
  std::chrono::nanoseconds delay_;
  std::shared_ptr<State> state_;
  detail::StopRelayLease relay_;  // armed with this awaiter while the sleep may be pending
  bool gone_ = false;
  bool aborted_ = false;
};
template <class Rep, class Period>
SleepFor sleep_for(EventLoop& loop, std::chrono::duration<Rep, Period> d) noexcept {
  return SleepFor(loop, std::chrono::duration_cast<std::chrono::nanoseconds>(d));
}
template <class Clock, class Duration>
SleepFor sleep_until(EventLoop& loop, std::chrono::time_point<Clock, Duration> deadline) noexcept {
  return SleepFor(loop,
                  std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now()));
}

// co_await with_timeout(loop, task, d): `task`'s result, unless `d` passes first: then the task
// is stopped (its awaitables end with operation_aborted) and, once it has ended, with_timeout
// throws std::system_error(std::errc::timed_out). A stop request on the awaiting task stops the
// inner one too. The timer runs on `loop`.
template <class T, class Rep, class Period>
Task<T> with_timeout(EventLoop& loop, Task<T> task, std::chrono::duration<Rep, Period> d) {
  struct Shared {
    std::stop_source source;
    std::atomic<bool> expired{false};
  };
  auto shared = std::allocate_shared<Shared>(detail::CachedObjectAllocator<Shared>());
  // Awaited in a statement of its own: GCC 12 miscompiles a co_await inside the initializer of
  // a variable with a destructor (a stop_callback here), freeing a shared_ptr twice.
  std::stop_token parent = co_await current_stop_token();
  auto forward_stop = [shared] { shared->source.request_stop(); };
  std::stop_callback<decltype(forward_stop)> forward(parent, forward_stop);
  ScheduledFuture timer = loop.schedule(d, [shared] {
    shared->expired = true;
    shared->source.request_stop();
  });
  std::exception_ptr error;
  std::optional<detail::NonVoidResult<T>> value;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await with_stop_token(shared->source.get_token(), std::move(task));
      value.emplace();
    } else {
      value.emplace(co_await with_stop_token(shared->source.get_token(), std::move(task)));
    }
  } catch (...) {
    error = std::current_exception();
  }
  timer.cancel();
  if (error) {
    bool timed_out = false;
    if (shared->expired) {
      try {
        std::rethrow_exception(error);
      } catch (const std::system_error& e) {
        timed_out = e.code() == operation_aborted();
      } catch (...) {
      }
    }
    if (timed_out) {
      throw std::system_error(std::make_error_code(std::errc::timed_out), "with_timeout");
    }
    std::rethrow_exception(error);
  }
  if constexpr (std::is_void_v<T>) {
    co_return;
  } else {
    co_return std::move(*value);
  }
}

}  // namespace niox
