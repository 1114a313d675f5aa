// Asio interop (header-only; include it only where standalone Asio is available — niox itself
// does not link Asio).
//
//   std::array<niox::ByteBuffer, 2> out{header, body};
//   asio::async_write(socket, niox::asio_const_buffers(out), [&](auto ec, std::size_t n) {
//     niox::asio_advance(out, n);  // positions move by exactly what Asio moved
//   });
//
// The sequences view each buffer's [position, limit) at the time the sequence is iterated; the
// ByteBuffers (and their memory) must outlive the Asio operation, and must not be moved or
// re-indexed while it runs. Advance them with asio_advance() after the completion: Asio never
// touches niox positions itself.
//
// Embedding a niox EventLoop in an io_context: see examples/asio_embed.cpp (poll the loop's
// pollable_fd() with a posix::stream_descriptor, call run_once(0ms) when it is readable).
#pragma once

#include <niox/buffer/byte_buffer.hpp>
#include <niox/buffer/gather.hpp>

#include <asio/buffer.hpp>

#include <cstddef>
#include <iterator>
#include <span>
#include <type_traits>

namespace niox {

// A span of ByteBuffers as an Asio ConstBufferSequence (Mutable = false) or
// MutableBufferSequence (Mutable = true).
template <bool Mutable>
class AsioBufferSequence {
  using Element = std::conditional_t<Mutable, ByteBuffer, const ByteBuffer>;

 public:
  using value_type = std::conditional_t<Mutable, asio::mutable_buffer, asio::const_buffer>;

  class const_iterator {
   public:
    using iterator_category = std::bidirectional_iterator_tag;
    using value_type = AsioBufferSequence::value_type;
    using difference_type = std::ptrdiff_t;
    using pointer = const value_type*;
    using reference = value_type;

    const_iterator() = default;
    explicit const_iterator(Element* p) : p_(p) {}
    value_type operator*() const {
      if constexpr (Mutable) {
        auto s = p_->writable_bytes();  // throws ReadOnlyBufferException for read-only buffers
        return value_type(s.data(), s.size());
      } else {
        auto s = p_->bytes();
        return value_type(s.data(), s.size());
      }
    }
    const_iterator& operator++() {
      ++p_;
      return *this;
    }
    const_iterator operator++(int) {
      auto t = *this;
      ++p_;
      return t;
    }
    const_iterator& operator--() {
      --p_;
      return *this;
    }
    const_iterator operator--(int) {
      auto t = *this;
      --p_;
      return t;
    }
    friend bool operator==(const_iterator a, const_iterator b) { return a.p_ == b.p_; }
    friend bool operator!=(const_iterator a, const_iterator b) { return a.p_ != b.p_; }

   private:
    Element* p_ = nullptr;
  };

  explicit AsioBufferSequence(std::span<Element> buffers) : buffers_(buffers) {}
  const_iterator begin() const { return const_iterator(buffers_.data()); }
  const_iterator end() const { return const_iterator(buffers_.data() + buffers_.size()); }

 private:
  std::span<Element> buffers_;
};

inline AsioBufferSequence<false> asio_const_buffers(std::span<const ByteBuffer> buffers) {
  return AsioBufferSequence<false>(buffers);
}
inline AsioBufferSequence<true> asio_mutable_buffers(std::span<ByteBuffer> buffers) {
  return AsioBufferSequence<true>(buffers);
}

// After an Asio completion that moved `n` bytes: advances the buffers' positions by exactly n,
// in order. Returns the index of the first buffer with bytes (or room) left.
inline std::size_t asio_advance(std::span<ByteBuffer> buffers, std::size_t n) noexcept {
  return niox::advance(buffers, n);
}

}  // namespace niox
