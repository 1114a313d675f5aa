// Private: the interface between the loop core and a kernel backend.
//
// The core owns operations, their order per descriptor, timers and tasks. A backend only moves
// attempts to the kernel, each as the operation's family (src/loop/ops/) spells it, and
// reports each attempt's result back with LoopCore::on_result() (bytes or -errno); the family
// decides whether to resubmit (short writes) or finish, the core starts the next operation of
// the lane. Results are reported from start()/flush()/wait()/cancel(),
// never by running a handler: handlers run only in the core's completion phase.
#pragma once

#include "loop/operation.hpp"

#include <chrono>
#include <memory>
#include <system_error>

namespace niox::detail {

class LoopCore;

// Internal descriptors the core asks a backend to watch for readability.
enum class InternalFd : unsigned { wake = 1, timer = 2 };

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const noexcept = 0;
  // receive_multishot is a multishot recv into a buffer ring (not readiness and pooled buffers).
  virtual bool multishot_receive() const noexcept { return false; }
  // Hands one attempt of a prepared operation to the backend.
  virtual void start(Operation& op) = 0;
  // Asks for an operation in the backend to stop; its result (-ECANCELED, or the real one if it
  // raced) arrives through on_result, maybe before cancel() returns.
  virtual void cancel(Operation& op) = 0;
  // Every operation of fd has been cancelled; the descriptor is about to be closed (`closing`)
  // or released to its owner.
  virtual void forget_fd(int fd, bool closing) = 0;
  // fd is a socket accept just made (detail::declare_accepted_socket): non-blocking, and its
  // first bytes are likely still on their way.
  virtual void declare_accepted(int /*fd*/) {}
  // Makes every attempt that needs no waiting (epoll speculation, readiness fallbacks).
  virtual void flush() = 0;
  // One kernel entry: submits what is queued, waits up to `timeout` (negative = no limit) for
  // something, and reports what happened.
  virtual void wait(std::chrono::nanoseconds timeout) = 0;
  // Reports readability of an internal descriptor through LoopCore::on_internal().
  virtual void watch_internal(int fd, InternalFd which) = 0;
  // A descriptor readable whenever wait(0) would find something (embedded mode).
  virtual int pollable_fd() = 0;
  // Hands everything prepared to the kernel without waiting (end of an embedded turn: the host
  // sleeps on pollable_fd() next, not in wait()).
  virtual void submit_pending() {}
  // Consumes the readability of pollable_fd() before a turn (embedded mode).
  virtual void clear_pollable() {}
};

std::unique_ptr<Backend> make_epoll_backend(LoopCore& core, const EventLoop::Options& options,
                                            std::error_code& ec);
// Whether a ring can be created here (ec says why not).
bool io_uring_usable(std::error_code& ec);
std::unique_ptr<Backend> make_io_uring_backend(LoopCore& core, const EventLoop::Options& options,
                                               std::error_code& ec);

}  // namespace niox::detail
