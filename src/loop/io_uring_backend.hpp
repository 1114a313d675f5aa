// Private: the io_uring backend (liburing); the SQE of each operation is its family's
// (src/loop/ops/), the ring is this file's.
//
// Setup: SINGLE_ISSUER|DEFER_TASKRUN where the kernel has them (the ring starts disabled and is
// enabled by the first kernel entry, so the issuer is the loop thread, wherever the loop was
// built), COOP_TASKRUN|TASKRUN_FLAG otherwise, plain last; never SQPOLL. One
// io_uring_submit_and_wait_timeout per loop turn. A full SQ is submitted early; when even that
// gives no entry the operation waits in a backlog for the next turn. CQ overflow: the kernel
// keeps the overflowed CQEs (FEAT_NODROP) and the reaper flushes them with get_events until
// none remain. Opcodes are probed; an operation without its opcode (and the transfers, which have
// none: the transfer engine, see src/loop/ops/transfer.cpp) runs as a readiness POLL_ADD
// followed by one non-blocking syscall. Receives take their buffers from a provided buffer ring
// (loop/buffer_ring.hpp) when the kernel has them: a socket that waits holds none; a
// receive_multishot stays armed there as one multishot recv, each CQE one ring buffer.
#pragma once

#include "loop/backend.hpp"
#include "loop/buffer_ring.hpp"
#include "loop/loop_core.hpp"
#include "loop/ops/family.hpp"

#include <string_view>

#include <liburing.h>

namespace niox::detail {

class IoUringBackend final : public Backend {
 public:
  IoUringBackend(LoopCore& core, io_uring& ring, unsigned setup_flags, bool readiness_only,
                 unsigned receive_ring_entries, unsigned receive_ring_per_connection,
                 bool multishot_receive);
  ~IoUringBackend() override;

  BackendKind kind() const noexcept override { return BackendKind::io_uring; }
  bool multishot_receive() const noexcept override { return multishot_ && recv_ring_; }
  void start(Operation& op) override;
  void cancel(Operation& op) override;
  void forget_fd(int fd, bool closing) override;
  void flush() override;
  void wait(std::chrono::nanoseconds timeout) override;
  void watch_internal(int fd, InternalFd which) override;
  int pollable_fd() override;
  void clear_pollable() override;
  void submit_pending() override;

 private:
  io_uring_sqe* get_sqe();
  void submit_now();
  void ensure_enabled();
  // The SQE of the operation's next attempt; false: the ring has no opcode for it.
  bool fill(Operation& op, io_uring_sqe& sqe);
  // Before a kernel entry: the buffers other threads released go back to the receive ring.
  void refill_ring() noexcept;
  bool prep(Operation& op);  // false: no SQE, parked in the backlog
  bool queue(Operation& op, const io_uring_sqe& prepared);
  bool arm_poll(Operation& op);
  // A receive on a drained socket that the buffer ring cannot serve (no ring, or too few
  // buffers left): a recv SQE would hold a pooled buffer for as long as the socket stays quiet,
  // so it waits for readiness instead and its syscall attempt takes the buffer when bytes are
  // there. An idle connection then holds no receive buffer with or without the ring.
  bool waits_without_buffer(Operation& op);
  // A bulk stream: the receive asks for more than a ring buffer holds, and the descriptor's
  // last read took at least a ring buffer's worth. Its next read goes to a pooled buffer of
  // the size asked, so all that waits comes in one recv.
  bool bulk_stream(const Operation& op) const;
  // Whether a receive_multishot's next attempt is a multishot recv into the ring: not when the
  // ring is absent or low (a quarter kept, as for receive), the descriptor already holds its
  // bound of ring buffers, or it is a bulk stream. Otherwise the attempt is marked no_ring:
  // readiness, then a recv into a pooled buffer (of a ring buffer's size, small_read, unless
  // a bulk stream), and the re-arm after it asks again.
  bool ring_serves_multishot(Operation& op);
  // Asks the kernel to stop a multishot receive: one over its bound of ring buffers, or one on
  // a bulk stream. Its last CQE (-ECANCELED while the operation is not being cancelled) re-arms
  // it.
  void stop_multishot(Operation& op, std::atomic<std::uint64_t>& counter);
  // Asks the kernel to cancel the request tagged `target`; queued while the SQ is full.
  void submit_cancel(std::uint64_t target);
  bool arm_internal(unsigned which);
  void reap();
  void handle(std::uint64_t user_data, int res, unsigned flags);
  // A zero-copy write this ring or socket cannot send so goes out plainly from here on: counted,
  // and the first one of the process reported through the log sink.
  void zero_copy_fallback(Operation& op, std::string_view why);

  LoopCore& core_;
  io_uring ring_;
  bool enabled_;
  bool readiness_only_;
  bool has_op_[IORING_OP_LAST + 1] = {};
  std::uint16_t refused_ioprio_[IORING_OP_LAST + 1] = {};  // optional flags the kernel refused
  OpList sync_ready_, backlog_;
  std::vector<std::uint64_t> pending_cancels_;
  int internal_fd_[3] = {-1, -1, -1};
  std::uint64_t internal_buf_[3] = {};
  bool internal_armed_[3] = {};
  FileDescriptor notify_fd_;  // embedded mode; closed after the ring lets go of it
  std::unique_ptr<BufferRing>
      recv_ring_;                     // receive()'s buffers; unregistered before the ring exits
  bool multishot_ = false;            // Options::multishot_receive
  unsigned ring_per_connection_ = 1;  // Options::receive_ring_per_connection, clamped
  // A cancel that finds its operation posts no CQE of its own (5.17+): the operation's says it.
  unsigned cancel_sqe_flags_ = 0;
};

}  // namespace niox::detail
