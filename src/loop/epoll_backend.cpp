#include "loop/epoll_backend.hpp"
#include "loop/ops/family.hpp"

#include <algorithm>
#include <cerrno>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

namespace niox::detail {

namespace {
constexpr std::uint64_t internal_bit = std::uint64_t{1} << 63;
}

std::unique_ptr<Backend> make_epoll_backend(LoopCore& core, const EventLoop::Options& options,
                                            std::error_code& ec) {
  FileDescriptor ep(::epoll_create1(EPOLL_CLOEXEC));
  if (!ep) {
    ec = {errno, std::generic_category()};
    return nullptr;
  }
  return std::make_unique<EpollBackend>(core, std::move(ep), std::max(1u, options.epoll_batch));
}

EpollBackend::EpollBackend(LoopCore& core, FileDescriptor epfd, unsigned batch)
    : core_(core), ep_(std::move(epfd)), events_(batch) {}

EpollBackend::~EpollBackend() = default;

EpollBackend::Fd& EpollBackend::fd_entry(int fd) {
  const auto i = static_cast<std::size_t>(fd);
  const std::size_t c = i >> fd_chunk_shift;
  if (c >= fds_.size()) [[unlikely]] {
    fds_.resize(c + 1);
  }
  if (!fds_[c]) [[unlikely]] {
    fds_[c] = std::make_unique<Fd[]>(fd_chunk_size);
  }
  return fds_[c][i & (fd_chunk_size - 1)];
}

EpollBackend::Fd* EpollBackend::find(int fd) noexcept {
  const auto i = static_cast<std::size_t>(fd);
  const std::size_t c = i >> fd_chunk_shift;
  if (fd < 0 || c >= fds_.size() || !fds_[c]) return nullptr;
  return &fds_[c][i & (fd_chunk_size - 1)];
}

void EpollBackend::start(Operation& op) {
  op.bstate = BackendState::ready;
  ready_.push_back(&op);
}

void EpollBackend::cancel(Operation& op) {
  if (op.blist) op.blist->remove(&op);
  op.bstate = BackendState::none;
  core_.on_result(op, -ECANCELED);
}

void EpollBackend::forget_fd(int fd, bool closing) {
  Fd* found = find(fd);
  if (found == nullptr) return;
  Fd& f = *found;
  // Closing the descriptor removes its registration (nginx relies on the same): one syscall
  // less per connection. Only a duplicate of it made elsewhere (dup, fork) would keep the
  // registration alive; its events carry the old generation and are dropped in wait().
  if (f.registered && !closing) ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, fd, nullptr);
  // Operations of other descriptors parked here (a transfer's file) retry and see the closed fd.
  wake_list(f.in);
  wake_list(f.out);
  wake_list(f.any);
  std::uint32_t gen = f.generation + 1;
  f = Fd{};
  f.generation = gen & 0x3fffffff;
}

void EpollBackend::declare_accepted(int fd) {
  // Registered now, with its read known not ready: the first read waits for the edge (see
  // LoopCore::declare_accepted_socket). Registering reports bytes already there as that edge.
  Fd& f = fd_entry(fd);
  f.nonblocking = true;
  if (ensure_registered(fd, f)) f.readable = false;
}

void EpollBackend::ensure_nonblocking(int fd, Fd& f) {
  if (f.nonblocking) return;
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0 && !(fl & O_NONBLOCK)) ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  f.nonblocking = true;
}

bool EpollBackend::ensure_registered(int fd, Fd& f) {
  if (f.registered) return true;
  if (f.unpollable) return false;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.u64 = (std::uint64_t{f.generation} << 32) | static_cast<std::uint32_t>(fd);
  if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, fd, &ev) == 0 ||
      (errno == EEXIST && ::epoll_ctl(ep_.get(), EPOLL_CTL_MOD, fd, &ev) == 0)) {
    f.registered = true;
    return true;
  }
  f.unpollable = true;
  return false;
}

void EpollBackend::wake_list(OpList& list) {
  while (Operation* op = list.pop_front()) {
    op->bstate = BackendState::ready;
    ready_.push_back(op);
  }
}

void EpollBackend::drain() {
  while (Operation* op = ready_.pop_front()) {
    op->bstate = BackendState::none;
    attempt(op);
  }
}

void EpollBackend::attempt(Operation* op) {
  const OpFamily& family = *op->family;
  // Only the descriptor it belongs to: a transfer's file is borrowed, its flags are the
  // caller's, and a remembered state would outlive its number (closed without the loop).
  // (Entries never move: one looked up stays valid while others are added.)
  Fd* f = nullptr;
  if (!family.keeps_blocking && op->home_fd >= 0) {
    Fd& home = fd_entry(op->home_fd);
    ensure_nonblocking(op->home_fd, home);
    if (op->fd == op->home_fd) f = &home;
  }
  // Known not ready (the last attempt this way hit EAGAIN and no edge came since): wait.
  const int edge = family.edge ? family.edge(*op) : 0;
  if (edge) {
    if (f == nullptr) f = &fd_entry(op->fd);
    if (f->registered && !(edge == POLLIN ? f->readable : f->writable)) {
      park(op);
      return;
    }
  }
  AtomicCounters::add(core_.stats().kernel_entries, 1);
  long r = attempt_sync(*op);
  if (r == -EAGAIN) {
    AtomicCounters::add(core_.stats().would_block, 1);
    if (edge == POLLIN) f->readable = false;
    if (edge == POLLOUT) f->writable = false;
    park(op);
    return;
  }
  // A socket read that got less than its room emptied the receive queue: the next read waits
  // for an edge instead of a recv that would find EAGAIN. Safe with edge triggering because a
  // socket raises an edge on every arrival, also one that lands between this recv and the next
  // epoll_wait. Not after a hang-up edge: the end of stream raises no edge of its own once its
  // edge is taken, so reads go on until they find it. (Pipes are left alone: since Linux 5.5 a
  // write to a non-empty pipe may raise no edge.)
  if (edge == POLLIN && op->short_read && op->fd_is_socket && op->fd == op->home_fd && !f->hangup)
    f->readable = false;
  if (family.multishot && (r > 0 || (r == 0 && !family.zero_ends))) {
    core_.on_result(*op, r, /*more=*/true);
    op->bstate = BackendState::ready;  // accept (or receive) until drained or EAGAIN
    ready_.push_back(op);
    return;
  }
  core_.on_result(*op, r);
}

void EpollBackend::park(Operation* op) {
  const pollfd wait = op->family->wait_for(*op);
  Fd& f = fd_entry(wait.fd);
  if (!ensure_registered(wait.fd, f)) {
    core_.on_result(*op, -EAGAIN);  // cannot wait for a descriptor epoll refuses
    return;
  }
  op->bstate = BackendState::parked;
  (wait.events == POLLIN ? f.in : wait.events == POLLOUT ? f.out : f.any).push_back(op);
}

void EpollBackend::watch_internal(int fd, InternalFd which) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ev.data.u64 = internal_bit | static_cast<unsigned>(which);
  ::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, fd, &ev);
  internal_[static_cast<unsigned>(which)] = fd;
}

void EpollBackend::wait(std::chrono::nanoseconds timeout) {
  int ms = -1;
  if (timeout.count() >= 0) {
    auto m = (timeout.count() + 999999) / 1000000;
    ms = static_cast<int>(std::min<long long>(m, 1 << 30));
  }
  AtomicCounters::add(core_.stats().kernel_entries, 1);
  int n = ::epoll_wait(ep_.get(), events_.data(), static_cast<int>(events_.size()), ms);
  for (int i = 0; i < n; ++i) {
    std::uint64_t data = events_[i].data.u64;
    std::uint32_t ev = events_[i].events;
    if (data & internal_bit) {
      unsigned which = static_cast<unsigned>(data & 0xff);
      std::uint64_t v;
      while (::read(internal_[which], &v, sizeof v) > 0) {
      }
      core_.on_internal(static_cast<InternalFd>(which));
      continue;
    }
    int fd = static_cast<int>(data & 0xffffffff);
    auto gen = static_cast<std::uint32_t>(data >> 32);
    Fd* found = find(fd);
    if (found == nullptr || found->generation != gen || !found->registered) {
      continue;  // a registration that was forgotten meanwhile
    }
    Fd& f = *found;
    if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)) {
      f.readable = true;
      if (ev & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) f.hangup = true;
      wake_list(f.in);
    }
    if (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
      f.writable = true;
      wake_list(f.out);
    }
    wake_list(f.any);
  }
  drain();
}

}  // namespace niox::detail
