// connect, send and receive on a blocking socket that a test gave timeouts (SO_SNDTIMEO,
// SO_RCVTIMEO).
//
// With a timeout the kernel does not restart an interrupted call: it fails with EINTR (a
// connect() goes on in the background) or comes back short. Signals are not the only interruption: when an
// io_uring ring is torn down, the kernel runs part of the teardown on every thread that used the
// ring, through signal-style task work, so the thread that probed a backend or destroyed an
// EventLoop can see EINTR from its next timed connect, milliseconds later.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <string_view>

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

// Sends `size` bytes: the count sent, fewer only after an error or a send timeout.
inline std::size_t send_all(int fd, const void* data, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    ssize_t n = ::send(fd, static_cast<const char*>(data) + done, size - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

inline bool send_all(int fd, std::string_view data) {
  return send_all(fd, data.data(), data.size()) == data.size();
}

// Receives `size` bytes: the count received, fewer only after an error, a receive timeout or
// the end of the stream.
inline std::size_t recv_all(int fd, void* data, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    ssize_t n = ::recv(fd, static_cast<char*>(data) + done, size - done, MSG_WAITALL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

}  // namespace niox::test
