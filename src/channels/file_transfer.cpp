// FileChannel::transfer_to / transfer_from: the transfer engine (channels/transfer_engine.hpp)
// stepped to the end on the calling thread, with a splice pipe of this call's own.
#include <niox/channels/file_channel.hpp>

#include "channels/fd_io.hpp"
#include "channels/transfer_engine.hpp"

#include <algorithm>
#include <limits>

namespace niox {

namespace {

off_t to_off_checked(std::uint64_t v) {
  if (v > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max())) {
    throw IllegalArgumentException("position beyond the largest file offset");
  }
  return static_cast<off_t>(v);
}

// Clears ec, or sets EBADF for a closed channel, which has nothing to transfer.
bool closed(const FileChannel& channel, std::error_code& ec) {
  ec.clear();
  if (channel.is_open()) return false;
  ec = std::make_error_code(std::errc::bad_file_descriptor);
  return true;
}

// Steps the engine from in to out until it is done or cannot go on now, with a splice pipe of
// this call's own. An error is reported only when nothing moved, or when bytes that left a
// stream were lost; otherwise the next call meets it again. EBADF when the other channel has
// no descriptor.
TransferResult run(int in, std::int64_t in_offset, int out, std::int64_t out_offset,
                   std::uint64_t count, TransferPaths allowed, std::error_code& ec) {
  TransferResult r;
  if (in < 0 || out < 0) {
    ec = std::make_error_code(std::errc::bad_file_descriptor);
    return r;
  }
  detail::SplicePipe pipe;
  detail::TransferEngine engine;
  engine.start(in, in_offset, out, out_offset, count, allowed, pipe,
               detail::TransferEngine::Mode::blocking_caller);
  detail::TransferStep s;
  do {
    s = engine.step();
  } while (s.outcome == detail::TransferOutcome::progress);
  engine.finish();
  r.bytes = engine.moved();
  r.path = engine.path();
  r.end_of_input = s.outcome == detail::TransferOutcome::eof;
  if (s.outcome == detail::TransferOutcome::error && (r.bytes == 0 || engine.lost_bytes())) {
    ec = detail::errno_code(s.err);
  }
  return r;
}

}  // namespace

TransferResult FileChannel::transfer_to(std::uint64_t position, std::uint64_t count,
                                        WritableByteChannel& target, TransferPaths allowed) {
  std::error_code ec;
  auto r = transfer_to(position, count, target, ec, allowed);
  if (ec) throw std::system_error(ec, "transfer_to");
  return r;
}

TransferResult FileChannel::transfer_to(std::uint64_t position, std::uint64_t count,
                                        WritableByteChannel& target, std::error_code& ec,
                                        TransferPaths allowed) {
  TransferResult r;
  if (closed(*this, ec)) return r;
  if (!readable_) throw NonReadableChannelException();
  const std::uint64_t file_size = size();
  if (position >= file_size || count == 0) {
    r.end_of_input = count > 0;
    return r;
  }
  const std::uint64_t want = std::min(count, file_size - position);
  // sendfile and splice raise SIGPIPE on a closed socket or pipe; they have no MSG_NOSIGNAL.
  detail::SigpipeBlock no_sigpipe;
  r = run(fd(), to_off_checked(position), target.native_handle(), -1, want, allowed, ec);
  if (want < count && r.bytes == want) r.end_of_input = true;
  return r;
}

TransferResult FileChannel::transfer_from(ReadableByteChannel& source, std::uint64_t position,
                                          std::uint64_t count, TransferPaths allowed) {
  std::error_code ec;
  auto r = transfer_from(source, position, count, ec, allowed);
  if (ec) throw std::system_error(ec, "transfer_from");
  return r;
}

TransferResult FileChannel::transfer_from(ReadableByteChannel& source, std::uint64_t position,
                                          std::uint64_t count, std::error_code& ec,
                                          TransferPaths allowed) {
  TransferResult r;
  if (closed(*this, ec)) return r;
  if (!writable_) throw NonWritableChannelException();
  if (count == 0) {
    return r;
  }
  return run(source.native_handle(), -1, fd(), to_off_checked(position), count, allowed, ec);
}

}  // namespace niox
