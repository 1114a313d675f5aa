#include <niox/channels/channel.hpp>

namespace niox {

namespace detail {
std::int64_t throw_if(std::int64_t value, const std::error_code& ec, const char* what) {
  if (ec) {
    throw std::system_error(ec, what);
  }
  return value;
}

std::span<ByteBuffer> checked_subspan(std::span<ByteBuffer> buffers, std::size_t offset,
                                      std::size_t length) {
  if (offset > buffers.size() || length > buffers.size() - offset) {
    detail::throw_index(offset, length, buffers.size());
  }
  return buffers.subspan(offset, length);
}
}  // namespace detail

std::int64_t ReadableByteChannel::read(ByteBuffer& dst) {
  std::error_code ec;
  auto n = read(dst, ec);
  return detail::throw_if(n, ec, "read");
}

std::int64_t WritableByteChannel::write(ByteBuffer& src) {
  std::error_code ec;
  auto n = write(src, ec);
  return detail::throw_if(n, ec, "write");
}

std::int64_t ScatteringByteChannel::read(std::span<ByteBuffer> dsts) {
  std::error_code ec;
  auto n = read(dsts, ec);
  return detail::throw_if(n, ec, "read");
}

std::int64_t ScatteringByteChannel::read(std::span<ByteBuffer> dsts, std::size_t offset,
                                         std::size_t length) {
  return read(detail::checked_subspan(dsts, offset, length));
}

std::int64_t ScatteringByteChannel::read(std::span<ByteBuffer> dsts, std::size_t offset,
                                         std::size_t length, std::error_code& ec) {
  return read(detail::checked_subspan(dsts, offset, length), ec);
}

std::int64_t GatheringByteChannel::write(std::span<ByteBuffer> srcs) {
  std::error_code ec;
  auto n = write(srcs, ec);
  return detail::throw_if(n, ec, "write");
}

std::int64_t GatheringByteChannel::write(std::span<ByteBuffer> srcs, std::size_t offset,
                                         std::size_t length) {
  return write(detail::checked_subspan(srcs, offset, length));
}

std::int64_t GatheringByteChannel::write(std::span<ByteBuffer> srcs, std::size_t offset,
                                         std::size_t length, std::error_code& ec) {
  return write(detail::checked_subspan(srcs, offset, length), ec);
}

}  // namespace niox
