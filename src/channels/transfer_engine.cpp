#include "channels/transfer_engine.hpp"

#include <niox/buffer/gather.hpp>

#include "channels/fd_io.hpp"

#include <algorithm>
#include <cerrno>

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace niox {

std::string_view to_string(TransferPath path) noexcept {
  switch (path) {
    case TransferPath::copy_file_range: return "copy_file_range";
    case TransferPath::sendfile: return "sendfile";
    case TransferPath::splice: return "splice";
    case TransferPath::copy: return "copy";
  }
  return "?";
}

namespace detail {
namespace {

// A 64 KiB pipe would cap every splice pair at 64 KiB; a larger one moves a whole 1 MiB chunk
// of a transfer per pair. Past /proc/sys/fs/pipe-max-size the kernel refuses (EPERM): halve.
constexpr int pipe_size = 1 << 20;
constexpr int min_pipe_size = 64 * 1024;
constexpr std::size_t copy_chunk = 256 * 1024;

// The errors of a path that cannot move bytes between these two descriptors at all.
bool cannot_start(int e) noexcept {
  return e == EINVAL || e == ENOSYS || e == EOPNOTSUPP || e == EXDEV || e == ENOTSUP;
}

// Waits until a full non-blocking output takes bytes again (its error shows on the next call).
void wait_writable(int fd) noexcept {
  pollfd p{fd, POLLOUT, 0};
  while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
  }
}

}  // namespace

bool SplicePipe::open() noexcept {
  if (r_) return true;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  r_.reset(fds[0]);
  w_.reset(fds[1]);
  // F_SETPIPE_SZ answers with the size the pipe got; only when every size was refused is the
  // default one asked for.
  int got = -1;
  for (int size = pipe_size; got < 0 && size >= min_pipe_size; size /= 2) {
    got = ::fcntl(w_.get(), F_SETPIPE_SZ, size);
  }
  if (got < 0) got = ::fcntl(w_.get(), F_GETPIPE_SZ);
  capacity_ = got > 0 ? static_cast<std::size_t>(got) : static_cast<std::size_t>(min_pipe_size);
  return true;
}

void SplicePipe::discard() noexcept {
  r_.reset();
  w_.reset();
  capacity_ = 0;
}

TransferEngine::~TransferEngine() { finish(); }

void TransferEngine::start(int in, std::int64_t in_offset, int out, std::int64_t out_offset,
                           std::uint64_t count, TransferPaths allowed, SplicePipe& pipe,
                           Mode mode) {
  finish();
  in_ = in;
  out_ = out;
  in_at_offset_ = in_offset >= 0;
  out_at_offset_ = out_offset >= 0;
  in_offset_ = in_at_offset_ ? in_offset : 0;
  out_offset_ = out_at_offset_ ? out_offset : 0;
  count_ = count;
  moved_ = 0;
  last_ = {};
  lost_ = false;
  mode_ = mode;
  pipe_ = &pipe;
  wait_ = {in, POLLIN, 0};

  // Classified only as far as the allowed paths need: into a socket, a transfer_to of the loop
  // (copy_file_range, sendfile, copy) needs the output's type alone.
  const auto allows = [&](TransferPath p) { return (allowed & static_cast<unsigned>(p)) != 0; };
  struct stat st {};
  const bool out_known = ::fstat(out, &st) == 0;
  const bool out_regular = out_known && S_ISREG(st.st_mode);
  out_is_pipe_ = out_known && S_ISFIFO(st.st_mode);
  out_is_socket_ = out_known && S_ISSOCK(st.st_mode);
  const bool splice_allowed = allows(TransferPath::splice);
  const bool copy_range_possible = allows(TransferPath::copy_file_range) && out_regular;
  bool in_regular = false;
  in_is_pipe_ = false;
  if (splice_allowed || copy_range_possible) {
    const bool in_known = ::fstat(in, &st) == 0;
    in_regular = in_known && S_ISREG(st.st_mode);
    in_is_pipe_ = in_known && S_ISFIFO(st.st_mode);
  }
  bool out_append = false;
  if (splice_allowed || (copy_range_possible && in_regular)) {
    const int out_flags = ::fcntl(out, F_GETFL);
    out_append = out_flags >= 0 && (out_flags & O_APPEND) != 0;
  }

  TransferPaths suits = static_cast<unsigned>(TransferPath::copy);
  // copy_file_range refuses O_APPEND targets with EBADF, not with an error that falls back;
  // splice refuses them only once the bytes are in the pipe, gone from a stream source.
  if (in_regular && out_regular && !out_append)
    suits |= static_cast<unsigned>(TransferPath::copy_file_range);
  if (!out_append) suits |= static_cast<unsigned>(TransferPath::splice);
  // sendfile writes at the output's own position, never at an offset.
  if (!out_at_offset_) suits |= static_cast<unsigned>(TransferPath::sendfile);
  left_ = allowed & suits;
  path_ = TransferPath::copy;
  have_path_ = next_path();
}

bool TransferEngine::next_path() noexcept {
  path_moved_ = 0;
  if (left_ == 0) return false;
  const TransferPaths first = left_ & (~left_ + 1);
  left_ &= ~first;
  path_ = static_cast<TransferPath>(first);
  return true;
}

void TransferEngine::finish() noexcept {
  if (in_pipe_ > 0 && pipe_) pipe_->discard();
  in_pipe_ = 0;
}

TransferStep TransferEngine::step() {
  last_ = step_once();
  return last_;
}

TransferStep TransferEngine::step_once() {
  TransferStep s;
  while (moved_ < count_) {
    if (!have_path_) {
      s.outcome = TransferOutcome::error;
      s.err = EOPNOTSUPP;  // no allowed path can move bytes between these two
      return s;
    }
    const Call c = call(
        static_cast<std::size_t>(std::min<std::uint64_t>(count_ - moved_, max_bytes_per_call)));
    moved_ += c.delivered;
    path_moved_ += c.delivered;
    s.moved += c.delivered;
    if (c.err == 0 && !c.eof) {
      s.outcome = moved_ < count_ ? TransferOutcome::progress : TransferOutcome::done;
      return s;
    }
    if (c.eof) {
      s.outcome = TransferOutcome::eof;
      return s;
    }
    if (would_block(c.err)) {
      s.outcome = TransferOutcome::would_block;
      return s;
    }
    if (path_moved_ == 0 && !lost_ && cannot_start(c.err)) {
      have_path_ = next_path();
      continue;
    }
    s.outcome = TransferOutcome::error;
    s.err = c.err;
    return s;
  }
  s.outcome = TransferOutcome::done;
  return s;
}

TransferEngine::Call TransferEngine::call(std::size_t want) {
  for (;;) {
    ssize_t n = 0;
    switch (path_) {
      case TransferPath::copy_file_range:
        n = ::copy_file_range(in_, in_pos(), out_, out_pos(), want, 0);
        break;
      case TransferPath::sendfile: {
        off_t at = in_offset_;
        n = ::sendfile(out_, in_, in_at_offset_ ? &at : nullptr, want);
        if (n > 0 && in_at_offset_) in_offset_ += n;
        break;
      }
      case TransferPath::splice: return via_splice(want);
      case TransferPath::copy: return via_copy(want);
    }
    if (n > 0) return {.delivered = static_cast<std::uint64_t>(n)};
    if (n == 0) return {.eof = true};
    if (errno == EINTR) continue;
    if (would_block(errno)) blocked_on(out_, POLLOUT);
    return {.err = errno};
  }
}

TransferEngine::Call TransferEngine::via_splice(std::size_t want) {
  if (in_is_pipe_ || out_is_pipe_) {
    // One side is a pipe already: no second one in between.
    const unsigned flags = SPLICE_F_MOVE | (mode_ == Mode::loop ? SPLICE_F_NONBLOCK : 0u);
    for (;;) {
      ssize_t n = ::splice(in_, in_pos(), out_, out_pos(), want, flags);
      if (n > 0) return {.delivered = static_cast<std::uint64_t>(n)};
      if (n == 0) return {.eof = true};
      if (errno == EINTR) continue;
      if (would_block(errno)) {
        const int e = errno;
        pollfd o{out_, POLLOUT, 0};
        // Whichever side blocked: the output unless it is writable already.
        if (::poll(&o, 1, 0) == 0)
          blocked_on(out_, POLLOUT);
        else
          blocked_on(in_, POLLIN);
        errno = e;
      }
      return {.err = errno};
    }
  }
  if (in_pipe_ == 0) {
    if (!pipe_->open()) return {.err = errno};
    const std::size_t fill = std::min(want, pipe_->capacity());
    for (;;) {
      // From a file at an offset, the offset moves only as bytes reach the output.
      loff_t at = in_offset_;
      ssize_t n = ::splice(in_, in_at_offset_ ? &at : nullptr, pipe_->write_end(), nullptr, fill,
                           SPLICE_F_MOVE | SPLICE_F_MORE);
      if (n > 0) {
        in_pipe_ = static_cast<std::size_t>(n);
        break;
      }
      if (n == 0) return {.eof = true};
      if (errno == EINTR) continue;
      if (would_block(errno)) blocked_on(in_, POLLIN);
      return {.err = errno};
    }
  }
  return drain_pipe();
}

// Moves what the pipe holds to the output.
TransferEngine::Call TransferEngine::drain_pipe() {
  Call c;
  while (in_pipe_ > 0) {
    ssize_t n = ::splice(pipe_->read_end(), nullptr, out_, out_pos(), in_pipe_,
                         SPLICE_F_MOVE | SPLICE_F_MORE);
    if (n > 0) {
      in_pipe_ -= static_cast<std::size_t>(n);
      c.delivered += static_cast<std::uint64_t>(n);
      if (in_at_offset_) in_offset_ += n;
      continue;
    }
    const int e = n == 0 ? EIO : errno;
    if (e == EINTR) continue;
    if (would_block(e)) {
      // The bytes already left the source: they wait in the pipe for the output.
      if (mode_ == Mode::blocking_caller) {
        wait_writable(out_);
        continue;
      }
      blocked_on(out_, POLLOUT);
      c.err = e;
      return c;
    }
    // What the pipe holds never reaches the output. A file at an offset is read again from
    // where the output stopped; a stream's bytes are gone, and no gap may pass silently.
    if (!in_at_offset_) lost_ = true;
    in_pipe_ = 0;
    pipe_->discard();
    c.err = e;
    return c;
  }
  return c;
}

TransferEngine::Call TransferEngine::via_copy(std::size_t want) {
  if (!copy_buf_) copy_buf_ = std::make_unique_for_overwrite<std::byte[]>(copy_chunk);
  std::byte* buf = copy_buf_.get();
  const std::size_t ask = std::min(want, copy_chunk);
  ssize_t got = 0;
  for (;;) {
    got = in_at_offset_ ? ::pread(in_, buf, ask, in_offset_) : ::read(in_, buf, ask);
    if (got >= 0) break;
    if (errno == EINTR) continue;
    if (would_block(errno)) blocked_on(in_, POLLIN);
    return {.err = errno};
  }
  if (got == 0) return {.eof = true};
  Call c;
  const auto have = static_cast<std::size_t>(got);
  std::size_t put = 0;
  while (put < have) {
    const std::size_t rest = have - put;
    ssize_t w = out_at_offset_   ? ::pwrite(out_, buf + put, rest, out_offset_)
                : out_is_socket_ ? ::send(out_, buf + put, rest, MSG_NOSIGNAL)
                                 : ::write(out_, buf + put, rest);
    if (w > 0) {
      put += static_cast<std::size_t>(w);
      if (out_at_offset_) out_offset_ += w;
      continue;
    }
    const int e = w == 0 ? EIO : errno;
    if (e == EINTR) continue;
    if (would_block(e) && in_at_offset_) {
      blocked_on(out_, POLLOUT);  // the rest stays in the file for the next step
      c.err = e;
      break;
    }
    if (would_block(e) && mode_ == Mode::blocking_caller) {
      wait_writable(out_);
      continue;
    }
    // Read from a stream and not stored. (The loop's transfers from a stream write at an
    // offset, into a file, which never blocks.)
    if (!in_at_offset_) lost_ = true;
    c.err = would_block(e) ? EIO : e;
    break;
  }
  c.delivered = put;
  if (in_at_offset_) in_offset_ += static_cast<loff_t>(put);
  return c;
}

}  // namespace detail
}  // namespace niox
