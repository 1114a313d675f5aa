// Xxh3 — the XXH3 64-bit hash (seed 0, default secret), written from the public algorithm
// description (xxHash specification, "XXH3 algorithm description"); `xxhsum -H3` prints the same
// value for a file. niox-transfer's checksum since XXH64 cost a third of each end's CPU: XXH3
// consumes 64-byte stripes as eight 32x32->64-bit multiply-accumulate lanes, which the vector
// unit runs side by side (AVX2 where the CPU has it, chosen at run time, else SSE2), so
// hashing a chunk that is already in the cache costs a fraction of what XXH64's dependent
// 64-bit multiplies do. Like XXH64 it guards against accidental damage, not against an attacker.
//
// Incremental: update() any number of times with pieces of any size, then digest(); the result
// equals the one-shot xxh3_64() of the concatenation. digest() does not change the state.
//
//   input:  [ consumed stripes ............ | tail_ (1..256 bytes, not yet known to be last) ]
//           every 64-byte stripe that at least one more byte follows is accumulated at once,
//           and the accumulators are scrambled after every 16th (one 1 KiB block); the tail
//           waits in the buffer, with the 64 bytes before it kept for the final stripe, which
//           digest() reads as the input's last 64 bytes (the specification's "last stripe").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace niox::transfer {

class Xxh3 {
 public:
  Xxh3() noexcept { reset(); }

  void reset() noexcept;
  Xxh3& update(std::span<const std::byte> data) noexcept;
  Xxh3& update(std::string_view text) noexcept {
    return update(std::as_bytes(std::span(text.data(), text.size())));
  }
  std::uint64_t digest() const noexcept;
  std::uint64_t total_length() const noexcept { return total_len_; }

 private:
  static constexpr std::size_t buffer_size = 256;  // four stripes; holds any input up to 240 bytes

  void consume(const unsigned char* p, std::size_t stripes) noexcept;

  alignas(64) std::uint64_t acc_[8];
  std::uint64_t total_len_ = 0;
  std::size_t stripe_in_block_ = 0;  // stripes of the current 1 KiB block already accumulated
  std::size_t tail_len_ = 0;
  alignas(64) unsigned char tail_[buffer_size];
  unsigned char before_tail_[64];  // the 64 consumed bytes just before tail_
};

std::uint64_t xxh3_64(std::span<const std::byte> data) noexcept;
std::uint64_t xxh3_64(std::string_view text) noexcept;

// The stripe kernel in use: AVX2 where the CPU has it, else SSE2 (every x86-64), else portable
// C++. Switching is for tests (each kernel against the known answers), before any hashing, on
// one thread; false when the CPU lacks the kernel.
enum class Xxh3Kernel { scalar, sse2, avx2 };
Xxh3Kernel xxh3_kernel() noexcept;
bool xxh3_use_kernel(Xxh3Kernel kernel) noexcept;

}  // namespace niox::transfer
