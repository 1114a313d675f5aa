// The transfer family: splice (one call, one side a pipe) and transfer_to (sendfile until
// `length` bytes are sent). Both belong to their output descriptor and are ordered with its
// writes.
//
// transfer_to has no SQE on purpose: measured with bench/loop_transfer_paths (256 MiB file to
// a loopback TCP socket), IORING_OP_SPLICE pairs through a 1 MiB pipe moved the data no faster
// and cost about 1.7x the sender CPU per GB of sendfile on readiness.
#include "loop/ops/family.hpp"

#include <niox/buffer/gather.hpp>

#include <algorithm>

#include <fcntl.h>
#include <sys/sendfile.h>

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

const OpFamily transfer_family{
    .lane = Lane::write,
    .descriptors = 2,
    .prepare = [](LoopCore&, Operation& op) { return op.done < op.length; },
    .wait_for =
        [](const Operation& op) {
          return pollfd{op.fd_out, POLLOUT, 0};
        },
    .attempt = [](Operation& op) -> long {
      off_t off = op.offset;
      return ::sendfile(op.fd_out, op.fd, &off, std::min(op.length - op.done, max_bytes_per_call));
    },
    .result =
        [](LoopCore& core, Operation& op, long res, bool) {
          if (res > 0) {
            op.done += static_cast<std::size_t>(res);
            op.offset += res;
            AtomicCounters::add(core.stats().bytes_written, static_cast<std::uint64_t>(res));
          }
          if (op.state == OpState::cancelling || res < 0) return finish_with(core, op, res);
          if (op.done >= op.length) return core.finish(&op, {});
          if (res == 0) return core.finish(&op, LoopError::end_of_file);
          core.begin_attempt(&op);
        }};

}  // namespace niox::detail
