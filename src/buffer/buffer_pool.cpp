#include <niox/buffer/buffer_pool.hpp>

#include "buffer/block_cache.hpp"

#include <memory>
#include <span>

namespace niox {

static_assert(BufferPool::min_class_size == detail::block_class_size(0));
static_assert(BufferPool::max_class_size == detail::max_block_size);
static_assert(BufferPool::max_cached_bytes_per_class == detail::max_cached_bytes_per_class);
static_assert(BufferPool::max_cached_blocks_per_class == detail::max_cached_blocks_per_class);

namespace {

struct BlockDeleter {
  unsigned cls;
  void operator()(void* p) const noexcept { detail::give_block(cls, p); }
};

// Takes shared_ptr control blocks from the cache's smallest class.
template <class T>
struct ControlAllocator {
  using value_type = T;
  ControlAllocator() noexcept = default;
  template <class U>
  ControlAllocator(const ControlAllocator<U>&) noexcept {}  // NOLINT: rebinding

  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t));
    if (n == 1 && sizeof(T) <= detail::block_class_size(0)) {
      return static_cast<T*>(detail::take_block(0));
    }
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n == 1 && sizeof(T) <= detail::block_class_size(0)) {
      detail::give_block(0, p);
      return;
    }
    std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const ControlAllocator<U>&) const noexcept {
    return true;
  }
};

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
  // On failure this constructor hands the block to the deleter itself.
  std::shared_ptr<void> owner(block, BlockDeleter{cls}, ControlAllocator<char>());
  return ByteBuffer::wrap_shared(std::span<std::byte>(static_cast<std::byte*>(block), n),
                                 std::move(owner));
}

BufferPool::Stats BufferPool::stats() const noexcept {
  Stats s;
  s.allocations = allocations_;
  s.reused = reused_;
  s.unpooled = unpooled_;
  for (unsigned cls = 0; cls < detail::block_class_count; ++cls) {
    s.cached_bytes += detail::cached_block_count(cls) * detail::block_class_size(cls);
  }
  return s;
}

}  // namespace niox
