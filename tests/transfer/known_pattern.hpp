// The bytes the checksum tests' known answers were computed on (with the reference xxHash
// library and xxhsum): byte i is (31 i + 7) mod 256.
#pragma once

#include <cstddef>
#include <string>

namespace niox::transfer::test {

inline std::string known_pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) {
    s[i] = static_cast<char>((i * 31 + 7) & 0xff);
  }
  return s;
}

}  // namespace niox::transfer::test
