// FileChannel::transfer_to / transfer_from: the cheapest kernel path first, each path falling
// back to the next only when it cannot start (unsupported pair of descriptors); once a path has
// moved bytes, its errors end the call.
#include <niox/channels/file_channel.hpp>

#include <niox/buffer/gather.hpp>

#include "channels/fd_io.hpp"

#include <algorithm>
#include <limits>

#include <fcntl.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

namespace niox {

namespace {

enum class Outcome {
  done,         // count reached
  eof,          // the source ended first
  would_block,  // a non-blocking peer cannot take/give more now
  unsupported,  // this path cannot move bytes between these descriptors: try the next one
  error,
};

// What one path did: bytes it moved and how it ended.
struct Step {
  std::uint64_t moved = 0;
  Outcome outcome = Outcome::done;
  int err = 0;
};

bool unsupported_errno(int e) {
  return e == EINVAL || e == ENOSYS || e == EOPNOTSUPP || e == EXDEV || e == ENOTSUP;
}

std::size_t chunk(std::uint64_t left) {
  return static_cast<std::size_t>(std::min<std::uint64_t>(left, max_bytes_per_call));
}

Step fail(Step s, int e) {
  s.err = e;
  s.outcome = (s.moved == 0 && unsupported_errno(e)) ? Outcome::unsupported : Outcome::error;
  return s;
}

// The loop every path shares: `step(left)` moves up to `left` bytes (ssize_t result, errno on
// failure) until `count` bytes moved, the source ends (0), a non-blocking peer would block, or
// an error. EINTR is retried.
template <class StepFn>
Step pump(std::uint64_t count, StepFn step) {
  Step s;
  while (s.moved < count) {
    ssize_t n = step(count - s.moved);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (detail::would_block(errno)) {
        s.outcome = Outcome::would_block;
        return s;
      }
      return fail(s, errno);
    }
    if (n == 0) {
      s.outcome = Outcome::eof;
      return s;
    }
    s.moved += static_cast<std::uint64_t>(n);
  }
  return s;
}

// copy_file_range(in at in_off or its position, out at out_off or its position). Only regular
// files get here, which never report EAGAIN.
Step via_copy_file_range(int in, off_t* in_off, int out, off_t* out_off, std::uint64_t count) {
  return pump(count, [&](std::uint64_t left) {
    return ::copy_file_range(in, in_off, out, out_off, chunk(left), 0);
  });
}

Step via_sendfile(int in, off_t off, int out, std::uint64_t count) {
  return pump(count, [&](std::uint64_t left) { return ::sendfile(out, in, &off, chunk(left)); });
}

// A pipe for splicing; 1 MiB when the system allows it, so each round trip moves more.
struct SplicePipe {
  int r = -1;
  int w = -1;
  std::size_t capacity = 65536;
  bool open() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) < 0) return false;
    r = fds[0];
    w = fds[1];
    int got = ::fcntl(w, F_SETPIPE_SZ, 1 << 20);
    if (got > 0) capacity = static_cast<std::size_t>(got);
    return true;
  }
  ~SplicePipe() {
    detail::close_fd(r);
    detail::close_fd(w);
  }
};

// Moves exactly `len` bytes from the pipe to out (at *out_off if given). A non-blocking out is
// waited for: the bytes already left the source and must not be lost.
bool drain_pipe(int pipe_r, int out, off_t* out_off, std::size_t len, int& err) {
  while (len > 0) {
    ssize_t n = ::splice(pipe_r, nullptr, out, out_off, len, SPLICE_F_MOVE | SPLICE_F_MORE);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (detail::would_block(errno)) {
        pollfd p{out, POLLOUT, 0};
        ::poll(&p, 1, -1);
        continue;
      }
      err = errno;
      return false;
    }
    if (n == 0) {
      err = EIO;
      return false;
    }
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

// in (at *in_off or its position) -> pipe -> out (at *out_off or its position). When `in` is
// itself a pipe the intermediate one is skipped.
Step via_splice(int in, off_t* in_off, int out, off_t* out_off, std::uint64_t count,
                bool in_is_pipe) {
  if (in_is_pipe) {
    return pump(count, [&](std::uint64_t left) {
      return ::splice(in, nullptr, out, out_off, chunk(left), SPLICE_F_MOVE);
    });
  }
  SplicePipe p;
  if (!p.open()) {
    return fail(Step{}, errno);
  }
  return pump(count, [&](std::uint64_t left) -> ssize_t {
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(left, p.capacity));
    ssize_t n = ::splice(in, in_off, p.w, nullptr, want, SPLICE_F_MOVE | SPLICE_F_MORE);
    if (n <= 0) {
      return n;
    }
    int err = 0;
    if (!drain_pipe(p.r, out, out_off, static_cast<std::size_t>(n), err)) {
      // The bytes in the pipe are lost to the target; the source offset (explicit or not)
      // already moved past them, so report the error, never a silent gap. The first splice
      // into an unsupported target is the common "cannot start" case. drain_pipe retries
      // EINTR and waits out EAGAIN itself, so err is neither.
      errno = err;
      return -1;
    }
    return n;
  });
}

bool is_regular(int fd) {
  struct stat st;
  return fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}
bool is_append(int fd) {
  int fl = ::fcntl(fd, F_GETFL);
  return fl >= 0 && (fl & O_APPEND) != 0;
}
bool is_fifo(int fd) {
  struct stat st;
  return fd >= 0 && ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

constexpr std::size_t copy_chunk = 256 * 1024;

off_t to_off_checked(std::uint64_t v) {
  if (v > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max())) {
    throw IllegalArgumentException("position beyond the largest file offset");
  }
  return static_cast<off_t>(v);
}

bool allowed_path(TransferPaths allowed, TransferPath p) {
  return (allowed & static_cast<unsigned>(p)) != 0;
}

TransferResult finish(TransferResult r, const Step& s, TransferPath path, bool& stop,
                      std::error_code& ec) {
  r.bytes += s.moved;
  r.path = path;
  switch (s.outcome) {
    case Outcome::done: stop = true; break;
    case Outcome::eof:
      r.end_of_input = true;
      stop = true;
      break;
    case Outcome::would_block: stop = true; break;
    case Outcome::unsupported: stop = false; break;
    case Outcome::error:
      stop = true;
      if (r.bytes == 0) ec = detail::errno_code(s.err);
      break;
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
  ec.clear();
  TransferResult r;
  if (!is_open()) {
    ec = std::make_error_code(std::errc::bad_file_descriptor);
    return r;
  }
  if (!readable_) throw NonReadableChannelException();
  const std::uint64_t file_size = size();
  if (position >= file_size || count == 0) {
    r.end_of_input = count > 0;
    return r;
  }
  const std::uint64_t want = std::min(count, file_size - position);
  const bool short_file = want < count;
  const int out = target.native_handle();
  // sendfile and splice raise SIGPIPE on a closed socket or pipe; they have no MSG_NOSIGNAL.
  detail::SigpipeBlock no_sigpipe;
  bool stop = false;

  if (out >= 0 && allowed_path(allowed, TransferPath::copy_file_range) && is_regular(out) &&
      !is_append(out)) {  // copy_file_range refuses O_APPEND targets with EBADF
    off_t off = to_off_checked(position);
    r = finish(r, via_copy_file_range(fd(), &off, out, nullptr, want),
               TransferPath::copy_file_range, stop, ec);
  }
  if (!stop && out >= 0 && allowed_path(allowed, TransferPath::sendfile)) {
    r = finish(r, via_sendfile(fd(), to_off_checked(position + r.bytes), out, want - r.bytes),
               TransferPath::sendfile, stop, ec);
  }
  if (!stop && out >= 0 && allowed_path(allowed, TransferPath::splice)) {
    off_t off = to_off_checked(position + r.bytes);
    r = finish(r, via_splice(fd(), &off, out, nullptr, want - r.bytes, false), TransferPath::splice,
               stop, ec);
  }
  if (!stop && allowed_path(allowed, TransferPath::copy)) {
    r.path = TransferPath::copy;
    ByteBuffer buf =
        ByteBuffer::allocate(static_cast<std::size_t>(std::min<std::uint64_t>(want, copy_chunk)));
    while (r.bytes < want) {
      buf.clear();
      buf.limit(static_cast<std::size_t>(std::min<std::uint64_t>(want - r.bytes, buf.capacity())));
      std::error_code rec;
      std::int64_t n = detail::read_into(fd(), buf, to_off_checked(position + r.bytes), rec);
      if (rec) {
        if (r.bytes == 0) ec = rec;
        return r;
      }
      if (n <= 0) {
        r.end_of_input = true;
        return r;
      }
      buf.flip();
      std::error_code wec;
      std::int64_t w = target.write(buf, wec);
      if (wec) {
        if (r.bytes == 0) ec = wec;
        return r;
      }
      r.bytes += static_cast<std::uint64_t>(w);
      if (buf.has_remaining()) {
        return r;  // a non-blocking target took only part: the rest stays in the file
      }
    }
    stop = true;
  }
  if (!stop && !ec) {
    ec = std::make_error_code(std::errc::operation_not_supported);  // no allowed path could run
  }
  if (short_file && r.bytes == want) {
    r.end_of_input = true;
  }
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
  ec.clear();
  TransferResult r;
  if (!is_open()) {
    ec = std::make_error_code(std::errc::bad_file_descriptor);
    return r;
  }
  if (!writable_) throw NonWritableChannelException();
  if (count == 0) {
    return r;
  }
  const int in = source.native_handle();
  bool stop = false;
  if (in >= 0 && allowed_path(allowed, TransferPath::copy_file_range) && is_regular(in)) {
    off_t off = to_off_checked(position);
    r = finish(r, via_copy_file_range(in, nullptr, fd(), &off, count),
               TransferPath::copy_file_range, stop, ec);
  }
  // sendfile writes at the target's own offset, which transfer_from must not move: skipped.
  if (!stop && in >= 0 && allowed_path(allowed, TransferPath::splice)) {
    off_t off = to_off_checked(position + r.bytes);
    r = finish(r, via_splice(in, nullptr, fd(), &off, count - r.bytes, is_fifo(in)),
               TransferPath::splice, stop, ec);
  }
  if (!stop && allowed_path(allowed, TransferPath::copy)) {
    r.path = TransferPath::copy;
    ByteBuffer buf =
        ByteBuffer::allocate(static_cast<std::size_t>(std::min<std::uint64_t>(count, copy_chunk)));
    while (r.bytes < count) {
      buf.clear();
      buf.limit(static_cast<std::size_t>(std::min<std::uint64_t>(count - r.bytes, buf.capacity())));
      std::error_code rec;
      std::int64_t n = source.read(buf, rec);
      if (rec) {
        if (r.bytes == 0) ec = rec;
        return r;
      }
      if (n < 0) {
        r.end_of_input = true;
        return r;
      }
      if (n == 0) {
        return r;  // a non-blocking source has nothing more now
      }
      buf.flip();
      std::error_code wec;
      std::int64_t w = detail::write_from(fd(), detail::FdKind::file, buf,
                                          to_off_checked(position + r.bytes), true, wec);
      if (wec) {
        // Read from the source but not stored: report it even after partial progress.
        ec = wec;
        return r;
      }
      r.bytes += static_cast<std::uint64_t>(w);
    }
    stop = true;
  }
  if (!stop && !ec) {
    ec = std::make_error_code(std::errc::operation_not_supported);
  }
  return r;
}

}  // namespace niox
