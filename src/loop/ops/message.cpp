// The message family: recvmsg and sendmsg, one datagram (or stream chunk) each, with its
// address. Never resubmitted when short: a datagram is all or nothing, and an empty one is
// still one.
#include "loop/ops/family.hpp"

#include <sys/socket.h>

namespace niox::detail {

const OpFamily recvmsg_family{
    .lane = Lane::read,
    .side = SideUse::always,
    .fills_buffers = true,
    .prepare =
        [](LoopCore& core, Operation& op) {
          prepare_iovecs(core, op, true);
          op.side->msg.msg_name = &op.side->addr;
          op.side->msg.msg_namelen = sizeof(op.side->addr);
          return true;
        },
    .wait_for = wait_in,
    .edge = edge_in,
    .sqe = [](io_uring_sqe& sqe,
              Operation& op) { io_uring_prep_recvmsg(&sqe, op.fd, &op.side->msg, 0); },
    .attempt = [](Operation& op) -> long { return ::recvmsg(op.fd, &op.side->msg, 0); },
    .result =
        [](LoopCore& core, Operation& op, long res, bool) {
          advance_by(core, op, res, true);
          if (res >= 0) {
            op.value = op.side->msg.msg_flags;
            op.side->addrlen = op.side->msg.msg_namelen;
          }
          finish_with(core, op, res);
        }};

const OpFamily sendmsg_family{
    .lane = Lane::write,
    .side = SideUse::always,
    .prepare =
        [](LoopCore& core, Operation& op) {
          prepare_iovecs(core, op, false);
          if (op.side->addrlen > 0) {
            op.side->msg.msg_name = &op.side->addr;
            op.side->msg.msg_namelen = op.side->addrlen;
          }
          return true;
        },
    .wait_for = wait_out,
    .edge = edge_out,
    .sqe = [](io_uring_sqe& sqe,
              Operation& op) { io_uring_prep_sendmsg(&sqe, op.fd, &op.side->msg, MSG_NOSIGNAL); },
    .attempt = [](Operation& op) -> long { return ::sendmsg(op.fd, &op.side->msg, MSG_NOSIGNAL); },
    .result =
        [](LoopCore& core, Operation& op, long res, bool) {
          advance_by(core, op, res, false);
          finish_with(core, op, res);
        }};

}  // namespace niox::detail
