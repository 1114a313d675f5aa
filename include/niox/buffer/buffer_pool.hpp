// BufferPool: reuses the memory of ByteBuffers in size classes (Netty's pooled allocator, in
// small), so a busy connection does not malloc and zero-fill a fresh receive buffer per read.
//
//   ByteBuffer b = BufferPool::for_this_thread().allocate(2048);  // capacity 2048, position 0
//
// Sizes are rounded up to a power of two from min_class_size (64) to max_class_size (64 KiB)
// for the block; the buffer's capacity is exactly the size asked for. Larger requests are
// plain ByteBuffer::allocate().
//
// Who owns what: each thread has one pool, a cache of free blocks per size class. allocate()
// takes a block and the buffer's shared_ptr control block from the calling thread's cache, so
// once warm it costs no malloc and no lock. The buffer (and every view of it) owns the block;
// when the last view is gone the block goes to the cache of the thread that dropped it, which
// keeps at most max_cached_bytes_per_class (and max_cached_blocks_per_class blocks) per class
// and frees the rest. A thread's cached blocks are freed when the thread exits; buffers still
// alive then stay valid.
//
// Unlike ByteBuffer::allocate(), the bytes of a pooled buffer are NOT zero-filled: they may
// hold what an earlier user of the block left there. Read only what was written.
//
// Threads: call allocate() and stats() on the pool of the calling thread (for_this_thread());
// buffers may be passed to and released on any thread. The outstanding count is the one
// figure kept across threads (an atomic per pool, touched once per allocate and release); it
// outlives the pool's thread as long as one of its buffers does.
#pragma once

#include <niox/buffer/byte_buffer.hpp>

#include <cstddef>
#include <cstdint>

namespace niox {

class BufferPool {
 public:
  static constexpr std::size_t min_class_size = 64;
  static constexpr std::size_t max_class_size = 64 * 1024;
  static constexpr std::size_t max_cached_bytes_per_class = 4 * 1024 * 1024;
  static constexpr std::size_t max_cached_blocks_per_class = 256;

  // Counters of this thread's pool (plain counters: no atomics, no locks).
  struct Stats {
    std::uint64_t allocations = 0;  // allocate() calls served from a size class
    std::uint64_t reused = 0;       // ... of which took a cached block
    std::uint64_t unpooled = 0;     // allocate() calls above max_class_size
    // Free blocks this thread's cache holds now, all classes (the cache also keeps the buffers'
    // shared_ptr control blocks and other small objects of the library).
    std::size_t cached_bytes = 0;
    // Buffers this thread's pool handed out whose memory is still held: by a buffer or any view
    // of it, on any thread (released ones are counted as they go, wherever that is). What a
    // server holds while its connections are idle, which should be nothing.
    std::uint64_t outstanding = 0;
  };

  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // The calling thread's pool.
  static BufferPool& for_this_thread() noexcept;

  // A buffer of capacity n (position 0, limit n), bytes unspecified. Throws std::bad_alloc.
  ByteBuffer allocate(std::size_t n);
  Stats stats() const noexcept;

  // The block size that serves a request of n bytes (0 when n is above max_class_size).
  static std::size_t class_size(std::size_t n) noexcept;

 private:
  constexpr BufferPool() noexcept = default;

  std::uint64_t allocations_ = 0;
  std::uint64_t reused_ = 0;
  std::uint64_t unpooled_ = 0;
};

namespace detail {
// Not API: how many buffers of one thread's pool are alive. Created with the thread's first
// pooled allocation; freed by the thread at exit, or, if buffers are still alive then, by the
// release of the last of them.
struct PoolOutstanding;
}  // namespace detail

namespace detail {

// Not API: single objects of the library (a pooled buffer's shared_ptr control block, a
// ChannelPromise's state) from the calling thread's block cache, the one BufferPool's blocks
// come from: up to max_class_size bytes from the cache, anything larger from operator new.
// Free them on any thread with the size they were allocated with.
void* allocate_cached_object(std::size_t bytes);
void free_cached_object(void* p, std::size_t bytes) noexcept;

template <class T>
struct CachedObjectAllocator {
  using value_type = T;
  static_assert(alignof(T) <= alignof(std::max_align_t));
  CachedObjectAllocator() noexcept = default;
  template <class U>
  CachedObjectAllocator(const CachedObjectAllocator<U>&) noexcept {}  // NOLINT: rebinding
  T* allocate(std::size_t n) { return static_cast<T*>(allocate_cached_object(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { free_cached_object(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const CachedObjectAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace detail

}  // namespace niox
