// Private: the pooled operation object shared by the loop core and the backends.
#pragma once

#include <niox/buffer/buffer_pool.hpp>
#include <niox/loop/event_loop.hpp>

#include "channels/transfer_engine.hpp"

#include <cassert>
#include <atomic>
#include <chrono>
#include <memory>
#include <cstdint>
#include <span>
#include <vector>

#include <sys/socket.h>
#include <sys/uio.h>

namespace niox::detail {

// Per-descriptor ordering lanes: one operation of a lane is in the backend at a time. A
// listening socket's accepts are its reads.
enum class Lane : std::uint8_t { none, read, write, count };

// Where a backend keeps an operation it was handed (each backend uses what it needs).
enum class BackendState : std::uint8_t { none, ready, parked, sqe, poll, backlog };

// An operation's life, the only record of where it is. The edges, asserted in debug builds:
//   free       -> waiting | armed | queued | finished (refused at start)
//   waiting    -> queued (the head of its lane finished) | finished (aborted)
//   armed      -> finished (a timer fired or was aborted; a periodic one stays armed)
//   queued     -> in_kernel | cancelling | finished (nothing to move, or the loop shuts down)
//   in_kernel  -> in_kernel (the rest of a short write, a multishot re-armed) | cancelling
//                 | finished
//   cancelling -> finished (aborted, or with the result that raced the cancel)
//   finished   -> free (its handler ran)
// waiting is behind the head of its lane, queued in the core's start list, in_kernel with the
// backend; cancelling was asked to stop while queued or in the kernel and ends when the start
// list or the kernel lets go of it; finished waits for its handler in the completion list.
enum class OpState : std::uint8_t { free, waiting, armed, queued, in_kernel, cancelling, finished };

struct OpFamily;
struct Operation;
// Intrusive doubly linked list through Operation::blink_prev/blink_next (backend lists).
struct OpList {
  Operation* head = nullptr;
  Operation* tail = nullptr;
  bool empty() const noexcept { return head == nullptr; }
  void push_back(Operation* op) noexcept;
  void remove(Operation* op) noexcept;
  Operation* pop_front() noexcept;
};

// What only some families use (the many-buffer iovecs, a msghdr, an address, accepted
// descriptors, the transfer engine), in a block of its own that the core pools apart from the
// operations: a pending receive, the operation every idle connection holds, does not carry it.
// Kept across reuse with its capacity (iovecs, the engine's copy buffer).
struct OpSide {
  std::uint32_t index = 0;  // in the core's pool
  OpSide* next_free = nullptr;
  std::vector<iovec> iov;
  msghdr msg{};
  sockaddr_storage addr{};
  socklen_t addrlen = 0;
  std::vector<FileDescriptor> accepted;  // connections not yet handed to the handler
  std::int64_t offset_out = -1;
  long deferred_res = 0;    // multishot: the error to report once the kernel has stopped
  TransferEngine transfer;  // transfer_to, transfer_from (its copy buffer kept across reuse)
};

struct Operation {
  std::uint32_t index = 0;
  std::uint32_t generation = 1;
  const OpFamily* family = nullptr;
  OpState state = OpState::free;
  Lane lane = Lane::none;
  BackendState bstate = BackendState::none;
  bool in_completed = false;     // in the core's completion list (multishot: also while in_kernel)
  bool connect_started = false;  // epoll connect: ::connect already issued
  bool fd_is_socket = false;     // the descriptor it belongs to (home_fd) is a socket
  bool poll_first = false;       // the socket was drained by the last read: wait, then read
  bool more = false;             // write on a socket: MSG_MORE (WriteFlags::more)
  bool zero_copy = false;        // write on a socket: SEND_ZC (WriteFlags::zero_copy)
  bool no_ring = false;          // receive: this attempt brings its own buffer (ring empty)
  bool speculative = false;      // receive: a pooled buffer with MSG_DONTWAIT (see the backend)
  bool stop_asked = false;       // receive_multishot: the backend asked the kernel to stop it
  bool small_read = false;       // receive_multishot off the ring, not a bulk stream: read at
                                 // most a ring buffer's worth, not the whole max_bytes
  bool iov_in_side = false;      // iov() is the side block's (many buffers), not one_iov
  bool short_read = false;       // the last non-blocking read got less than its room
  bool rearm_due = false;        // receive_multishot: re-armed once its arrivals are handed over

  int fd = -1;
  int fd_out = -1;
  // Whose lanes and close() it belongs to (fd_out for transfer_to); -1: detached.
  int home_fd = -1;
  int events = 0;
  // Handed to the handler; a zero-copy write keeps here the result of its last send until the
  // kernel's notification says the pages are free.
  int value = 0;
  // A timer moves no bytes and an I/O operation has no deadline: each pair below shares its
  // room (the core sets a timer's after the I/O fields it sets for every operation).
  union {
    int iovcnt = 0;
    unsigned ticks;  // periodic timer: firings not yet handed to the handler
  };
  union {
    std::int64_t offset = -1;
    // Timer: steady_clock's time since its epoch (a time_point is not trivial enough for a
    // union).
    std::chrono::steady_clock::duration deadline;
  };
  union {
    std::size_t length = 0;
    std::chrono::nanoseconds period;
  };
  std::size_t done = 0;  // bytes moved so far
  std::error_code ec;

  // The buffers it moves, their room from the thread's object cache. The room stays with the
  // pooled operation, except that a receive gives it back when it starts and whenever it goes
  // on waiting with nothing (drop_bufs): an idle connection's pending receive holds none.
  std::vector<ByteBuffer, CachedObjectAllocator<ByteBuffer>> bufs;
  // Empties bufs and gives its room back: for an operation that goes on waiting without them.
  void drop_bufs() noexcept { decltype(bufs)().swap(bufs); }
  iovec one_iov{};
  OpSide* side = nullptr;  // the families that need one (OpFamily::side)

  CompletionFn fn;

  Operation* lane_next = nullptr;  // lane queue / free list
  Operation* fd_prev = nullptr;    // all operations of the descriptor
  Operation* fd_next = nullptr;
  Operation* blink_prev = nullptr;  // backend list links
  Operation* blink_next = nullptr;
  OpList* blist = nullptr;

  // The iovecs of the next attempt, iovcnt of them.
  iovec* iov() noexcept { return iov_in_side ? side->iov.data() : &one_iov; }
  std::uint64_t user_data(unsigned tag) const noexcept {
    return (std::uint64_t{generation} << 32) | (std::uint64_t{index} << 2) | tag;
  }
  bool in_kernel() const noexcept {
    return state == OpState::in_kernel || state == OpState::cancelling;
  }
  void move_to(OpState to) noexcept {
    // The edges above; anything else is an operation lost or completed twice.
    constexpr auto bit = [](OpState s) { return 1u << static_cast<unsigned>(s); };
    [[maybe_unused]] constexpr unsigned next[] = {
        bit(OpState::waiting) | bit(OpState::armed) | bit(OpState::queued) | bit(OpState::finished),
        bit(OpState::queued) | bit(OpState::finished),
        bit(OpState::finished),
        bit(OpState::in_kernel) | bit(OpState::cancelling) | bit(OpState::finished),
        bit(OpState::in_kernel) | bit(OpState::cancelling) | bit(OpState::finished),
        bit(OpState::finished),
        bit(OpState::free),
    };
    assert(next[static_cast<unsigned>(state)] & bit(to));
    state = to;
  }
};

inline void OpList::push_back(Operation* op) noexcept {
  op->blink_prev = tail;
  op->blink_next = nullptr;
  if (tail)
    tail->blink_next = op;
  else
    head = op;
  tail = op;
  op->blist = this;
}
inline void OpList::remove(Operation* op) noexcept {
  if (op->blink_prev)
    op->blink_prev->blink_next = op->blink_next;
  else
    head = op->blink_next;
  if (op->blink_next)
    op->blink_next->blink_prev = op->blink_prev;
  else
    tail = op->blink_prev;
  op->blink_prev = op->blink_next = nullptr;
  op->blist = nullptr;
}
inline Operation* OpList::pop_front() noexcept {
  Operation* op = head;
  if (op) remove(op);
  return op;
}

}  // namespace niox::detail
