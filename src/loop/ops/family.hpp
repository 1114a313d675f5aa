// Private: an operation family as the core and both backends see it: what it waits for, the
// io_uring SQE of one attempt, the non-blocking syscall of one epoll attempt, and what its
// result means. Each family is written once, in its file in src/loop/ops/; a new operation is
// its OpKind and starter in event_loop.hpp, its table in its file and its row in family_of().
#pragma once

#include "loop/loop_core.hpp"
#include "loop/operation.hpp"

#include <niox/buffer/gather.hpp>

#include <algorithm>
#include <cerrno>

#include <liburing.h>
#include <poll.h>

namespace niox::detail {

// The io_uring offset of "the descriptor's current position".
inline constexpr std::uint64_t no_offset = ~std::uint64_t{0};

// Which operations of a family carry an OpSide block.
enum class SideUse : std::uint8_t { never, many_buffers, always };

struct OpFamily {
  Lane lane = Lane::none;
  SideUse side = SideUse::never;
  int descriptors = 1;            // 0: a timer; 2: in and out, and it belongs to out
  bool belongs_to_input = false;  // of two descriptors, it is the input's (a stream it reads)
  bool fills_buffers = false;     // read-only buffers are refused at start
  bool multishot = false;         // a result does not end it: it stays with the backend
  bool zero_ends = false;         // multishot: a result of 0 is its end (end of stream)
  bool keeps_blocking = false;    // regular files at an offset: their flags are left alone
  // Makes the next attempt ready (iovecs, msghdr); false: nothing left to move, it is done.
  bool (*prepare)(LoopCore&, Operation&) = nullptr;
  // The descriptor and readiness a blocked attempt waits for.
  pollfd (*wait_for)(const Operation&) = nullptr;
  // epoll: the readiness (POLLIN or POLLOUT) the descriptor's last edges must show for an
  // attempt to be worth its syscall; 0: always try.
  int (*edge)(const Operation&) = nullptr;
  // Fills the SQE of one attempt; its ioprio flags are optional (multishot accept, recv's
  // POLL_FIRST). nullptr: io_uring has no opcode for it; like one whose opcode the ring lacks,
  // it runs as a readiness poll and then attempt().
  void (*sqe)(io_uring_sqe&, Operation&) = nullptr;
  // io_uring with a provided buffer ring: the SQE of an attempt whose buffer the kernel picks
  // from `group` when bytes arrive, at most `max` bytes. nullptr: the family brings its own.
  void (*sqe_select)(io_uring_sqe&, Operation&, std::uint16_t group, std::size_t max) = nullptr;
  // One non-blocking syscall (-1 with errno).
  long (*attempt)(Operation&) = nullptr;
  // The result of an attempt (bytes, a value or -errno; `more`: a multishot stays armed):
  // finishes it, starts the next attempt, or hands an interim result over.
  void (*result)(LoopCore&, Operation&, long res, bool more) = nullptr;
  // Runs the handlers due before the final one (a connection, a periodic tick); how many.
  std::size_t (*interim)(LoopCore&, Operation&) = nullptr;
};

extern const OpFamily read_family, receive_family, receive_multishot_family, write_family,
    accept_family, accept_multishot_family, connect_family, recvmsg_family, sendmsg_family,
    poll_family, read_at_family, write_at_family, transfer_to_family, transfer_from_family,
    timer_family;

inline const OpFamily& family_of(OpKind kind) noexcept {
  static constexpr const OpFamily* by_kind[] = {
      // OpKind's order
      &read_family,        &receive_family,       &receive_multishot_family,
      &write_family,       &accept_family,        &accept_multishot_family,
      &connect_family,     &recvmsg_family,       &sendmsg_family,
      &poll_family,        &read_at_family,       &write_at_family,
      &transfer_to_family, &transfer_from_family, &timer_family,
  };
  static_assert(std::size(by_kind) == static_cast<std::size_t>(OpKind::timer) + 1);
  return *by_kind[static_cast<std::size_t>(kind)];
}

// One attempt through the family's syscall: its result or -errno (-EAGAIN when it would
// block). EINTR is retried.
inline long attempt_sync(Operation& op) noexcept {
  for (;;) {
    long r = op.family->attempt(op);
    if (r >= 0) return r;
    if (errno == EINTR) continue;
    return errno == EWOULDBLOCK ? -EAGAIN : -errno;
  }
}

inline std::error_code errno_code(long neg) noexcept {
  return {static_cast<int>(-neg), std::generic_category()};
}
// What the handler is told: aborted once it was cancelled, whatever result raced the cancel.
inline std::error_code result_code(const Operation& op, long res) noexcept {
  if (op.state == OpState::cancelling || res == -ECANCELED) return operation_aborted();
  return res < 0 ? errno_code(res) : std::error_code{};
}

inline pollfd wait_in(const Operation& op) noexcept { return {op.fd, POLLIN, 0}; }
inline pollfd wait_out(const Operation& op) noexcept { return {op.fd, POLLOUT, 0}; }
inline int edge_in(const Operation&) noexcept { return POLLIN; }
inline int edge_out(const Operation&) noexcept { return POLLOUT; }

// The result is the operation's end (a family's `result` as it is, or its last step).
inline void finish_with(LoopCore& core, Operation& op, long res, bool = false) noexcept {
  core.finish(&op, result_code(op, res));
}

// The buffer rules of the families that move bytes. Iovecs (and a msghdr over them) for the
// buffers' remaining bytes or room; false when there are none.
inline bool prepare_iovecs(LoopCore& core, Operation& op, bool reading) {
  std::size_t want = std::min(op.bufs.size(), max_iovecs_per_call);
  if (want <= 1) {
    op.iov_in_side = false;
  } else {
    std::vector<iovec>& room = op.side->iov;  // many buffers: the family has its side block
    if (room.size() < want) room.resize(want);
    op.iov_in_side = true;
  }
  std::span<iovec> out(op.iov(), want);
  op.iovcnt =
      static_cast<int>(reading ? scatter_iovecs(op.bufs, out) : gather_iovecs(op.bufs, out));
  if (!reading && op.iovcnt > 1) {
    AtomicCounters::add(core.stats().gathering_writes, 1);
    AtomicCounters::add(core.stats().gathered_buffers, op.iovcnt);
  }
  if (op.side) {
    op.side->msg = msghdr{};
    op.side->msg.msg_iov = op.iov();
    op.side->msg.msg_iovlen = static_cast<std::size_t>(op.iovcnt);
  }
  return op.iovcnt > 0;
}

// Buffers advanced, and bytes counted, by exactly the `res` bytes moved.
inline void advance_by(LoopCore& core, Operation& op, long res, bool reading) noexcept {
  if (res <= 0) return;
  niox::advance(op.bufs, static_cast<std::size_t>(res));
  op.done += static_cast<std::size_t>(res);
  AtomicCounters::add(reading ? core.stats().bytes_read : core.stats().bytes_written,
                      static_cast<std::uint64_t>(res));
}

// A write goes on from where the kernel stopped until no byte remains.
inline void write_rest(LoopCore& core, Operation& op, long res) {
  if (op.state == OpState::cancelling || res < 0) return finish_with(core, op, res);
  if (total_remaining(op.bufs) == 0) return core.finish(&op, {});
  if (res == 0) return core.finish(&op, std::make_error_code(std::errc::io_error));
  core.begin_attempt(&op);  // the rest, in order: nothing else of this lane started
}

}  // namespace niox::detail
