#include "transport/block_cache.hpp"

#include <niox/transport/channel_future.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
// A cached block is poisoned: AddressSanitizer reports a use after its buffer was released.
#define NIOX_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define NIOX_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define NIOX_POISON(p, n) ((void)(p), (void)(n))
#define NIOX_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace niox::detail {

namespace {

constexpr std::size_t cache_bytes_per_class = 1024 * 1024;
constexpr std::size_t max_blocks_per_class = 256;

constexpr std::size_t class_limit(unsigned cls) noexcept {
  return std::min(max_blocks_per_class, cache_bytes_per_class / block_class_size(cls));
}

struct FreeList {
  struct Node {
    Node* next;
  };
  Node* head = nullptr;
  std::size_t count = 0;

  void* pop(std::size_t size) noexcept {
    Node* n = head;
    if (n != nullptr) {
      NIOX_UNPOISON(n, size);
      head = n->next;
      --count;
    }
    return n;
  }
  void push(void* p, std::size_t size) noexcept {
    auto* n = static_cast<Node*>(p);
    n->next = head;
    head = n;
    ++count;
    NIOX_POISON(p, size);
  }
  void release(std::size_t size) noexcept {
    while (void* p = pop(size)) {
      std::free(p);
    }
  }
};

// 0: not yet created on this thread, 1: alive, 2: destroyed (thread exit).
thread_local constinit int cache_state = 0;

struct BlockCache {
  std::array<FreeList, block_class_count> blocks;
  BlockCache() noexcept { cache_state = 1; }
  ~BlockCache() {
    cache_state = 2;
    for (unsigned cls = 0; cls < block_class_count; ++cls) {
      blocks[cls].release(block_class_size(cls));
    }
  }
};

BlockCache* block_cache() noexcept {
  if (cache_state == 2) {
    return nullptr;  // the thread is exiting: plain malloc/free from here on
  }
  thread_local BlockCache cache;
  return &cache;
}

}  // namespace

void* take_block(unsigned cls) {
  if (auto* c = block_cache()) {
    if (void* p = c->blocks[cls].pop(block_class_size(cls))) {
      return p;
    }
  }
  void* p = std::malloc(block_class_size(cls));
  if (p == nullptr) {
    throw std::bad_alloc();
  }
  return p;
}

void give_block(unsigned cls, void* p) noexcept {
  auto* c = block_cache();
  if (c != nullptr && c->blocks[cls].count < class_limit(cls)) {
    c->blocks[cls].push(p, block_class_size(cls));
  } else {
    std::free(p);
  }
}

void* allocate_promise_block(std::size_t bytes) {
  if (bytes > block_class_size(block_class_count - 1)) {
    return ::operator new(bytes);
  }
  return take_block(block_class_of(bytes));
}

void free_promise_block(void* p, std::size_t bytes) noexcept {
  if (bytes > block_class_size(block_class_count - 1)) {
    ::operator delete(p);
    return;
  }
  give_block(block_class_of(bytes), p);
}

}  // namespace niox::detail
