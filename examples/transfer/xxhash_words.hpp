// What the xxHash specification's algorithms share: little-endian word reads, the 64-bit primes
// and XXH64's final avalanche (XXH3 reuses it for inputs of up to 3 bytes). Private to
// xxhash64.cpp and xxh3.cpp.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace niox::transfer::xxhash {

inline constexpr std::uint64_t prime64_1 = 0x9E3779B185EBCA87ULL;
inline constexpr std::uint64_t prime64_2 = 0xC2B2AE3D27D4EB4FULL;
inline constexpr std::uint64_t prime64_3 = 0x165667B19E3779F9ULL;
inline constexpr std::uint64_t prime64_4 = 0x85EBCA77C2B2AE63ULL;
inline constexpr std::uint64_t prime64_5 = 0x27D4EB2F165667C5ULL;

// The specification reads input (and XXH3's secret) words little-endian.
inline std::uint64_t read64(const unsigned char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) {
    v = __builtin_bswap64(v);
  }
  return v;
}

inline std::uint32_t read32(const unsigned char* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  if constexpr (std::endian::native == std::endian::big) {
    v = __builtin_bswap32(v);
  }
  return v;
}

inline std::uint64_t avalanche64(std::uint64_t h) noexcept {
  h ^= h >> 33;
  h *= prime64_2;
  h ^= h >> 29;
  h *= prime64_3;
  return h ^ (h >> 32);
}

}  // namespace niox::transfer::xxhash
