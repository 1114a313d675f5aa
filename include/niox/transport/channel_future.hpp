// ChannelFuture / ChannelPromise: the completion of one asynchronous channel operation
// (write, flush-completion, close, shutdown_output). Netty's ChannelPromise, reduced to what a
// C++ user needs: an outcome (success or an std::error_code) and listeners.
//
//  - A promise completes exactly once: set_success()/set_failure() on a done promise throw
//    std::logic_error, try_success()/try_failure() return false.
//  - Listeners never run inside the call that completed the promise, nor inside add_listener():
//    they are handed to the promise's Executor (the channel's loop), which runs them in order.
//    So a listener may freely write, close or add listeners again.
//  - Lifetime: a listener may run after the channel is gone. A channel that closes lets go of
//    itself through its loop too, and that can come before the listener's turn: a write that
//    completed as the peer closed, say. A listener that uses a handler or a channel holds it
//    (a shared_ptr, or a weak_ptr it locks), never a plain pointer.
//  - Thread safety: completing and adding listeners may happen on different threads.
//  - Once the executor is gone (its EventLoopGroup shut down), listeners run on the thread
//    that completes the promise or adds them: there is no other thread left to run them on.
//  - sync() waits for the outcome on a thread that is not an event loop's; on a loop thread it
//    throws BlockingOperationException instead of freezing the loop.
//  - In a coroutine, `co_await future` waits without blocking: it resumes on the channel's loop
//    thread (as a listener does) and throws std::system_error on failure; `co_await
//    future.outcome()` returns the std::error_code instead.
//  - A default-constructed ChannelPromise is the "void promise": completing it does nothing and
//    costs nothing; use it on hot paths where nobody waits.
#pragma once

#include <niox/base/detail/spin_lock.hpp>
#include <niox/buffer/buffer_pool.hpp>
#include <niox/loop/executor.hpp>

#include <coroutine>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <utility>
#include <vector>

namespace niox {

namespace detail {
// A listener: move-only; captures of up to 48 bytes (a shared_ptr, a promise and a pointer)
// are stored in the state itself, so adding one allocates nothing.
using PromiseListener = UniqueFunction<void(const std::error_code&), 48, 8>;

// Allocated from the per-thread block cache (CachedObjectAllocator): no malloc per write once
// warm.
struct PromiseState {
  using Listener = PromiseListener;
  explicit PromiseState(std::shared_ptr<ExecutorLink> l) noexcept : link(std::move(l)) {}
  std::shared_ptr<ExecutorLink> link;
  SpinLock lock;  // over done, cause and the listeners
  bool done = false;
  std::error_code cause;
  // The first listener kept apart: most promises get one at most, and so need no vector. The
  // others' vector is behind a pointer so that the state fits the cache's 128-byte class
  // (a channel keeps one for its close future once asked for it).
  Listener first;
  std::unique_ptr<std::vector<Listener>> more;

  void add(Listener l) {
    if (!first) {
      first = std::move(l);
    } else {
      if (!more) more = std::make_unique<std::vector<Listener>>();
      more->push_back(std::move(l));
    }
  }
  // On the executor, once done: the listeners in the order they were added. Nothing adds to
  // them any more (add_listener runs a listener at once after completion).
  void notify() {
    auto f = std::move(first);
    auto m = std::move(more);
    f(cause);
    if (m) {
      for (auto& l : *m) {
        l(cause);
      }
    }
  }
  // Runs `task` on the executor, or here when the executor is gone.
  void run_on_executor(Runnable task) {
    if (!link->execute(task)) {
      task();
    }
  }
};
// The state is allocated from the block cache's 128-byte class, its control block included.
static_assert(sizeof(PromiseState) + 16 <= 128);
}  // namespace detail

class ChannelFuture {
 public:
  // Any callable taking (const std::error_code&); move-only callables are fine. Captures of up
  // to 48 bytes are stored without an allocation.
  using Listener = detail::PromiseListener;

  ChannelFuture() = default;

  // False for the void promise.
  bool valid() const noexcept { return state_ != nullptr; }
  bool is_done() const {
    if (!state_) {
      return false;
    }
    std::lock_guard held(state_->lock);
    return state_->done;
  }
  bool is_success() const {
    if (!state_) {
      return false;
    }
    std::lock_guard held(state_->lock);
    return state_->done && !state_->cause;
  }
  // The failure, or an empty code while pending or after success.
  std::error_code cause() const {
    if (!state_) {
      return {};
    }
    std::lock_guard held(state_->lock);
    return state_->cause;
  }

  // Runs `listener(cause)` on the executor once the operation completed (or soon, if it
  // already has). Ignored on the void promise.
  ChannelFuture& add_listener(Listener listener) {
    if (!state_) {
      return *this;
    }
    std::unique_lock held(state_->lock);
    if (!state_->done) {
      state_->add(std::move(listener));
      return *this;
    }
    auto ec = state_->cause;
    held.unlock();
    state_->run_on_executor([l = std::move(listener), ec]() mutable { l(ec); });
    return *this;
  }

  // Netty's syncUninterruptibly: blocks the calling thread until the operation completed;
  // throws std::system_error with its failure. The void promise returns at once. Throws
  // BlockingOperationException (in both forms: it is a programming error) inside a running
  // EventLoop (a handler, a task), also when the outcome is already known, and when only the
  // calling thread could complete a pending operation (an EmbeddedChannel's).
  const ChannelFuture& sync() const;
  // The same, returning the failure in `ec` (cleared on success).
  const ChannelFuture& sync(std::error_code& ec) const;

  // Awaiting the outcome in a coroutine (see the top of this file). The void promise completes
  // at once with success.
  class Awaiter;
  Awaiter operator co_await() const noexcept;
  Awaiter outcome() const noexcept;

  friend bool operator==(const ChannelFuture& a, const ChannelFuture& b) noexcept {
    return a.state_ == b.state_;
  }

 protected:
  explicit ChannelFuture(std::shared_ptr<detail::PromiseState> s) noexcept : state_(std::move(s)) {}
  std::shared_ptr<detail::PromiseState> state_;
};

class ChannelFuture::Awaiter {
 public:
  Awaiter(ChannelFuture f, bool throws) noexcept : f_(std::move(f)), throws_(throws) {}
  bool await_ready() const noexcept { return !f_.valid(); }
  void await_suspend(std::coroutine_handle<> h) {
    // The listener runs on the loop (later, also when already done); it resumes the coroutine
    // there. Nothing here touches this awaiter once the listener is added.
    f_.add_listener([this, h](const std::error_code& ec) {
      ec_ = ec;
      h.resume();
    });
  }
  std::error_code await_resume() const {
    if (throws_ && ec_) {
      throw std::system_error(ec_);
    }
    return ec_;
  }

 private:
  ChannelFuture f_;
  std::error_code ec_;
  bool throws_;
};
inline ChannelFuture::Awaiter ChannelFuture::operator co_await() const noexcept {
  return Awaiter(*this, true);
}
inline ChannelFuture::Awaiter ChannelFuture::outcome() const noexcept {
  return Awaiter(*this, false);
}

class ChannelPromise : public ChannelFuture {
 public:
  // The void promise.
  ChannelPromise() = default;
  // A fresh promise whose listeners run on `executor` (which must outlive the listeners' run).
  explicit ChannelPromise(Executor& executor) : ChannelPromise(executor.link()) {}
  explicit ChannelPromise(std::shared_ptr<detail::ExecutorLink> link)
      : ChannelFuture(std::allocate_shared<detail::PromiseState>(
            detail::CachedObjectAllocator<detail::PromiseState>(), std::move(link))) {}

  ChannelFuture future() const noexcept { return *this; }

  bool try_success() { return complete({}); }
  bool try_failure(std::error_code cause) {
    return complete(cause ? cause : std::make_error_code(std::errc::io_error));
  }
  void set_success() {
    if (state_ && !try_success()) {
      throw std::logic_error("ChannelPromise completed twice");
    }
  }
  void set_failure(std::error_code cause) {
    if (state_ && !try_failure(cause)) {
      throw std::logic_error("ChannelPromise completed twice");
    }
  }

 private:
  friend class Channel;  // makes its close promise on first use, over a state it keeps
  explicit ChannelPromise(std::shared_ptr<detail::PromiseState> state) noexcept
      : ChannelFuture(std::move(state)) {}

  bool complete(std::error_code cause) {
    if (!state_) {
      return true;
    }
    bool listened;
    {
      std::lock_guard held(state_->lock);
      if (state_->done) {
        return false;
      }
      state_->done = true;
      state_->cause = cause;
      listened = static_cast<bool>(state_->first);
    }
    if (listened) {
      state_->run_on_executor([s = state_] { s->notify(); });
    }
    return true;
  }
};

}  // namespace niox
