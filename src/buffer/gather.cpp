#include <niox/buffer/gather.hpp>

#include <algorithm>

namespace niox {

namespace {
template <class Buffers, class Base>
std::size_t build(Buffers buffers, std::span<iovec> out, std::size_t max_bytes, Base base) {
  std::size_t n = 0;
  for (auto& b : buffers) {
    if (n == out.size() || max_bytes == 0) {
      break;
    }
    std::size_t len = std::min(b.remaining(), max_bytes);
    if (len == 0) {
      continue;
    }
    out[n++] = iovec{base(b), len};
    max_bytes -= len;
  }
  return n;
}
}  // namespace

std::size_t gather_iovecs(std::span<const ByteBuffer> buffers, std::span<iovec> out,
                          std::size_t max_bytes) noexcept {
  return build(buffers, out, max_bytes, [](const ByteBuffer& b) {
    // writev never writes through iov_base; the cast only satisfies struct iovec.
    return const_cast<std::byte*>(b.bytes().data());
  });
}

std::size_t scatter_iovecs(std::span<ByteBuffer> buffers, std::span<iovec> out,
                           std::size_t max_bytes) {
  for (auto& b : buffers) {
    if (b.is_read_only() && b.has_remaining()) {
      throw ReadOnlyBufferException();
    }
  }
  return build(buffers, out, max_bytes, [](ByteBuffer& b) { return b.writable_bytes().data(); });
}

std::size_t advance(std::span<ByteBuffer> buffers, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i < buffers.size(); ++i) {
    ByteBuffer& b = buffers[i];
    std::size_t step = std::min(n, b.remaining());
    b.position(b.position() + step);
    n -= step;
    if (b.has_remaining()) {
      break;
    }
  }
  return i;
}

std::size_t gather_iovecs(std::span<const ByteBuffer> buffers, std::span<iovec> out,
                          std::size_t max_bytes, std::span<std::byte> scratch,
                          std::size_t coalesce_max, std::size_t& bytes) noexcept {
  GatherBuilder b(out, max_bytes, scratch, coalesce_max);
  for (const auto& buf : buffers) {
    if (!b.add(buf.bytes())) {
      break;
    }
  }
  bytes = b.bytes();
  return b.iovec_count();
}

std::size_t copy_into(ByteBuffer& src, std::span<ByteBuffer> buffers) {
  std::size_t moved = 0;
  for (ByteBuffer& b : buffers) {
    const std::size_t n = std::min(src.remaining(), b.remaining());
    if (n == 0) continue;
    b.put(src.bytes().first(n));
    src.position(src.position() + n);
    moved += n;
  }
  return moved;
}

std::size_t total_remaining(std::span<const ByteBuffer> buffers) noexcept {
  std::size_t sum = 0;
  for (const auto& b : buffers) {
    sum += b.remaining();
  }
  return sum;
}

}  // namespace niox
