// One non-blocking syscall per attempt: the epoll backend's whole I/O path, and io_uring's
// fallback for operations it has no opcode for (sendfile) or that the kernel lacks.
#include "loop/operation.hpp"

#include <niox/buffer/gather.hpp>

#include <algorithm>
#include <cerrno>

#include <fcntl.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

namespace niox::detail {

namespace {
long once(Operation& op) noexcept {
  switch (op.kind) {
    case OpKind::read:
      if (op.iovcnt == 1) {
        return op.fd_is_socket ? ::recv(op.fd, op.iov[0].iov_base, op.iov[0].iov_len, 0)
                               : ::read(op.fd, op.iov[0].iov_base, op.iov[0].iov_len);
      }
      return ::readv(op.fd, op.iov.data(), op.iovcnt);
    case OpKind::write:
      if (op.fd_is_socket) {
        const int flags = MSG_NOSIGNAL | (op.more ? MSG_MORE : 0);
        return op.iovcnt == 1 ? ::send(op.fd, op.iov[0].iov_base, op.iov[0].iov_len, flags)
                              : ::sendmsg(op.fd, &op.msg, flags);
      }
      return op.iovcnt == 1 ? ::write(op.fd, op.iov[0].iov_base, op.iov[0].iov_len)
                            : ::writev(op.fd, op.iov.data(), op.iovcnt);
    case OpKind::accept:
    case OpKind::accept_multishot:
      return ::accept4(op.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    case OpKind::connect: {
      if (!op.connect_started) {
        op.connect_started = true;
        if (::connect(op.fd, reinterpret_cast<const sockaddr*>(&op.addr), op.addrlen) == 0) return 0;
        if (errno == EINPROGRESS) errno = EAGAIN;
        return -1;
      }
      int err = 0;
      socklen_t len = sizeof err;
      if (::getsockopt(op.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return -1;
      if (err != 0) {
        errno = err;
        return -1;
      }
      sockaddr_storage peer{};
      socklen_t plen = sizeof peer;
      if (::getpeername(op.fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0) {
        errno = errno == ENOTCONN ? EAGAIN : errno;
        return -1;
      }
      return 0;
    }
    case OpKind::recvmsg:
      return ::recvmsg(op.fd, &op.msg, 0);
    case OpKind::sendmsg:
      return ::sendmsg(op.fd, &op.msg, MSG_NOSIGNAL);
    case OpKind::poll: {
      pollfd p{op.fd, static_cast<short>(op.events), 0};
      int r = ::poll(&p, 1, 0);
      if (r == 0) {
        errno = EAGAIN;
        return -1;
      }
      return r < 0 ? -1 : p.revents;
    }
    case OpKind::read_at:
      return ::preadv(op.fd, op.iov.data(), op.iovcnt, op.offset);
    case OpKind::write_at:
      return ::pwritev(op.fd, op.iov.data(), op.iovcnt, op.offset);
    case OpKind::splice: {
      loff_t in = op.offset, out = op.offset_out;
      return ::splice(op.fd, op.offset >= 0 ? &in : nullptr, op.fd_out,
                      op.offset_out >= 0 ? &out : nullptr, std::min(op.length, max_bytes_per_call),
                      SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    }
    case OpKind::transfer_to: {
      off_t off = op.offset;
      return ::sendfile(op.fd_out, op.fd, &off, std::min(op.length - op.done, max_bytes_per_call));
    }
    case OpKind::timer:
      break;
  }
  errno = EINVAL;
  return -1;
}
}  // namespace

long attempt_sync(Operation& op) noexcept {
  for (;;) {
    long r = once(op);
    if (r >= 0) return r;
    if (errno == EINTR) continue;
    return errno == EWOULDBLOCK ? -EAGAIN : -errno;
  }
}

}  // namespace niox::detail
