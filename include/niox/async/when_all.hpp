// when_all: runs Tasks side by side and resumes the awaiter once every one has finished.
//
//   auto [a, b] = co_await when_all(fetch("a"), fetch("b"));   // Task<std::tuple<A, B>>
//   std::vector<Reply> r = co_await when_all(std::move(tasks)); // Task<std::vector<T>>
//
// The tasks start one after another on the awaiting thread and run until their first
// suspension, so their I/O is in flight at the same time; each may finish on whatever thread
// resumed it, and the awaiter resumes on the thread of the one that finished last. A void task
// contributes std::monostate. If tasks throw, the awaiter rethrows the first exception once
// every task has finished (none is abandoned mid-flight).
#pragma once

#include <niox/async/spawn.hpp>
#include <niox/async/task.hpp>

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <mutex>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace niox {

namespace detail {

template <class T>
using NonVoid = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

// Counts the children still running, plus one for the awaiter's own start-up: whoever brings it
// to zero resumes the awaiter (the awaiter itself, when every child finished while starting).
struct WhenAllLatch {
  std::atomic<std::size_t> remaining;
  std::coroutine_handle<> awaiter;
  std::mutex error_mutex;
  std::exception_ptr first_error;

  explicit WhenAllLatch(std::size_t children) noexcept : remaining(children + 1) {}
  void fail(std::exception_ptr e) {
    std::lock_guard lock(error_mutex);
    if (!first_error) first_error = std::move(e);
  }
  // A child finished; the last one resumes the awaiter.
  void arrive() {
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) resume_soon(awaiter);
  }
};

template <class T, class Store>
Detached drive_child(Task<T> task, WhenAllLatch& latch, Store store) {
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(task);
      store(std::monostate{});
    } else {
      store(co_await std::move(task));
    }
  } catch (...) {
    latch.fail(std::current_exception());
  }
  latch.arrive();
}

// Awaited by when_all's own coroutine: starts the children, suspends until the latch opens.
template <class Start>
struct WhenAllAwaiter {
  WhenAllLatch& latch;
  Start start;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) {
    latch.awaiter = h;
    start();
    // The awaiter's own count: if every child already finished, do not suspend at all.
    return latch.remaining.fetch_sub(1, std::memory_order_acq_rel) != 1;
  }
  void await_resume() const {
    if (latch.first_error) std::rethrow_exception(latch.first_error);
  }
};

template <class... Ts>
Task<std::tuple<NonVoid<Ts>...>> when_all_tuple(Task<Ts>... tasks) {
  WhenAllLatch latch(sizeof...(Ts));
  std::tuple<std::optional<NonVoid<Ts>>...> results;
  auto start = [&] {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (drive_child(
           std::move(tasks), latch,
           [&r = std::get<I>(results)](auto&& v) { r.emplace(std::forward<decltype(v)>(v)); }),
       ...);
    }
    (std::index_sequence_for<Ts...>{});
  };
  // A named awaiter, not a temporary: GCC names a frame's temporaries by a number private to
  // each file, so two files' instances of one template would differ to LTO's ODR check.
  WhenAllAwaiter<decltype(start)> all{latch, start};
  co_await all;
  co_return std::apply([](auto&... r) { return std::tuple<NonVoid<Ts>...>(std::move(*r)...); },
                       results);
}

template <class T>
Task<std::vector<NonVoid<T>>> when_all_vector(std::vector<Task<T>> tasks) {
  WhenAllLatch latch(tasks.size());
  std::vector<std::optional<NonVoid<T>>> results(tasks.size());
  auto start = [&] {
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      drive_child(std::move(tasks[i]), latch,
                  [&r = results[i]](auto&& v) { r.emplace(std::forward<decltype(v)>(v)); });
    }
  };
  WhenAllAwaiter<decltype(start)> all{latch, start};  // named: as when_all_tuple's
  co_await all;
  std::vector<NonVoid<T>> out;
  out.reserve(results.size());
  for (auto& r : results) out.push_back(std::move(*r));
  co_return out;
}

}  // namespace detail

template <class... Ts>
Task<std::tuple<detail::NonVoid<Ts>...>> when_all(Task<Ts>... tasks) {
  return detail::when_all_tuple(std::move(tasks)...);
}

template <class T>
Task<std::vector<detail::NonVoid<T>>> when_all(std::vector<Task<T>> tasks) {
  return detail::when_all_vector(std::move(tasks));
}

}  // namespace niox
