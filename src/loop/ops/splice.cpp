// The splice family: one splice call, one side a pipe. It belongs to its output descriptor
// and is ordered with its writes.
#include "loop/ops/family.hpp"

#include <niox/buffer/gather.hpp>

#include <algorithm>

#include <fcntl.h>

namespace niox::detail {

const OpFamily splice_family{
    .lane = Lane::write,
    .descriptors = 2,
    // Whichever side blocked: wait for the output unless it is writable already.
    .wait_for =
        [](const Operation& op) {
          pollfd out{op.fd_out, POLLOUT, 0};
          return ::poll(&out, 1, 0) == 0 ? out : pollfd{op.fd, POLLIN, 0};
        },
    .sqe =
        [](io_uring_sqe& sqe, Operation& op) {
          io_uring_prep_splice(&sqe, op.fd, op.offset, op.fd_out, op.offset_out,
                               static_cast<unsigned>(std::min(op.length, max_bytes_per_call)), 0);
        },
    .attempt = [](Operation& op) -> long {
      loff_t in = op.offset, out = op.offset_out;
      return ::splice(op.fd, op.offset >= 0 ? &in : nullptr, op.fd_out,
                      op.offset_out >= 0 ? &out : nullptr, std::min(op.length, max_bytes_per_call),
                      SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    },
    .result =
        [](LoopCore& core, Operation& op, long res, bool) {
          if (res > 0) {
            op.done = static_cast<std::size_t>(res);
            AtomicCounters::add(core.stats().bytes_written, static_cast<std::uint64_t>(res));
          }
          finish_with(core, op, res);
        }};

}  // namespace niox::detail
