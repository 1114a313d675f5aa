#include <niox/buffer/buffer_pool.hpp>

#include "buffer/block_cache.hpp"

#include <atomic>
#include <memory>
#include <new>
#include <span>

namespace niox {

static_assert(BufferPool::min_class_size == detail::block_class_size(0));
static_assert(BufferPool::max_class_size == detail::max_block_size);
static_assert(BufferPool::max_cached_bytes_per_class == detail::max_cached_bytes_per_class);
static_assert(BufferPool::max_cached_blocks_per_class == detail::max_cached_blocks_per_class);

namespace detail {

struct PoolOutstanding {
  // Added once, when the pool's thread exits: from then on, whoever brings the count down to
  // the orphan mark frees this.
  static constexpr std::uint64_t orphan = std::uint64_t{1} << 62;
  std::atomic<std::uint64_t> count{0};

  void release() noexcept {
    if (count.fetch_sub(1, std::memory_order_acq_rel) == orphan + 1) {
      delete this;
    }
  }
  void orphan_at_thread_exit() noexcept {
    if (count.fetch_add(orphan, std::memory_order_acq_rel) == 0) {
      delete this;  // no buffer left to release it
    }
  }
};

}  // namespace detail

namespace {

struct BlockDeleter {
  unsigned cls;
  detail::PoolOutstanding* outstanding;
  void operator()(void* p) const noexcept {
    detail::give_block(cls, p);
    outstanding->release();
  }
};

// The calling thread's count, created on first use: threads that never allocate a pooled
// buffer (most of a program's) pay nothing at exit.
struct ThreadOutstanding {
  detail::PoolOutstanding* p = nullptr;
  detail::PoolOutstanding& get() {
    if (p == nullptr) {
      p = new detail::PoolOutstanding;
    }
    return *p;
  }
  ~ThreadOutstanding() {
    if (p != nullptr) {
      p->orphan_at_thread_exit();
    }
  }
};
thread_local ThreadOutstanding this_thread_outstanding;

}  // namespace

BufferPool& BufferPool::for_this_thread() noexcept {
  static thread_local constinit BufferPool pool;
  return pool;
}

std::size_t BufferPool::class_size(std::size_t n) noexcept {
  return n > max_class_size ? 0 : detail::block_class_size(detail::block_class_of(n));
}

ByteBuffer BufferPool::allocate(std::size_t n) {
  if (n > max_class_size) {
    ++unpooled_;
    return ByteBuffer::allocate(n);
  }
  unsigned cls = detail::block_class_of(n);
  void* block = detail::take_cached_block(cls);
  if (block != nullptr) {
    ++reused_;
  } else {
    block = detail::take_block(cls);
  }
  ++allocations_;
  detail::PoolOutstanding& outstanding = this_thread_outstanding.get();
  // Counted before the owner exists: on failure its constructor runs the deleter, which
  // releases the count along with the block.
  outstanding.count.fetch_add(1, std::memory_order_relaxed);
  std::shared_ptr<void> owner(block, BlockDeleter{cls, &outstanding},
                              detail::CachedObjectAllocator<char>());
  return ByteBuffer::wrap_shared(std::span<std::byte>(static_cast<std::byte*>(block), n),
                                 std::move(owner));
}

BufferPool::Stats BufferPool::stats() const noexcept {
  Stats s;
  s.allocations = allocations_;
  s.reused = reused_;
  s.unpooled = unpooled_;
  if (this_thread_outstanding.p != nullptr) {
    s.outstanding = this_thread_outstanding.p->count.load(std::memory_order_acquire);
  }
  for (unsigned cls = 0; cls < detail::block_class_count; ++cls) {
    s.cached_bytes += detail::cached_block_count(cls) * detail::block_class_size(cls);
  }
  return s;
}

namespace detail {

void* allocate_cached_object(std::size_t bytes) {
  if (bytes > max_block_size) {
    return ::operator new(bytes);
  }
  return take_block(block_class_of(bytes));
}

void free_cached_object(void* p, std::size_t bytes) noexcept {
  if (bytes > max_block_size) {
    ::operator delete(p);
    return;
  }
  give_block(block_class_of(bytes), p);
}

}  // namespace detail

}  // namespace niox
