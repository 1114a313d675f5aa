// The message family: recvmsg and sendmsg, one datagram (or stream chunk) each, with its
// address. Never resubmitted when short: a datagram is all or nothing, and an empty one is
// still one.
#include "loop/ops/family.hpp"

#include <sys/socket.h>

namespace niox::detail {

const OpFamily recvmsg_family{
    .lane = Lane::read,
    .fills_buffers = true,
    .prepare =
        [](LoopCore& core, Operation& op) {
          prepare_iovecs(core, op, true);
          op.msg.msg_name = &op.addr;
          op.msg.msg_namelen = sizeof(op.addr);
          return true;
        },
    .wait_for = wait_in,
    .edge = edge_in,
    .sqe = [](io_uring_sqe& sqe, Operation& op) { io_uring_prep_recvmsg(&sqe, op.fd, &op.msg, 0); },
    .attempt = [](Operation& op) -> long { return ::recvmsg(op.fd, &op.msg, 0); },
    .result =
        [](LoopCore& core, Operation& op, long res, bool) {
          advance_by(core, op, res, true);
          if (res >= 0) {
            op.value = op.msg.msg_flags;
            op.addrlen = op.msg.msg_namelen;
          }
          finish_with(core, op, res);
        }};

const OpFamily sendmsg_family{
    .lane = Lane::write,
    .prepare =
        [](LoopCore& core, Operation& op) {
          prepare_iovecs(core, op, false);
          if (op.addrlen > 0) {
            op.msg.msg_name = &op.addr;
            op.msg.msg_namelen = op.addrlen;
          }
          return true;
        },
    .wait_for = wait_out,
    .edge = edge_out,
    .sqe = [](io_uring_sqe& sqe,
              Operation& op) { io_uring_prep_sendmsg(&sqe, op.fd, &op.msg, MSG_NOSIGNAL); },
    .attempt = [](Operation& op) -> long { return ::sendmsg(op.fd, &op.msg, MSG_NOSIGNAL); },
    .result =
        [](LoopCore& core, Operation& op, long res, bool) {
          advance_by(core, op, res, false);
          finish_with(core, op, res);
        }};

}  // namespace niox::detail
