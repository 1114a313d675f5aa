#include "buffer/block_cache.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define NIOX_BLOCK_CACHE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NIOX_BLOCK_CACHE_ASAN 1
#endif
#endif

#ifdef NIOX_BLOCK_CACHE_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace niox::detail {

namespace {

constexpr std::size_t class_limit(unsigned cls) noexcept {
  return std::min(max_cached_blocks_per_class, max_cached_bytes_per_class / block_class_size(cls));
}

// A cached block keeps the free-list link in its first bytes; the rest is poisoned.
void poison(void* p, unsigned cls) noexcept {
#ifdef NIOX_BLOCK_CACHE_ASAN
  ASAN_POISON_MEMORY_REGION(static_cast<char*>(p) + sizeof(void*),
                            block_class_size(cls) - sizeof(void*));
#else
  (void)p;
  (void)cls;
#endif
}

void unpoison(void* p, unsigned cls) noexcept {
#ifdef NIOX_BLOCK_CACHE_ASAN
  ASAN_UNPOISON_MEMORY_REGION(p, block_class_size(cls));
#else
  (void)p;
  (void)cls;
#endif
}

struct FreeList {
  struct Node {
    Node* next;
  };
  Node* head;
  std::uint32_t count;

  void* pop(unsigned cls) noexcept {
    Node* n = head;
    if (n != nullptr) {
      head = n->next;
      --count;
      unpoison(n, cls);
    }
    return n;
  }
  void push(unsigned cls, void* p) noexcept {
    auto* n = static_cast<Node*>(p);
    n->next = head;
    head = n;
    ++count;
    poison(p, cls);
  }
  void release(unsigned cls) noexcept {
    while (void* p = pop(cls)) {
      std::free(p);
    }
  }
};

constexpr auto class_limits = [] {
  std::array<std::uint32_t, block_class_count> limits{};
  for (unsigned cls = 0; cls < block_class_count; ++cls) {
    limits[cls] = static_cast<std::uint32_t>(class_limit(cls));
  }
  return limits;
}();

// The lists are plain, constant-initialised thread_locals: the hot path reads them with no
// initialisation guard and no call. What needs a destructor (giving the blocks back to malloc
// at thread exit) is a separate object, made on the thread's first use of the cache.
thread_local constinit std::array<FreeList, block_class_count> lists{};
// 0: not yet used on this thread, 1: alive, 2: released (the thread is exiting).
thread_local constinit int cache_state = 0;

struct ThreadExit {
  ThreadExit() noexcept { cache_state = 1; }
  ~ThreadExit() {
    cache_state = 2;
    for (unsigned cls = 0; cls < block_class_count; ++cls) {
      lists[cls].release(cls);
    }
  }
};

// Whether this thread may cache: registers the release at thread exit on first use.
[[gnu::noinline]] bool start_cache() noexcept {
  if (cache_state == 2) {
    return false;  // the thread is exiting: plain malloc/free from here on
  }
  thread_local ThreadExit at_exit;
  return cache_state == 1;
}

bool cache_alive() noexcept { return cache_state == 1 || start_cache(); }

}  // namespace

void* take_cached_block(unsigned cls) noexcept {
  return cache_state == 1 ? lists[cls].pop(cls) : nullptr;
}

void* take_block(unsigned cls) {
  if (void* p = take_cached_block(cls)) {
    return p;
  }
  void* p = std::malloc(block_class_size(cls));
  if (p == nullptr) {
    throw std::bad_alloc();
  }
  return p;
}

void give_block(unsigned cls, void* p) noexcept {
  if (cache_alive() && lists[cls].count < class_limits[cls]) {
    lists[cls].push(cls, p);
  } else {
    std::free(p);
  }
}

std::size_t cached_block_count(unsigned cls) noexcept {
  return cache_state == 1 ? lists[cls].count : 0;
}

}  // namespace niox::detail
