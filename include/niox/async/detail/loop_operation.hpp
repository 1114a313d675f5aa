// Private: the one awaitable behind every asynchronous channel operation. It starts a loop
// operation when the coroutine suspends and resumes the coroutine from the operation's
// handler.
//
//   coroutine ── co_await ──> await_suspend: start on the loop (or hand the start to it)
//       ^                                  │ handler(ec, n) on the loop thread
//       └──── resume_soon ── claim ───────┘
//   stop request (any thread) ── execute ──> loop.cancel(op) ──> handler(operation_aborted)
//   frame destroyed while suspended ── claim ──> cancel; the late handler finds it claimed
//
// A stop request reaches the operation through the task's StopRelay (one stop callback per
// task, armed with this operation while it is pending; see stop_relay.hpp). The State is
// shared by the awaitable, the handler and a stop's cancel, and comes from the block cache (no
// heap once warm). Whoever claims it first decides: the handler resumes the
// coroutine, the destructor only cancels. The operation holds its own copies of the buffers
// (ByteBuffer copies share memory), so the memory stays alive until the kernel has let go of
// it even when the frame is gone. A receive's or a write's Start first tries to finish at once
// (now()), on the loop thread: then nothing above happens.
#pragma once

#include <niox/async/detail/stop_relay.hpp>
#include <niox/async/task.hpp>
#include <niox/base/file_descriptor.hpp>
#include <niox/buffer/buffer_pool.hpp>
#include <niox/channels/transfer_path.hpp>
#include <niox/loop/errors.hpp>
#include <niox/loop/event_loop.hpp>
#include <niox/loop/executor.hpp>

#include <atomic>
#include <coroutine>
#include <memory>
#include <optional>
#include <stop_token>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

namespace niox::detail {

struct LoopOpState {
  std::atomic<bool> claimed{false};
  std::atomic<bool> cancelled{false};  // a cancel was asked for, maybe before the start ran
  std::coroutine_handle<> h;
  EventLoop* loop = nullptr;
  std::shared_ptr<ExecutorLink> link;  // outlives the loop: a late stop request finds it gone
  OperationHandle op;                  // loop thread only; names nothing once completed
  std::error_code ec;
  std::size_t n = 0;
  FileDescriptor fd;                       // accept: the new connection
  TransferPath path = TransferPath::copy;  // transfers: the kernel path that moved the bytes
  ByteBuffer* into = nullptr;              // receive: the awaiter's slot for the buffer
  // The operation outlives this wait (a channel's receive stream): a cancel ends the wait,
  // completing it with operation_aborted, and leaves the operation running. Loop thread.
  bool detach = false;
  std::shared_ptr<LoopOpState> next;  // the stream's next wait, queued behind this one

  // From the operation's handler, on the loop thread.
  void complete(std::error_code e, std::size_t count) noexcept {
    ec = e;
    n = count;
    if (!claimed.exchange(true, std::memory_order_acq_rel)) resume_soon(h);
  }
  // A receive's bytes: b goes into the awaiter only by whoever claims it, and stays the caller's
  // otherwise (the wait ended meanwhile; the bytes are kept for the next one).
  bool offer(std::size_t count, ByteBuffer& b) noexcept {
    if (claimed.exchange(true, std::memory_order_acq_rel)) return false;
    ec.clear();
    n = count;
    if (into) *into = std::move(b);
    resume_soon(h);
    return true;
  }
  // Cancels the operation from any thread: at once on the loop's (a timeout's timer, a frame
  // destroyed there), else through the loop's queue; a no-op once the operation completed (its
  // handle then names nothing) or the loop is gone. `cancelled` covers a start still queued.
  static void cancel(const std::shared_ptr<LoopOpState>& st) noexcept {
    st->cancelled.store(true, std::memory_order_release);
    if (st->link->in_event_loop() && !st->detach) {
      st->loop->cancel(st->op);
      return;
    }
    try {
      // A detached wait ends from the loop's queue, never inside this call: the stop request
      // that called it may be running on the coroutine's own thread, inside its stop relay.
      Runnable r([st] {
        if (st->detach) {
          st->complete(operation_aborted(), 0);
        } else {
          st->loop->cancel(st->op);
        }
      });
      st->link->execute(r);
    } catch (...) {
      // Out of memory: the operation runs to its natural end instead.
    }
  }
};

// Start: a callable `OperationHandle(EventLoop&, const std::shared_ptr<LoopOpState>&)` that
// starts the loop operation, whose handler calls state->complete(ec, n) (and may fill fd).
// Finish: `R(LoopOpState&)` turns the outcome into the awaiter's value; it runs on the
// resumed coroutine's thread and throws, or sets *ec_out, for an error.
template <class R, class Start, class Finish>
class LoopOperation {
 public:
  LoopOperation(EventLoop& loop, const char* what, std::error_code* ec_out, Start start,
                Finish finish)
      : loop_(&loop),
        what_(what),
        ec_out_(ec_out),
        start_(std::move(start)),
        finish_(std::move(finish)) {}
  LoopOperation(const LoopOperation&) = delete;
  LoopOperation& operator=(const LoopOperation&) = delete;
  ~LoopOperation() {
    disarm();  // waits for a stop's cancel running on another thread
    // Claimed already (the usual case: the handler resumed the coroutine) needs no atomic write.
    if (state_ && !state_->claimed.load(std::memory_order_acquire) &&
        !state_->claimed.exchange(true, std::memory_order_acq_rel)) {
      LoopOpState::cancel(state_);
    }
  }

  // A Start that can often finish without waiting (a receive whose bytes arrived already, a
  // write the socket takes at once) has now(loop), tried first on the loop thread: when it
  // finishes there the coroutine does not suspend, and no state is made. It then says so in
  // its finished_now, and its result_now() is the co_await's value.
  bool await_ready() {
    if constexpr (requires { start_.now(*loop_); }) {
      return loop_->in_event_loop() && start_.now(*loop_);
    }
    return false;
  }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) {
    if (!loop_->link()->alive()) return false;  // the loop is gone: as if it closed
    state_ = std::allocate_shared<LoopOpState>(CachedObjectAllocator<LoopOpState>());
    state_->h = h;
    if constexpr (requires { start_.got; }) state_->into = &start_.got;
    state_->loop = loop_;
    state_->link = loop_->link();
    if (!relay_.arm(h.promise(), &on_stop, &state_)) {
      state_.reset();  // stopped already: no state, aborted
      return false;
    }
    if (loop_->in_event_loop()) {
      // A stop that came once the relay was armed cancelled nothing yet.
      if (state_->cancelled.load(std::memory_order_acquire)) {
        disarm();
        state_.reset();
        return false;
      }
      state_->op = start_(*loop_, state_);
      return true;
    }
    // From another thread the operation starts on the loop, and the coroutine continues there.
    // A copy of the Start: a Finish that reads the Start (what it holds, what it did now()) still
    // finds it whole in this awaiter.
    Runnable r([st = state_, start = start_]() mutable {
      if (st->claimed.load(std::memory_order_acquire)) return;
      // A stop request that came before this start: its cancel found nothing to cancel.
      if (st->cancelled.load(std::memory_order_acquire))
        return st->complete(operation_aborted(), 0);
      st->op = start(*st->loop, st);
    });
    if (state_->link->execute(r)) return true;  // the loop may already run (and free) this frame
    disarm();
    state_.reset();  // the loop is gone: as if it closed
    return false;
  }
  R await_resume() {
    disarm();
    if (!state_) {
      if constexpr (requires { start_.result_now(); }) {
        if (start_.finished_now) {  // in await_ready: no state to read, no error
          if (ec_out_) ec_out_->clear();
          return start_.result_now();
        }
      }
      LoopOpState none;
      none.ec = operation_aborted();  // ended before it started
      return fail_or(none);
    }
    return fail_or(*state_);
  }

 private:
  // The relay's target is state_, which is reset only after disarm().
  static void on_stop(void* target) noexcept {
    LoopOpState::cancel(*static_cast<std::shared_ptr<LoopOpState>*>(target));
  }
  void disarm() noexcept { relay_.disarm(); }

  R fail_or(LoopOpState& s) {
    if (s.ec && s.ec != LoopError::end_of_file) {
      if (!ec_out_) throw std::system_error(s.ec, what_);
      *ec_out_ = s.ec;
    } else if (ec_out_) {
      ec_out_->clear();
    }
    if constexpr (std::is_invocable_v<Finish&, LoopOpState&, Start&>) {
      return finish_(s, start_);
    } else {
      return finish_(s);
    }
  }

  // This object sits in the coroutine's frame while the operation is pending, next to the
  // frame's other awaiters (the echo server's receive and write), so every member counts
  // towards what an idle connection costs: no error slot (no state after await_suspend means
  // the operation ended before it started, aborted), the name as one pointer, the task's stop
  // relay as one pointer, and no room for a stateless Finish.
  EventLoop* loop_;
  const char* what_;
  std::error_code* ec_out_;
  Start start_;
  [[no_unique_address]] Finish finish_;
  std::shared_ptr<LoopOpState> state_;
  StopRelayLease relay_;  // armed with &state_ while the operation may be pending
};

template <class R, class Start, class Finish>
LoopOperation<R, Start, Finish> loop_operation(EventLoop& loop, const char* what,
                                               std::error_code* ec, Start start, Finish finish) {
  return {loop, what, ec, std::move(start), std::move(finish)};
}

}  // namespace niox::detail
