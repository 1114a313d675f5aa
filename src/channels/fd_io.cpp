#include "channels/fd_io.hpp"

#include <niox/buffer/gather.hpp>

#include <array>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <memory>

#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

namespace niox::detail {

ssize_t write_once(int fd, FdKind kind, const iovec* iov, std::size_t n_iov, off_t position,
                   int send_flags) {
  if (kind == FdKind::socket) {
    if (n_iov == 1) {
      return ::send(fd, iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL | send_flags);
    }
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(iov);
    msg.msg_iovlen = n_iov;
    return ::sendmsg(fd, &msg, MSG_NOSIGNAL | send_flags);
  }
  if (position >= 0) {
    return n_iov == 1 ? ::pwrite(fd, iov[0].iov_base, iov[0].iov_len, position)
                      : ::pwritev(fd, iov, static_cast<int>(n_iov), position);
  }
  return n_iov == 1 ? ::write(fd, iov[0].iov_base, iov[0].iov_len)
                    : ::writev(fd, iov, static_cast<int>(n_iov));
}

namespace {
// Enough for one call; the iovecs live on the stack, never on the heap.
using IovArray = std::array<iovec, max_iovecs_per_call>;

// Coalescing (see GatherBuilder). A writev/sendmsg costs more than write/send of the same
// bytes: per call (importing the iovec array, the iterator over it; a 2 x 1 KiB sendmsg lost to
// memcpy + send by 10-15%) and per iovec (1024 x 16 B took 3-4x the CPU of memcpy + send). A
// memcpy of a few hundred bytes from hot memory costs less than either. Measured with
// bench/gather_bench.cpp (bench/README.md "## gather"):
//  - the whole write is at most whole_max (16 KiB): copy all of it, one send/write. Up to that
//    size the copy is never dearer than the sendmsg it replaces (2 x 4 KiB and 8 x 1 KiB tie,
//    smaller ones win);
//  - otherwise only runs of segments of at most tiny_max (512 B) are copied, each run cut where
//    the 64 KiB scratch fills (one more call per 64 KiB of tiny segments). Copying the 1 KiB
//    segments of a large write too made 1024 x 1 KiB dearer than one writev (380 against
//    170 us/MB with a 16 KiB scratch, 290 against 167-228 with 64 KiB): the extra calls
//    outweigh the iovecs saved. The 64 KiB scratch makes a quarter of the calls a 16 KiB one
//    would for long runs of tiny segments (1024 x 128 B: 286 against 333 us/MB).
// The scratch is per thread, allocated on first use and reused, so a warm write allocates
// nothing. It is page-aligned: O_DIRECT files need aligned iovecs, and copies of aligned pieces
// into an aligned scratch stay aligned (each run starts at a sum of earlier piece lengths).
constexpr std::size_t scratch_size = 64 * 1024;
constexpr std::size_t whole_max = 16 * 1024;
constexpr std::size_t tiny_max = 512;
constexpr std::size_t scratch_align = 4096;

struct FreeDeleter {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};

// The calling thread's scratch (empty if it cannot be allocated: then nothing is copied).
std::span<std::byte> thread_scratch() noexcept {
  thread_local std::unique_ptr<std::byte, FreeDeleter> mem;
  if (!mem) {
    mem.reset(static_cast<std::byte*>(std::aligned_alloc(scratch_align, scratch_size)));
    if (!mem) {
      return {};
    }
  }
  return {mem.get(), scratch_size};
}

// True when the buffers' remaining bytes add up to at most `limit`.
bool total_at_most(std::span<const ByteBuffer> bufs, std::size_t limit) noexcept {
  std::size_t sum = 0;
  for (const auto& b : bufs) {
    sum += b.remaining();
    if (sum > limit) {
      return false;
    }
  }
  return true;
}

std::int64_t gather_write_impl(int fd, FdKind kind, std::span<ByteBuffer> srcs, off_t position,
                               bool write_all, std::error_code& ec, int send_flags = 0) {
  ec.clear();
  std::size_t first = 0;
  while (first < srcs.size() && !srcs[first].has_remaining()) {
    ++first;
  }
  // One buffer goes out with write/send from its own memory; copying only pays across several.
  std::span<std::byte> scratch =
      srcs.size() - first > 1 ? thread_scratch() : std::span<std::byte>();
  std::size_t coalesce_max = tiny_max;
  std::int64_t total = 0;
  IovArray iov;
  while (first < srcs.size()) {
    std::size_t asked = 0;
    if (!scratch.empty()) {
      coalesce_max = total_at_most(srcs.subspan(first), whole_max) ? whole_max : tiny_max;
    }
    std::size_t n_iov =
        gather_iovecs(srcs.subspan(first), iov, max_bytes_per_call, scratch, coalesce_max, asked);
    if (n_iov == 0) {
      break;
    }
    ssize_t n =
        write_once(fd, kind, iov.data(), n_iov, position >= 0 ? position + total : -1, send_flags);
    if (n < 0) {
      int e = errno;
      if (e == EINTR) {
        continue;
      }
      // A blocking descriptor reports EAGAIN only with a send timeout: return what moved.
      if (!would_block(e) && total == 0) {
        ec = errno_code(e);
      }
      break;
    }
    if (n == 0) {
      break;  // nothing taken and no error: do not spin
    }
    total += n;
    // The scratch holds copies in stream order, so advancing the sources by n is exact even
    // when n ends inside a coalesced run.
    first += advance(srcs.subspan(first), static_cast<std::size_t>(n));
    if (!write_all && static_cast<std::size_t>(n) < asked) {
      break;  // the kernel took what it could; another call would only say EAGAIN
    }
  }
  return total;
}
}  // namespace

std::int64_t read_into(int fd, ByteBuffer& dst, off_t position, std::error_code& ec) {
  return scatter_read(fd, std::span<ByteBuffer>(&dst, 1), position, ec);
}

std::int64_t scatter_read(int fd, std::span<ByteBuffer> dsts, off_t position, std::error_code& ec) {
  ec.clear();
  IovArray iov;
  std::size_t n_iov = scatter_iovecs(dsts, iov, max_bytes_per_call);
  if (n_iov == 0) {
    return 0;
  }
  ssize_t n;
  do {
    if (position >= 0) {
      n = n_iov == 1 ? ::pread(fd, iov[0].iov_base, iov[0].iov_len, position)
                     : ::preadv(fd, iov.data(), static_cast<int>(n_iov), position);
    } else {
      n = n_iov == 1 ? ::read(fd, iov[0].iov_base, iov[0].iov_len)
                     : ::readv(fd, iov.data(), static_cast<int>(n_iov));
    }
  } while (n < 0 && errno == EINTR);
  return read_outcome(n, dsts, ec);
}

std::int64_t read_outcome(ssize_t n, std::span<ByteBuffer> dsts, std::error_code& ec) noexcept {
  if (n < 0) {
    if (!would_block(errno)) {
      ec = errno_code();
    }
    return 0;
  }
  if (n == 0) {
    return -1;
  }
  advance(dsts, static_cast<std::size_t>(n));
  return n;
}

std::int64_t write_from(int fd, FdKind kind, ByteBuffer& src, off_t position, bool write_all,
                        std::error_code& ec) {
  return gather_write(fd, kind, std::span<ByteBuffer>(&src, 1), position, write_all, ec);
}

std::int64_t gather_write(int fd, FdKind kind, std::span<ByteBuffer> srcs, off_t position,
                          bool write_all, std::error_code& ec) {
  if (kind == FdKind::pipe) {
    SigpipeBlock guard;
    return gather_write_impl(fd, kind, srcs, position, write_all, ec);
  }
  return gather_write_impl(fd, kind, srcs, position, write_all, ec);
}

std::int64_t send_available(int fd, std::span<ByteBuffer> srcs, std::error_code& ec) {
  return gather_write_impl(fd, FdKind::socket, srcs, -1, false, ec, MSG_DONTWAIT);
}

SigpipeBlock::SigpipeBlock() noexcept {
  sigset_t set;
  sigset_t old;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  was_blocked_ = sigismember(&old, SIGPIPE) == 1;
  sigset_t pending;
  sigpending(&pending);
  was_pending_ = sigismember(&pending, SIGPIPE) == 1;
}

SigpipeBlock::~SigpipeBlock() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  if (!was_pending_) {
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) == 1) {
      timespec zero{};
      while (sigtimedwait(&set, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
  }
  if (!was_blocked_) {
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  }
}

bool set_nonblocking(int fd, bool nonblocking, std::error_code& ec) noexcept {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) {
    ec = errno_code();
    return false;
  }
  int want = nonblocking ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (want != flags && ::fcntl(fd, F_SETFL, want) < 0) {
    ec = errno_code();
    return false;
  }
  ec.clear();
  return true;
}

bool is_nonblocking(int fd) noexcept {
  int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && (flags & O_NONBLOCK) != 0;
}

}  // namespace niox::detail
