// when_any and TaskGroup: structured concurrency over Tasks, with cancellation by stop token.
//
//   auto [index, value] = co_await when_any(std::move(replicas));  // the first to finish wins
//
//   TaskGroup group;                          // a nursery: every child joins before it ends
//   while (running) group.spawn(serve(co_await server.accept()));
//   co_await group.join();                    // rethrows the first failure
//
// when_any starts every task, and when the first one finishes (with a value or an exception)
// stops the others through their stop tokens and waits until they have ended too: no task
// outlives the co_await. The winner's exception is rethrown; the losers' outcomes are dropped.
//
// TaskGroup: spawn() starts a child at once on the calling thread (it runs until its first
// suspension). The first child to fail stops the others (through the group's stop token, which
// children get); join() waits for every child and rethrows that first failure. Children that end
// with operation_aborted after a stop did not fail. A stop on
// the task that awaits join() stops the children too. Every group must be joined before it is
// destroyed (destroying one with children still running terminates the program: those children
// would outlive what they reference).
#pragma once

#include <niox/async/spawn.hpp>
#include <niox/async/task.hpp>

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <system_error>
#include <utility>
#include <vector>

namespace niox {

namespace detail {

template <class T>
struct WhenAnyState {
  std::stop_source stop;
  std::atomic<std::size_t> remaining;
  std::atomic<bool> decided{false};
  std::size_t winner = 0;
  std::optional<NonVoidResult<T>> value;
  std::exception_ptr error;
  std::coroutine_handle<> awaiter;
  explicit WhenAnyState(std::size_t n) noexcept : remaining(n + 1) {}
  void arrive() {
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) resume_soon(awaiter);
  }
};

template <class T>
Detached drive_any(Task<T> task, WhenAnyState<T>& s, std::size_t index) {
  {
    Task<T> t = with_stop_token(s.stop.get_token(), std::move(task));
    try {
      if constexpr (std::is_void_v<T>) {
        co_await t;
        if (!s.decided.exchange(true)) {
          s.winner = index;
          s.value.emplace();
          s.stop.request_stop();
        }
      } else {
        auto v = co_await t;
        if (!s.decided.exchange(true)) {
          s.winner = index;
          s.value.emplace(std::move(v));
          s.stop.request_stop();
        }
      }
    } catch (...) {
      if (!s.decided.exchange(true)) {
        s.winner = index;
        s.error = std::current_exception();
        s.stop.request_stop();
      }
    }
  }
  s.arrive();
}

template <class T>
struct WhenAnyAwaiter {
  WhenAnyState<T>& s;
  std::vector<Task<T>>& tasks;
  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) {
    s.awaiter = h;
    std::stop_token outer = stop_token_of(h);
    if (outer.stop_requested()) s.stop.request_stop();
    for (std::size_t i = 0; i < tasks.size(); ++i) drive_any(std::move(tasks[i]), s, i);
    return s.remaining.fetch_sub(1, std::memory_order_acq_rel) != 1;
  }
  void await_resume() const noexcept {}
};

template <class T>
Task<std::pair<std::size_t, NonVoidResult<T>>> when_any_vector(std::vector<Task<T>> tasks) {
  if (tasks.empty()) {
    throw std::invalid_argument("niox: when_any() of no task");
  }
  WhenAnyState<T> s(tasks.size());
  std::stop_token outer = co_await current_stop_token();
  auto forward_stop = [&s] { s.stop.request_stop(); };
  std::stop_callback<decltype(forward_stop)> forward(outer, forward_stop);
  co_await WhenAnyAwaiter<T>{s, tasks};
  if (s.error) std::rethrow_exception(s.error);
  co_return std::pair<std::size_t, NonVoidResult<T>>(s.winner, std::move(*s.value));
}

}  // namespace detail

// The first of `tasks` to finish: its index and value (std::monostate for Task<void>), or its
// exception. The others are stopped and have ended when this returns. Throws
// std::invalid_argument for an empty vector.
template <class T>
Task<std::pair<std::size_t, detail::NonVoidResult<T>>> when_any(std::vector<Task<T>> tasks) {
  return detail::when_any_vector(std::move(tasks));
}

class TaskGroup {
 public:
  TaskGroup() = default;
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;
  ~TaskGroup() {
    if (running_.load(std::memory_order_acquire) != 0) {
      std::terminate();  // children still running: join() was not awaited
    }
  }

  // Starts `child` now, on the calling thread, with the group's stop token.
  void spawn(Task<void> child) {
    running_.fetch_add(1, std::memory_order_acq_rel);
    drive(with_stop_token(stop_.get_token(), std::move(child)));
  }
  // Stops every child (their awaitables end with operation_aborted); join() still waits.
  void request_stop() noexcept { stop_.request_stop(); }
  std::stop_token stop_token() const noexcept { return stop_.get_token(); }
  std::size_t running() const noexcept { return running_.load(std::memory_order_acquire); }

  // co_await join(): until every child has ended; rethrows the first failure (a child stopped
  // by that failure does not count as one).
  Task<void> join() {
    std::stop_token outer = co_await current_stop_token();
    auto forward_stop = [this] { stop_.request_stop(); };
    std::stop_callback<decltype(forward_stop)> forward(outer, forward_stop);
    co_await JoinAwaiter{*this};
    std::exception_ptr e;
    {
      std::lock_guard lock(mutex_);
      e = std::exchange(first_error_, nullptr);
    }
    if (e) std::rethrow_exception(e);
  }

 private:
  struct JoinAwaiter {
    TaskGroup& g;
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> h) {
      std::lock_guard lock(g.mutex_);
      if (g.running_.load(std::memory_order_acquire) == 0) return false;
      g.joiner_ = h;
      return true;
    }
    void await_resume() const noexcept {}
  };

  // The first failure stops the rest. A child that ended with operation_aborted because the
  // group was stopped did not fail: it was told to stop.
  void record_failure(std::exception_ptr e) {
    if (stop_.stop_requested()) {
      try {
        std::rethrow_exception(e);
      } catch (const std::system_error& se) {
        if (se.code() == operation_aborted()) return;
      } catch (...) {
      }
    }
    std::lock_guard lock(mutex_);
    if (!first_error_) {
      first_error_ = std::move(e);
      stop_.request_stop();
    }
  }

  detail::Detached drive(Task<void> child) {
    {
      Task<void> t = std::move(child);
      try {
        co_await t;
      } catch (...) {
        record_failure(std::current_exception());
      }
    }
    std::coroutine_handle<> joiner;
    {
      std::lock_guard lock(mutex_);
      if (running_.fetch_sub(1, std::memory_order_acq_rel) == 1)
        joiner = std::exchange(joiner_, {});
    }
    if (joiner) detail::resume_soon(joiner);
  }

  std::stop_source stop_;
  std::atomic<std::size_t> running_{0};
  std::mutex mutex_;
  std::exception_ptr first_error_;
  std::coroutine_handle<> joiner_;
};

}  // namespace niox
