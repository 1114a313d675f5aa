// The accept family: one connection, or (multishot) one per connection until stopped; epoll
// accepts on each readiness edge until the queue is empty. The new descriptors are non-blocking
// and O_CLOEXEC; the operation holds them in its OpSide::accepted until the handler takes them,
// and those it never hands over close with it.
#include "loop/ops/family.hpp"

#include <poll.h>
#include <sys/socket.h>

namespace niox::detail {
namespace {

constexpr int accept_flags = SOCK_NONBLOCK | SOCK_CLOEXEC;

void accept_sqe(io_uring_sqe& sqe, Operation& op) {
  io_uring_prep_accept(&sqe, op.fd, nullptr, nullptr, accept_flags);
}

long accept_attempt(Operation& op) { return ::accept4(op.fd, nullptr, nullptr, accept_flags); }

// accept4 sets up the new socket and its file before it looks at the queue, so one that finds
// the queue empty costs about as much as one that succeeds (several times a poll()). The
// multishot asks poll() whether another connection waits and, when none does, reports the queue
// drained (short_read): the backend then waits for the next edge, which every connection queued
// later raises, also one that lands between this poll and the next epoll_wait.
long accept_multishot_attempt(Operation& op) {
  long fd = accept_attempt(op);
  pollfd more{op.fd, POLLIN, 0};
  op.short_read = fd >= 0 && ::poll(&more, 1, 0) == 0;
  return fd;
}

void multishot_result(LoopCore& core, Operation& op, long res, bool more) {
  if (res >= 0) {
    op.side->accepted.emplace_back(static_cast<int>(res));
    core.push_completed(&op);
    if (!more) {
      if (op.state == OpState::cancelling) return core.finish(&op, operation_aborted());
      core.begin_attempt(&op);  // the kernel ended the multishot without an error: re-arm
    }
    return;
  }
  if (more) {
    // An error the kernel would keep the multishot armed after (EMFILE...): stop it, and
    // report this error once the final CQE says the kernel let go.
    if (op.state != OpState::cancelling) {
      op.side->deferred_res = res;
      core.abort(&op);
    }
    return;
  }
  if (op.side->deferred_res < 0) return core.finish(&op, errno_code(op.side->deferred_res));
  finish_with(core, op, res);
}

}  // namespace

const OpFamily accept_family{.lane = Lane::read,
                             .side = SideUse::always,
                             .wait_for = wait_in,
                             .edge = edge_in,
                             .sqe = accept_sqe,
                             .attempt = accept_attempt,
                             .result = [](LoopCore& core, Operation& op, long res, bool) {
                               if (res >= 0) {
                                 // Cancelled: nobody will take it, and the loop never used it.
                                 FileDescriptor fd(static_cast<int>(res));
                                 if (op.state == OpState::cancelling)
                                   res = -ECANCELED;
                                 else
                                   op.side->accepted.push_back(std::move(fd));
                               }
                               finish_with(core, op, res);
                             }};

const OpFamily accept_multishot_family{
    .lane = Lane::read,
    .side = SideUse::always,
    .multishot = true,
    .wait_for = wait_in,
    .edge = edge_in,
    .sqe =
        [](io_uring_sqe& sqe, Operation& op) {
          io_uring_prep_multishot_accept(&sqe, op.fd, nullptr, nullptr, accept_flags);
        },
    .attempt = accept_multishot_attempt,
    .result = multishot_result,
    .interim =
        [](LoopCore& core, Operation& op) {
          std::size_t n = 0;
          Completion c;
          std::vector<FileDescriptor>& accepted = op.side->accepted;
          for (; n < accepted.size(); ++n) {
            c = Completion{};
            c.fd = std::move(accepted[n]);
            core.hand(op, c);
          }
          accepted.clear();
          return n;
        }};

}  // namespace niox::detail
