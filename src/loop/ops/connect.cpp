// The connect family: a non-blocking socket connected to the operation's address.
#include "loop/ops/family.hpp"

#include <sys/socket.h>

namespace niox::detail {

const OpFamily connect_family{
    .side = SideUse::always,
    .wait_for = wait_out,
    // Until ::connect was issued there is no edge to wait for: the first attempt issues it.
    .edge = [](const Operation& op) { return op.connect_started ? POLLOUT : 0; },
    .sqe =
        [](io_uring_sqe& sqe, Operation& op) {
          io_uring_prep_connect(&sqe, op.fd, reinterpret_cast<const sockaddr*>(&op.side->addr),
                                op.side->addrlen);
        },
    .attempt = [](Operation& op) -> long {
      if (!op.connect_started) {
        op.connect_started = true;
        if (::connect(op.fd, reinterpret_cast<const sockaddr*>(&op.side->addr), op.side->addrlen) ==
            0)
          return 0;
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
    },
    .result = finish_with};

}  // namespace niox::detail
