#include <niox/buffer/buffer_pool.hpp>

#include "buffer/block_cache.hpp"

#include <memory>
#include <new>
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
  std::shared_ptr<void> owner(block, BlockDeleter{cls}, detail::CachedObjectAllocator<char>());
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
