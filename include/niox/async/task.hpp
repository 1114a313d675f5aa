// Task<T>: a lazy C++20 coroutine that produces a T (or throws), awaited with co_await.
//
//   Task<std::size_t> copy(...) {
//     auto n = co_await read_some(...);     // any awaitable
//     co_return n;
//   }
//   Task<void> main_task() { auto n = co_await copy(...); }
//   sync_wait(main_task());                 // from main() or a test; never on a loop thread
//   co_spawn(loop, main_task());            // or start it on a loop and forget it
//
// Lazy: calling a coroutine that returns a Task allocates its frame and runs nothing. The body
// starts when the Task is awaited (or handed to sync_wait / co_spawn), on the awaiting thread.
//
// Transfer of control without stack growth: awaiting a Task suspends the awaiter and hands the
// task to the thread's ready queue; its end suspends it and hands the awaiter back. One drain
// loop per thread stack resumes what is ready, so a chain of awaits that complete at once, a
// million in a row or a million deep, runs at a constant stack depth at any optimisation level
// (symmetric transfer through a returned handle would rely on the compiler turning resume()
// into a tail call, which GCC does at -O2 but not at -O0 or under AddressSanitizer):
//
//     drain loop ── resume ──> awaiter ── co_await task: queue task, suspend ──┐
//         ^ ── resume ──> task body ── co_return: queue awaiter, suspend ──────┤
//         └────────────────────────────────────────────────────────────────────┘
//
// Cancellation: every Task carries a std::stop_token, inherited from the Task that awaits it
// unless given with with_stop_token(). Awaitables read it (co_await current_stop_token()
// returns it): a stop request makes the operation they wait on end at once with
// operation_aborted (a std::system_error), on the thread the operation belongs to.
//
// Exceptions: one escaping the body is kept in the promise and rethrown from the awaiter's
// co_await (so it crosses any number of levels). Ownership: the Task owns its frame; destroying
// a Task that has not been awaited destroys the frame (and the captured arguments); a Task is
// move-only and awaited at most once. Frames come from the calling thread's block cache (the
// one behind BufferPool): once warm, starting a coroutine allocates nothing.
#pragma once

#include <niox/async/detail/stop_relay.hpp>
#include <niox/buffer/buffer_pool.hpp>

#include <coroutine>
#include <cstddef>
#include <exception>
#include <new>
#include <optional>
#include <stop_token>
#include <type_traits>
#include <utility>

namespace niox {

template <class T = void>
class Task;

namespace detail {

// Resumes `h` on the calling thread: at once when nothing is being drained on this thread,
// else when the running coroutine suspends (see above). Must be called with `h` suspended.
void resume_soon(std::coroutine_handle<> h);

// Frames of every niox coroutine: from the per-thread block cache, with the size stored
// nowhere (operator delete gets it back).
struct CachedFrame {
  static void* operator new(std::size_t size) { return allocate_cached_object(size); }
  static void operator delete(void* p, std::size_t size) noexcept { free_cached_object(p, size); }
};

struct TaskPromiseBase : CachedFrame {
  std::coroutine_handle<> continuation;  // none: started by hand
  std::exception_ptr error;
  std::stop_token stop;
  bool own_stop = false;  // given by with_stop_token(): not inherited from the awaiter
  StopRelay relay;        // `stop`'s one callback, lent to the operation the task waits on

  struct FinalAwaiter {
    bool await_ready() const noexcept { return false; }
    template <class P>
    void await_suspend(std::coroutine_handle<P> done) noexcept {
      // Read before handing over: the awaiter may destroy this frame as soon as it runs.
      std::coroutine_handle<> next = done.promise().continuation;
      if (next) {
        resume_soon(next);
      }
    }
    void await_resume() const noexcept {}
  };

  std::suspend_always initial_suspend() const noexcept { return {}; }
  FinalAwaiter final_suspend() const noexcept { return {}; }
  void unhandled_exception() noexcept { error = std::current_exception(); }
};

template <class T>
struct TaskPromise : TaskPromiseBase {
  std::optional<T> value;
  Task<T> get_return_object() noexcept;
  template <class U>
  void return_value(U&& v) {
    value.emplace(std::forward<U>(v));
  }
  T take() {
    if (error) {
      std::rethrow_exception(error);
    }
    return std::move(*value);
  }
};

template <>
struct TaskPromise<void> : TaskPromiseBase {
  Task<void> get_return_object() noexcept;
  void return_void() const noexcept {}
  void take() const {
    if (error) {
      std::rethrow_exception(error);
    }
  }
};

}  // namespace detail

template <class T>
class [[nodiscard]] Task {
 public:
  using promise_type = detail::TaskPromise<T>;
  using value_type = T;

  Task() noexcept = default;
  Task(Task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  Task& operator=(Task&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() { reset(); }

  bool valid() const noexcept { return static_cast<bool>(h_); }

  struct Awaiter {
    std::coroutine_handle<promise_type> h;
    bool await_ready() const noexcept { return !h || h.done(); }
    template <class P>
    void await_suspend(std::coroutine_handle<P> awaiting) {
      if constexpr (std::is_base_of_v<detail::TaskPromiseBase, P>) {
        if (!h.promise().own_stop) h.promise().stop = awaiting.promise().stop;
      }
      h.promise().continuation = awaiting;
      detail::resume_soon(h);  // into the task's body, from the drain loop
    }
    T await_resume() { return h.promise().take(); }
  };
  // The Task stays the frame's owner while it is awaited: `co_await make_task()` keeps the
  // temporary alive until the full expression ends, after the awaiter took the result.
  Awaiter operator co_await() & noexcept { return Awaiter{h_}; }
  Awaiter operator co_await() && noexcept { return Awaiter{h_}; }

 private:
  friend struct detail::TaskPromise<T>;
  template <class U>
  friend Task<U> with_stop_token(std::stop_token token, Task<U> task) noexcept;
  explicit Task(std::coroutine_handle<promise_type> h) noexcept : h_(h) {}
  void reset() noexcept {
    if (h_) {
      h_.destroy();
      h_ = {};
    }
  }
  std::coroutine_handle<promise_type> h_;
};

namespace detail {
template <class T>
Task<T> TaskPromise<T>::get_return_object() noexcept {
  return Task<T>(std::coroutine_handle<TaskPromise<T>>::from_promise(*this));
}
inline Task<void> TaskPromise<void>::get_return_object() noexcept {
  return Task<void>(std::coroutine_handle<TaskPromise<void>>::from_promise(*this));
}
// The awaitable reading a task's token: e.g. await_suspend(coroutine_handle<P>) of niox's own
// awaitables; any awaiter may do the same with stop_token_of(handle).
template <class P>
std::stop_token stop_token_of(std::coroutine_handle<P> h) noexcept {
  if constexpr (std::is_base_of_v<TaskPromiseBase, P>) {
    return h.promise().stop;
  } else {
    return {};
  }
}

struct CurrentStopToken {
  std::stop_token token;
  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    token = stop_token_of(h);
    return false;  // never suspends
  }
  std::stop_token await_resume() noexcept { return std::move(token); }
};

}  // namespace detail

// `task`, running with `token` instead of its awaiter's.
template <class T>
Task<T> with_stop_token(std::stop_token token, Task<T> task) noexcept {
  if (task.h_) {
    task.h_.promise().stop = std::move(token);
    task.h_.promise().own_stop = true;
  }
  return task;
}

// co_await current_stop_token(): the running task's token.
inline detail::CurrentStopToken current_stop_token() noexcept { return {}; }

}  // namespace niox
