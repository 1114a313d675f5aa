#include <niox/channels/pipe.hpp>

#include <niox/channels/selector.hpp>

#include "channels/fd_io.hpp"

#include <fcntl.h>
#include <unistd.h>

namespace niox {

Pipe Pipe::open() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) < 0) {
    throw std::system_error(detail::errno_code(), "pipe2");
  }
  Pipe p;
  p.source_ = SourceChannel(fds[0]);
  p.sink_ = SinkChannel(fds[1]);
  return p;
}

std::int64_t Pipe::SourceChannel::read(ByteBuffer& dst, std::error_code& ec) {
  return detail::read_into(fd_.get(), dst, -1, ec);
}
std::int64_t Pipe::SourceChannel::read(std::span<ByteBuffer> dsts, std::error_code& ec) {
  return detail::scatter_read(fd_.get(), dsts, -1, ec);
}
int Pipe::SourceChannel::valid_ops() const noexcept { return SelectionKey::OP_READ; }

std::int64_t Pipe::SinkChannel::write(ByteBuffer& src, std::error_code& ec) {
  return detail::write_from(fd_.get(), detail::FdKind::pipe, src, -1, blocking_, ec);
}
std::int64_t Pipe::SinkChannel::write(std::span<ByteBuffer> srcs, std::error_code& ec) {
  return detail::gather_write(fd_.get(), detail::FdKind::pipe, srcs, -1, blocking_, ec);
}
int Pipe::SinkChannel::valid_ops() const noexcept { return SelectionKey::OP_WRITE; }

}  // namespace niox
