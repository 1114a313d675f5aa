// AdaptiveRecvBufferAllocator: sizes receive buffers from what recent reads returned (Netty's
// AdaptiveRecvByteBufAllocator) and decides when a read batch ends.
//
// The guess moves along a table of sizes (16-byte steps up to 512, then powers of two): a batch
// that filled its buffer grows the next guess quickly (4 steps), two small batches in a row
// shrink it slowly (1 step), always within [minimum, maximum]. So an idle chatty connection
// holds small buffers and a bulk one large ones, without a fixed worst-case size per connection.
//
// A transport's read loop, per readiness event (or completion batch):
//
//   auto& h = channel_handle;  h.reset(channel.config());
//   do {
//     ByteBuffer b = h.allocate();               // guess() bytes from the allocate function
//     h.attempted_bytes_read(b.remaining());
//     ssize_t n = read(fd, b ...);               // -1 for EOF, 0 for EAGAIN
//     h.last_bytes_read(n);
//     if (n <= 0) break;
//     h.increment_messages_read();
//     fire channel_read(b)
//   } while (h.continue_reading());
//   h.read_complete();  fire channel_read_complete
//
// Buffers come from an allocate function; the allocator itself holds no memory. The default one
// is the calling thread's BufferPool::for_this_thread().allocate (no malloc, no zeroing once
// warm): the bytes of a fresh buffer are unspecified, [0, limit) after a read and flip() is
// what the read stored.
#pragma once

#include <niox/buffer/byte_buffer.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <sys/types.h>

namespace niox {

class ChannelConfig;

class AdaptiveRecvBufferAllocator {
 public:
  using AllocateFunction = std::function<ByteBuffer(std::size_t)>;

  static constexpr std::size_t default_minimum = 64;
  static constexpr std::size_t default_initial = 2048;
  static constexpr std::size_t default_maximum = 65536;

  // Throws IllegalArgumentException unless 0 < minimum <= initial <= maximum. A null allocate
  // means the reading thread's BufferPool.
  explicit AdaptiveRecvBufferAllocator(std::size_t minimum = default_minimum,
                                       std::size_t initial = default_initial,
                                       std::size_t maximum = default_maximum,
                                       AllocateFunction allocate = nullptr);

  // Per-channel state: keep one per channel.
  class Handle {
   public:
    // Starts a read batch: takes max_messages_per_read and auto_read from the config.
    void reset(const ChannelConfig& config);
    void reset(int max_messages_per_read, bool auto_read) noexcept;
    ByteBuffer allocate() const;
    std::size_t guess() const noexcept { return next_size_; }
    // The largest guess this handle can make: what one read of a bulk stream may take.
    std::size_t maximum() const noexcept;
    void attempted_bytes_read(std::size_t n) noexcept {
      attempted_ = static_cast<std::uint32_t>(std::min<std::size_t>(n, UINT32_MAX));
    }
    // Bytes the last read returned (-1: end of stream, 0: nothing). One read(2) returns at most
    // 0x7ffff000 bytes on Linux; a larger count is kept as INT32_MAX.
    void last_bytes_read(ssize_t n) noexcept;
    ssize_t last_bytes_read() const noexcept { return last_; }
    void increment_messages_read(int n = 1) noexcept { messages_ += n; }
    // Another read in this batch? Only when auto-reading, below max_messages_per_read, and the
    // last read filled its buffer (more is probably waiting).
    bool continue_reading() const noexcept;
    // Ends the batch: its total feeds the next guess.
    void read_complete() noexcept;
    std::size_t total_bytes_read() const noexcept { return total_; }

   private:
    friend class AdaptiveRecvBufferAllocator;
    void record(std::size_t actual) noexcept;
    // The last read took all it was offered: more is probably waiting.
    bool filled() const noexcept {
      return last_ > 0 && static_cast<std::uint32_t>(last_) == attempted_;
    }

    // Every connection has one: the size table's index and size fit in 32 bits (at most 1 GiB),
    // and so do one read's count and what it could take. An attempt above 4 GiB is kept as
    // UINT32_MAX, which one read can no more fill than the real size: whether a read filled
    // its buffer is decided as before. The batch's total is summed over many reads and stays
    // 64-bit.
    const AdaptiveRecvBufferAllocator* owner_ = nullptr;
    std::uint16_t index_ = 0;
    bool decrease_now_ = false;
    bool auto_read_ = true;
    std::uint32_t next_size_ = 0;
    int max_messages_ = 16;
    int messages_ = 0;
    std::size_t total_ = 0;
    std::uint32_t attempted_ = 0;
    std::int32_t last_ = 0;
  };

  // The handle refers to this allocator, which must outlive it.
  Handle new_handle() const;

 private:
  std::size_t min_index_;
  std::size_t max_index_;
  std::size_t initial_index_;
  AllocateFunction allocate_;
};

}  // namespace niox
