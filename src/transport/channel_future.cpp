#include <niox/transport/channel_future.hpp>

#include "buffer/block_cache.hpp"

#include <new>

namespace niox::detail {

// Promise states come from the per-thread block cache (buffer/block_cache.hpp).
void* allocate_promise_block(std::size_t bytes) {
  if (bytes > max_block_size) {
    return ::operator new(bytes);
  }
  return take_block(block_class_of(bytes));
}

void free_promise_block(void* p, std::size_t bytes) noexcept {
  if (bytes > max_block_size) {
    ::operator delete(p);
    return;
  }
  give_block(block_class_of(bytes), p);
}

}  // namespace niox::detail
