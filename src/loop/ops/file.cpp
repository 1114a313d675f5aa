// The file family: preadv and pwritev at an offset. No lane (each names its own bytes), and
// the descriptor's flags are left alone: O_NONBLOCK means nothing to a regular file.
#include "loop/ops/family.hpp"

#include <sys/uio.h>

namespace niox::detail {
namespace {

template <bool Reading>
constexpr OpFamily at_offset() {
  return {
      .side = SideUse::many_buffers,
      .fills_buffers = Reading,
      .keeps_blocking = true,
      .prepare = [](LoopCore& core, Operation& op) { return prepare_iovecs(core, op, Reading); },
      .wait_for = Reading ? wait_in : wait_out,
      .sqe =
          [](io_uring_sqe& sqe, Operation& op) {
            auto offset = static_cast<std::uint64_t>(op.offset);
            if (Reading)
              io_uring_prep_readv(&sqe, op.fd, op.iov(), op.iovcnt, offset);
            else
              io_uring_prep_writev(&sqe, op.fd, op.iov(), op.iovcnt, offset);
          },
      .attempt = [](Operation& op) -> long {
        return Reading ? ::preadv(op.fd, op.iov(), op.iovcnt, op.offset)
                       : ::pwritev(op.fd, op.iov(), op.iovcnt, op.offset);
      },
      .result =
          [](LoopCore& core, Operation& op, long res, bool) {
            advance_by(core, op, res, Reading);
            if (Reading) return finish_with(core, op, res);
            if (res > 0) op.offset += res;
            write_rest(core, op, res);
          }};
}

}  // namespace

const OpFamily read_at_family = at_offset<true>();
const OpFamily write_at_family = at_offset<false>();

}  // namespace niox::detail
