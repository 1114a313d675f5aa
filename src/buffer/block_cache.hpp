// Private: a per-thread cache of power-of-two memory blocks (64 B .. 64 KiB), the storage behind
// BufferPool and other hot-path objects of the library (shared_ptr control blocks, promise
// states). A block goes back to the cache of whichever thread frees it, a bounded number per
// size (max_cached_bytes_per_class, at most max_cached_blocks_per_class blocks); beyond that,
// and on a thread that is exiting, it is plain malloc/free. No locks: each thread touches only
// its own cache. Under AddressSanitizer a cached block is poisoned (all but the free-list link
// in its first bytes), so a use after release is reported.
#pragma once

#include <bit>
#include <cstddef>

namespace niox::detail {

inline constexpr unsigned block_min_shift = 6;   // 64 B
inline constexpr unsigned block_max_shift = 16;  // 64 KiB
inline constexpr std::size_t block_class_count = block_max_shift - block_min_shift + 1;
inline constexpr std::size_t max_block_size = std::size_t{1} << block_max_shift;

inline constexpr std::size_t max_cached_bytes_per_class = 4 * 1024 * 1024;
inline constexpr std::size_t max_cached_blocks_per_class = 256;

constexpr std::size_t block_class_size(unsigned cls) noexcept {
  return std::size_t{1} << (cls + block_min_shift);
}
// The smallest class holding `bytes` (0 <= bytes <= max_block_size).
constexpr unsigned block_class_of(std::size_t bytes) noexcept {
  if (bytes <= block_class_size(0)) {
    return 0;
  }
  return static_cast<unsigned>(std::bit_width(bytes - 1)) - block_min_shift;
}

// A cached block of block_class_size(cls) bytes from this thread's cache, or nullptr when it
// has none.
void* take_cached_block(unsigned cls) noexcept;
// A block of block_class_size(cls) bytes, malloc-aligned: cached if there is one, else fresh.
// Throws std::bad_alloc.
void* take_block(unsigned cls);
// Hands a block of class cls (from take_block, on any thread) to this thread's cache.
void give_block(unsigned cls, void* p) noexcept;
// How many free blocks of class cls this thread's cache holds now.
std::size_t cached_block_count(unsigned cls) noexcept;

}  // namespace niox::detail
