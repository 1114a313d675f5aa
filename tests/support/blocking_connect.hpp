// connect() on a blocking socket that a test gave a send timeout (SO_SNDTIMEO).
//
// With a send timeout the kernel does not restart an interrupted connect(): it fails with EINTR
// and the connection goes on in the background. Signals are not the only interruption: when an
// io_uring ring is torn down, the kernel runs part of the teardown on every thread that used the
// ring, through signal-style task work, so the thread that probed a backend or destroyed an
// EventLoop can see EINTR from its next timed connect, milliseconds later.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

namespace niox::test {

// 0 once connected; -1 with errno set otherwise (ETIMEDOUT when `timeout_ms` passed first).
inline int connect_blocking(int fd, const sockaddr* to, socklen_t len, int timeout_ms) {
  if (::connect(fd, to, len) == 0) return 0;
  if (errno != EINTR) return -1;
  pollfd p{fd, POLLOUT, 0};
  int ready;
  while ((ready = ::poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {
  }
  if (ready == 0) errno = ETIMEDOUT;
  if (ready <= 0) return -1;
  int err = 0;
  socklen_t err_len = sizeof err;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) != 0) return -1;
  if (err != 0) {
    errno = err;
    return -1;
  }
  return 0;
}

}  // namespace niox::test
