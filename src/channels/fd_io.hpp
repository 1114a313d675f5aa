// Private: the read/write loops shared by every channel, built on buffer/gather.hpp.
#pragma once

#include <niox/buffer/byte_buffer.hpp>

#include <cerrno>
#include <cstdint>
#include <span>
#include <system_error>

#include <sys/types.h>
#include <sys/uio.h>

namespace niox::detail {

// How bytes leave a descriptor: sockets use send/sendmsg with MSG_NOSIGNAL, pipes block SIGPIPE
// around write/writev, files use plain write/writev.
enum class FdKind { file, socket, pipe };

inline std::error_code errno_code(int e = errno) noexcept { return {e, std::system_category()}; }
inline bool would_block(int e) noexcept { return e == EAGAIN || e == EWOULDBLOCK; }

// One read(2)/readv(2) (or pread/preadv when position >= 0) into [position, limit) of the
// buffers: bytes read, -1 at end of stream, 0 if nothing has room or it would block. EINTR is
// retried.
std::int64_t read_into(int fd, ByteBuffer& dst, off_t position, std::error_code& ec);
std::int64_t scatter_read(int fd, std::span<ByteBuffer> dsts, off_t position, std::error_code& ec);
// What a read's result n (errno when negative) means, as above; advances dsts by n.
std::int64_t read_outcome(ssize_t n, std::span<ByteBuffer> dsts, std::error_code& ec) noexcept;

// One write of the iovecs as they are (nothing copied): send/sendmsg with MSG_NOSIGNAL and
// send_flags on sockets, pwrite/pwritev from position when >= 0. The syscall's result (-1 and
// errno on failure); EINTR is the caller's.
ssize_t write_once(int fd, FdKind kind, const iovec* iov, std::size_t n_iov, off_t position,
                   int send_flags);

// Writes the buffers' remaining bytes, advancing each by exactly what was written. Keeps going
// until all is written, or (write_all false) until the kernel would block. With position >= 0
// uses pwrite/pwritev from there. An error after some bytes moved returns those bytes and
// leaves ec clear: the error repeats on the next call.
std::int64_t write_from(int fd, FdKind kind, ByteBuffer& src, off_t position, bool write_all,
                        std::error_code& ec);
std::int64_t gather_write(int fd, FdKind kind, std::span<ByteBuffer> srcs, off_t position,
                          bool write_all, std::error_code& ec);
// gather_write's one pass (write_all false) on socket fd, never blocking whatever the socket's
// O_NONBLOCK (MSG_DONTWAIT): for a caller on an event loop's thread.
std::int64_t send_available(int fd, std::span<ByteBuffer> srcs, std::error_code& ec);

// Blocks SIGPIPE for this thread while alive; a SIGPIPE raised meanwhile (by a write to a
// closed pipe) is consumed before the old mask comes back, unless one was pending already.
class SigpipeBlock {
 public:
  SigpipeBlock() noexcept;
  ~SigpipeBlock();
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  bool was_blocked_ = false;
  bool was_pending_ = false;
};

bool set_nonblocking(int fd, bool nonblocking, std::error_code& ec) noexcept;
bool is_nonblocking(int fd) noexcept;

}  // namespace niox::detail
