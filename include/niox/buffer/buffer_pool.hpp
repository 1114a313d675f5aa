// BufferPool: reuses the memory of ByteBuffers in size classes (Netty's pooled allocator, in
// small), so a busy connection does not malloc and zero-fill a fresh receive buffer per read.
//
//   ByteBuffer b = BufferPool::for_this_thread().allocate(2048);  // capacity 2048, position 0
//
// Sizes are rounded up to a power of two from min_class_size (64) to max_class_size (64 KiB)
// for the block; the buffer's capacity is exactly the size asked for. Larger requests are
// plain ByteBuffer::allocate(). When the last view of a pooled buffer is gone its block goes
// back to the pool it came from, from any thread, or is freed when that class already caches
// max_cached_bytes_per_class. A pool lives as long as its last outstanding buffer.
//
// Unlike ByteBuffer::allocate(), the bytes of a pooled buffer are NOT zero-filled: they may
// hold what an earlier user of the block left there. Read only what was written.
//
// Threads: allocate() and releases may happen on any thread (a mutex per pool, taken once per
// allocate and release); for_this_thread() gives each thread its own pool so event loops do
// not share one.
#pragma once

#include <niox/buffer/byte_buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace niox {

class BufferPool {
 public:
  static constexpr std::size_t min_class_size = 64;
  static constexpr std::size_t max_class_size = 64 * 1024;
  static constexpr std::size_t default_max_cached_bytes_per_class = 512 * 1024;

  struct Stats {
    std::uint64_t allocations = 0;   // allocate() calls served from a size class
    std::uint64_t reused = 0;        // ... of which took a cached block
    std::uint64_t unpooled = 0;      // allocate() calls above max_class_size
    std::size_t cached_bytes = 0;    // free blocks held now
    std::size_t outstanding_bytes = 0;  // blocks held by live buffers now
  };

  explicit BufferPool(std::size_t max_cached_bytes_per_class = default_max_cached_bytes_per_class);
  // Copies share the same pool.
  BufferPool(const BufferPool&) = default;
  BufferPool& operator=(const BufferPool&) = default;

  // The calling thread's pool (created on first use).
  static BufferPool& for_this_thread();

  // A buffer of capacity n (position 0, limit n). Throws std::bad_alloc.
  ByteBuffer allocate(std::size_t n);
  Stats stats() const;
  // Frees the cached blocks (outstanding ones come back later as usual).
  void trim();

  // The block size that serves a request of n bytes (0 when n is above max_class_size).
  static std::size_t class_size(std::size_t n) noexcept;

 private:
  class Arena;
  std::shared_ptr<Arena> arena_;
};

}  // namespace niox
