// Private: the epoll backend. Edge-triggered; every descriptor registered once for
// IN|OUT|RDHUP on the first attempt that would block; each attempt is one non-blocking syscall,
// repeated on every readiness edge until it stops returning EAGAIN, or, reading a socket,
// until a read gets less than its room (the socket is drained, as nginx reads). Completions are
// emulated: results go to the core, which runs handlers in its completion phase.
#pragma once

#include "loop/backend.hpp"
#include "loop/loop_core.hpp"

#include <memory>
#include <vector>

#include <sys/epoll.h>

namespace niox::detail {

class EpollBackend final : public Backend {
 public:
  EpollBackend(LoopCore& core, FileDescriptor epfd, unsigned batch);
  ~EpollBackend() override;

  BackendKind kind() const noexcept override { return BackendKind::epoll; }
  void start(Operation& op) override;
  void cancel(Operation& op) override;
  void forget_fd(int fd, bool closing) override;
  void declare_accepted(int fd) override;
  void flush() override { drain(); }
  void wait(std::chrono::nanoseconds timeout) override;
  void watch_internal(int fd, InternalFd which) override;
  int pollable_fd() override { return ep_.get(); }

 private:
  struct Fd {
    std::uint32_t generation = 0;
    bool registered = false;
    bool unpollable = false;  // regular files: always ready, epoll refuses them
    bool nonblocking = false;
    // Readiness as the edges told it (meaningful once registered): an attempt in a direction
    // the last EAGAIN (or a short read, or the accept) closed waits for the next edge instead
    // of repeating the EAGAIN syscall.
    bool readable = true;
    bool writable = true;
    // An edge said the peer hung up or the socket failed: reads go on until they find the
    // end, since no edge will come again for it.
    bool hangup = false;
    OpList in, out, any;
  };
  Fd& fd_entry(int fd);
  Fd* find(int fd) noexcept;  // null for a descriptor the table never held
  void drain();
  void attempt(Operation* op);
  void park(Operation* op);
  bool ensure_registered(int fd, Fd& f);
  void ensure_nonblocking(int fd, Fd& f);
  void wake_list(OpList& list);

  LoopCore& core_;
  FileDescriptor ep_;
  std::vector<epoll_event> events_;
  // In chunks that never move once made: the pending operations point into the entries'
  // lists. A lookup is a shift and a mask (a std::deque divided by its node's nine entries at
  // every lookup, several lookups per operation).
  static constexpr unsigned fd_chunk_shift = 10;
  static constexpr std::size_t fd_chunk_size = std::size_t{1} << fd_chunk_shift;
  std::vector<std::unique_ptr<Fd[]>> fds_;
  OpList ready_;
  int internal_[3] = {-1, -1, -1};
};

}  // namespace niox::detail
