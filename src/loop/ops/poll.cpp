// The poll family: readiness, once one of the operation's events holds; the value is revents.
#include "loop/ops/family.hpp"

namespace niox::detail {

const OpFamily poll_family{.wait_for =
                               [](const Operation& op) {
                                 return pollfd{op.fd, static_cast<short>(op.events), 0};
                               },
                           .sqe =
                               [](io_uring_sqe& sqe, Operation& op) {
                                 io_uring_prep_poll_add(&sqe, op.fd,
                                                        static_cast<unsigned>(op.events));
                               },
                           .attempt = [](Operation& op) -> long {
                             pollfd p{op.fd, static_cast<short>(op.events), 0};
                             int r = ::poll(&p, 1, 0);
                             if (r == 0) errno = EAGAIN;
                             return r <= 0 ? -1 : p.revents;
                           },
                           .result =
                               [](LoopCore& core, Operation& op, long res, bool) {
                                 op.value = res > 0 ? static_cast<int>(res) : 0;
                                 finish_with(core, op, res);
                               }};

}  // namespace niox::detail
