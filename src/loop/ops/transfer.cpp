// The transfer family: transfer_to (a file into a socket, pipe or file) and transfer_from (a
// socket into a file), each the transfer engine (channels/transfer_engine.hpp) stepped once per
// readiness until `length` bytes moved. transfer_to belongs to its output and is ordered with
// its writes; transfer_from belongs to its socket and is ordered with its reads.
//
// Neither has an SQE, on purpose: measured with bench/loop_transfer_paths when it still had a
// splice method (256 MiB file to a loopback TCP socket), IORING_OP_SPLICE pairs through a 1 MiB
// pipe moved the data no faster and cost about 1.7x the sender CPU per GB of sendfile on
// readiness.
#include "loop/ops/family.hpp"

namespace niox::detail {
namespace {

using Mode = TransferEngine::Mode;

// transfer_to never splices: into a full socket or pipe a splice would leave bytes in the
// loop's one pipe, where the next transfer would find them. sendfile takes every output that
// is not a regular file.
constexpr TransferPaths to_paths = static_cast<unsigned>(TransferPath::copy_file_range) |
                                   static_cast<unsigned>(TransferPath::sendfile) |
                                   static_cast<unsigned>(TransferPath::copy);

template <TransferPaths Allowed>
bool prepare(LoopCore& core, Operation& op) {
  if (op.state == OpState::queued) {  // its first attempt: plan it
    if (op.length == 0) return false;
    op.side->transfer.start(op.fd, op.offset, op.fd_out, op.side->offset_out, op.length, Allowed,
                            core.transfer_pipe(), Mode::loop);
  }
  return true;
}

// One step: the bytes it moved, or -1 with errno when it moved none and would block or failed.
long attempt(Operation& op) {
  const TransferStep s = op.side->transfer.step();
  if (s.moved == 0 && s.outcome == TransferOutcome::would_block) {
    errno = EAGAIN;
    return -1;
  }
  if (s.moved == 0 && s.outcome == TransferOutcome::error) {
    errno = s.err;
    return -1;
  }
  return static_cast<long>(s.moved);
}

template <bool Reading>
void result(LoopCore& core, Operation& op, long res, bool) {
  TransferEngine& t = op.side->transfer;
  if (t.moved() > op.done) {
    AtomicCounters::add(Reading ? core.stats().bytes_read : core.stats().bytes_written,
                        t.moved() - op.done);
    op.done = static_cast<std::size_t>(t.moved());
  }
  op.value = static_cast<int>(t.path());
  const TransferStep& last = t.last_step();
  if (op.state != OpState::cancelling && res >= 0) {
    switch (last.outcome) {
      case TransferOutcome::progress:
      case TransferOutcome::would_block: return core.begin_attempt(&op);
      case TransferOutcome::done: t.finish(); return core.finish(&op, {});
      case TransferOutcome::eof: t.finish(); return core.finish(&op, LoopError::end_of_file);
      case TransferOutcome::error: res = -last.err; break;
    }
  }
  t.finish();
  finish_with(core, op, res);
}

}  // namespace

const OpFamily transfer_to_family{
    .lane = Lane::write,
    .side = SideUse::always,
    .descriptors = 2,
    .prepare = prepare<to_paths>,
    .wait_for = [](const Operation& op) { return op.side->transfer.wait_for(); },
    .attempt = attempt,
    .result = result<false>};

const OpFamily transfer_from_family{
    .lane = Lane::read,
    .side = SideUse::always,
    .descriptors = 2,
    .belongs_to_input = true,
    .prepare = prepare<all_transfer_paths>,
    .wait_for = [](const Operation& op) { return op.side->transfer.wait_for(); },
    .edge = edge_in,
    .attempt = attempt,
    .result = result<true>};

}  // namespace niox::detail
