// Private: the pooled operation object shared by the loop core and the backends.
#pragma once

#include <niox/loop/event_loop.hpp>

#include <chrono>
#include <cstdint>
#include <vector>

#include <sys/socket.h>
#include <sys/uio.h>

namespace niox::detail {

// Per-descriptor ordering lanes: one operation of a lane is in the backend at a time.
enum class Lane : std::uint8_t { none, read, write, accept, count };

// Where a backend keeps an operation it was handed (each backend uses what it needs).
enum class BackendState : std::uint8_t { none, ready, parked, sqe, poll, backlog };

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

struct Operation {
  std::uint32_t index = 0;
  std::uint32_t generation = 1;
  OpKind kind = OpKind::read;
  Lane lane = Lane::none;
  BackendState bstate = BackendState::none;
  bool live = false;              // started, final handler not yet run
  bool in_backend = false;        // an attempt is with the backend (maybe the kernel)
  bool queued_to_start = false;   // waiting in the core's start list
  bool in_completed = false;      // in the core's completion list
  bool finished = false;          // final result decided (ec below)
  bool cancel_requested = false;
  bool linked = false;            // in its descriptor's lists
  bool connect_started = false;   // epoll connect: ::connect already issued
  bool fd_is_socket = false;
  bool poll_first = false;        // the socket was drained by the last read: wait, then read
  bool more = false;              // write on a socket: MSG_MORE (WriteFlags::more)

  int fd = -1;
  int fd_out = -1;
  int home_fd = -1;  // whose lanes and close() it belongs to (fd_out for splice/transfer_to)
  std::int64_t offset = -1;
  std::int64_t offset_out = -1;
  std::size_t length = 0;
  int events = 0;
  int value = 0;
  std::size_t done = 0;  // bytes moved so far
  long deferred_res = 0;  // multishot: the error to report once the kernel has stopped
  std::error_code ec;

  std::vector<ByteBuffer> bufs;  // capacity kept across reuse
  std::vector<iovec> iov;
  int iovcnt = 0;
  msghdr msg{};
  sockaddr_storage addr{};
  socklen_t addrlen = 0;
  std::vector<int> accepted;  // multishot: descriptors not yet handed to the handler
  unsigned ticks = 0;         // periodic timer: firings not yet handed to the handler

  std::chrono::steady_clock::time_point deadline{};
  std::chrono::nanoseconds period{};

  CompletionFn fn;

  Operation* lane_next = nullptr;  // lane queue / free list
  Operation* fd_prev = nullptr;    // all operations of the descriptor
  Operation* fd_next = nullptr;
  Operation* blink_prev = nullptr;  // backend list links
  Operation* blink_next = nullptr;
  OpList* blist = nullptr;

  std::uint64_t user_data(unsigned tag) const noexcept {
    return (std::uint64_t{generation} << 32) | (std::uint64_t{index} << 2) | tag;
  }
};

inline void OpList::push_back(Operation* op) noexcept {
  op->blink_prev = tail;
  op->blink_next = nullptr;
  if (tail) tail->blink_next = op; else head = op;
  tail = op;
  op->blist = this;
}
inline void OpList::remove(Operation* op) noexcept {
  if (op->blink_prev) op->blink_prev->blink_next = op->blink_next; else head = op->blink_next;
  if (op->blink_next) op->blink_next->blink_prev = op->blink_prev; else tail = op->blink_prev;
  op->blink_prev = op->blink_next = nullptr;
  op->blist = nullptr;
}
inline Operation* OpList::pop_front() noexcept {
  Operation* op = head;
  if (op) remove(op);
  return op;
}

// Readiness a blocked attempt waits for (EPOLLIN/EPOLLOUT values equal POLLIN/POLLOUT).
int wait_events(const Operation& op) noexcept;

// One non-blocking syscall attempt of `op` as it is prepared (iovecs built). Returns the
// syscall's result or -errno (-EAGAIN when it would block). EINTR is retried.
long attempt_sync(Operation& op) noexcept;

}  // namespace niox::detail
