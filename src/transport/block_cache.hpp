// Private: a per-thread cache of power-of-two memory blocks (64 B .. 64 KiB) for the
// transport's hot path (receive buffers, their shared_ptr control blocks, promise states).
// A block goes back to the cache of whichever thread frees it, a bounded number per size;
// beyond that, and on a thread that is exiting, it is plain malloc/free.
#pragma once

#include <bit>
#include <cstddef>

namespace niox::detail {

inline constexpr unsigned block_min_shift = 6;   // 64 B
inline constexpr unsigned block_max_shift = 16;  // 64 KiB
inline constexpr std::size_t block_class_count = block_max_shift - block_min_shift + 1;

constexpr std::size_t block_class_size(unsigned cls) noexcept {
  return std::size_t{1} << (cls + block_min_shift);
}
// The smallest class holding `bytes` (1 <= bytes <= 64 KiB).
constexpr unsigned block_class_of(std::size_t bytes) noexcept {
  auto width = static_cast<unsigned>(std::bit_width(bytes - 1));
  return width <= block_min_shift ? 0 : width - block_min_shift;
}

// A block of block_class_size(cls) bytes, malloc-aligned. Throws std::bad_alloc.
void* take_block(unsigned cls);
void give_block(unsigned cls, void* p) noexcept;

}  // namespace niox::detail
