#include "xxh3.hpp"
#include "xxhash_words.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace niox::transfer {
namespace {

constexpr std::uint64_t prime32_1 = 0x9E3779B1U;
constexpr std::uint64_t prime32_2 = 0x85EBCA77U;
constexpr std::uint64_t prime32_3 = 0xC2B2AE3DU;
using xxhash::prime64_1;
using xxhash::prime64_2;
using xxhash::prime64_3;
using xxhash::prime64_4;
using xxhash::prime64_5;
using xxhash::read32;
using xxhash::read64;
constexpr std::uint64_t prime_mx1 = 0x165667919E3779F9ULL;
constexpr std::uint64_t prime_mx2 = 0x9FB21C651E98DF25ULL;

constexpr std::size_t secret_size = 192;
constexpr std::size_t stripe_len = 64;
constexpr std::size_t stripes_per_block = (secret_size - stripe_len) / 8;  // 16
constexpr std::size_t mid_size_max = 240;

// The specification's default secret.
alignas(64) constexpr unsigned char secret[secret_size] = {
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
};

__extension__ typedef unsigned __int128 u128;

inline std::uint64_t mul128_fold64(std::uint64_t a, std::uint64_t b) noexcept {
  const u128 m = static_cast<u128>(a) * b;
  return static_cast<std::uint64_t>(m) ^ static_cast<std::uint64_t>(m >> 64);
}

inline std::uint64_t avalanche(std::uint64_t h) noexcept {
  h ^= h >> 37;
  h *= prime_mx1;
  return h ^ (h >> 32);
}

inline std::uint64_t mix16(const unsigned char* in, const unsigned char* sec) noexcept {
  return mul128_fold64(read64(in) ^ read64(sec), read64(in + 8) ^ read64(sec + 8));
}

// ---- inputs of up to 240 bytes: one-shot formulas over the whole input ----

std::uint64_t hash_short(const unsigned char* in, std::size_t len) noexcept {
  if (len == 0) {
    return xxhash::avalanche64(read64(secret + 56) ^ read64(secret + 64));
  }
  if (len <= 3) {
    const std::uint32_t combined = static_cast<std::uint32_t>(in[len - 1]) |
                                   static_cast<std::uint32_t>(len << 8) |
                                   static_cast<std::uint32_t>(in[0]) << 16 |
                                   static_cast<std::uint32_t>(in[len >> 1]) << 24;
    const std::uint64_t flip = read32(secret) ^ read32(secret + 4);
    return xxhash::avalanche64(flip ^ combined);
  }
  if (len <= 8) {
    const std::uint64_t combined =
        read32(in + len - 4) | static_cast<std::uint64_t>(read32(in)) << 32;
    std::uint64_t v = (read64(secret + 8) ^ read64(secret + 16)) ^ combined;
    v ^= std::rotl(v, 49) ^ std::rotl(v, 24);
    v *= prime_mx2;
    v ^= (v >> 35) + len;
    v *= prime_mx2;
    return v ^ (v >> 28);
  }
  if (len <= 16) {
    const std::uint64_t lo = (read64(secret + 24) ^ read64(secret + 32)) ^ read64(in);
    const std::uint64_t hi = (read64(secret + 40) ^ read64(secret + 48)) ^ read64(in + len - 8);
    return avalanche(len + __builtin_bswap64(lo) + hi + mul128_fold64(lo, hi));
  }
  std::uint64_t acc = len * prime64_1;
  if (len <= 128) {
    for (std::size_t i = (len - 1) / 32 + 1; i-- > 0;) {
      acc += mix16(in + 16 * i, secret + 32 * i);
      acc += mix16(in + len - 16 - 16 * i, secret + 32 * i + 16);
    }
    return avalanche(acc);
  }
  for (std::size_t i = 0; i < 8; ++i) {
    acc += mix16(in + 16 * i, secret + 16 * i);
  }
  acc = avalanche(acc);
  for (std::size_t i = 8; i < len / 16; ++i) {
    acc += mix16(in + 16 * i, secret + 16 * (i - 8) + 3);
  }
  acc += mix16(in + len - 16, secret + 119);
  return avalanche(acc);
}

// ---- longer inputs: stripes of 64 bytes into eight accumulators ----

// Accumulates `n` consecutive stripes from `p`, the k-th with the secret at `sec + 8k`.
void accumulate_scalar(std::uint64_t* acc, const unsigned char* p, const unsigned char* sec,
                       std::size_t n) noexcept {
  for (std::size_t s = 0; s < n; ++s, p += stripe_len, sec += 8) {
    for (std::size_t i = 0; i < 8; ++i) {
      const std::uint64_t data = read64(p + 8 * i);
      const std::uint64_t key = data ^ read64(sec + 8 * i);
      acc[i ^ 1] += data;
      acc[i] += (key & 0xFFFFFFFFu) * (key >> 32);
    }
  }
}

void scramble_scalar(std::uint64_t* acc) noexcept {
  const unsigned char* sec = secret + secret_size - stripe_len;
  for (std::size_t i = 0; i < 8; ++i) {
    std::uint64_t a = acc[i];
    a ^= a >> 47;
    a ^= read64(sec + 8 * i);
    acc[i] = a * prime32_1;
  }
}

#if defined(__x86_64__)
// The same two steps four lanes at a time: mul_epu32 is exactly the 32x32->64 product of the
// low and high halves; the 64-bit halves are swapped within each 128-bit lane for acc[i ^ 1].
__attribute__((target("avx2"))) void accumulate_avx2(std::uint64_t* acc, const unsigned char* p,
                                                     const unsigned char* sec, std::size_t n) noexcept {
  __m256i a0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(acc));
  __m256i a1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(acc + 4));
  for (std::size_t s = 0; s < n; ++s, p += stripe_len, sec += 8) {
    const __m256i d0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i d1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32));
    const __m256i k0 = _mm256_xor_si256(d0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sec)));
    const __m256i k1 = _mm256_xor_si256(d1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sec + 32)));
    a0 = _mm256_add_epi64(a0, _mm256_shuffle_epi32(d0, _MM_SHUFFLE(1, 0, 3, 2)));
    a1 = _mm256_add_epi64(a1, _mm256_shuffle_epi32(d1, _MM_SHUFFLE(1, 0, 3, 2)));
    a0 = _mm256_add_epi64(a0, _mm256_mul_epu32(k0, _mm256_srli_epi64(k0, 32)));
    a1 = _mm256_add_epi64(a1, _mm256_mul_epu32(k1, _mm256_srli_epi64(k1, 32)));
  }
  _mm256_store_si256(reinterpret_cast<__m256i*>(acc), a0);
  _mm256_store_si256(reinterpret_cast<__m256i*>(acc + 4), a1);
}

__attribute__((target("avx2"))) void scramble_avx2(std::uint64_t* acc) noexcept {
  const __m256i prime = _mm256_set1_epi32(static_cast<int>(prime32_1));
  const unsigned char* sec = secret + secret_size - stripe_len;
  for (std::size_t i = 0; i < 2; ++i) {
    __m256i a = _mm256_load_si256(reinterpret_cast<const __m256i*>(acc + 4 * i));
    a = _mm256_xor_si256(a, _mm256_srli_epi64(a, 47));
    a = _mm256_xor_si256(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sec + 32 * i)));
    const __m256i lo = _mm256_mul_epu32(a, prime);
    const __m256i hi = _mm256_mul_epu32(_mm256_shuffle_epi32(a, _MM_SHUFFLE(0, 3, 0, 1)), prime);
    _mm256_store_si256(reinterpret_cast<__m256i*>(acc + 4 * i), _mm256_add_epi64(lo, _mm256_slli_epi64(hi, 32)));
  }
}

// SSE2, which every x86-64 CPU has: two lanes at a time.
void accumulate_sse2(std::uint64_t* acc, const unsigned char* p, const unsigned char* sec,
                     std::size_t n) noexcept {
  __m128i a[4];
  for (std::size_t i = 0; i < 4; ++i) {
    a[i] = _mm_load_si128(reinterpret_cast<const __m128i*>(acc + 2 * i));
  }
  for (std::size_t s = 0; s < n; ++s, p += stripe_len, sec += 8) {
    for (std::size_t i = 0; i < 4; ++i) {
      const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i));
      const __m128i k = _mm_xor_si128(d, _mm_loadu_si128(reinterpret_cast<const __m128i*>(sec + 16 * i)));
      a[i] = _mm_add_epi64(a[i], _mm_shuffle_epi32(d, _MM_SHUFFLE(1, 0, 3, 2)));
      a[i] = _mm_add_epi64(a[i], _mm_mul_epu32(k, _mm_srli_epi64(k, 32)));
    }
  }
  for (std::size_t i = 0; i < 4; ++i) {
    _mm_store_si128(reinterpret_cast<__m128i*>(acc + 2 * i), a[i]);
  }
}

void scramble_sse2(std::uint64_t* acc) noexcept {
  const __m128i prime = _mm_set1_epi32(static_cast<int>(prime32_1));
  const unsigned char* sec = secret + secret_size - stripe_len;
  for (std::size_t i = 0; i < 4; ++i) {
    __m128i a = _mm_load_si128(reinterpret_cast<const __m128i*>(acc + 2 * i));
    a = _mm_xor_si128(a, _mm_srli_epi64(a, 47));
    a = _mm_xor_si128(a, _mm_loadu_si128(reinterpret_cast<const __m128i*>(sec + 16 * i)));
    const __m128i lo = _mm_mul_epu32(a, prime);
    const __m128i hi = _mm_mul_epu32(_mm_shuffle_epi32(a, _MM_SHUFFLE(0, 3, 0, 1)), prime);
    _mm_store_si128(reinterpret_cast<__m128i*>(acc + 2 * i), _mm_add_epi64(lo, _mm_slli_epi64(hi, 32)));
  }
}
#endif

struct Kernels {
  void (*accumulate)(std::uint64_t*, const unsigned char*, const unsigned char*, std::size_t) noexcept;
  void (*scramble)(std::uint64_t*) noexcept;
};

bool has_avx2() noexcept {
#if defined(__x86_64__)
  __builtin_cpu_init();  // may run before libgcc's own constructor has filled the CPU model in
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

Kernels kernels_for(Xxh3Kernel k) noexcept {
#if defined(__x86_64__)
  if (k == Xxh3Kernel::avx2) {
    return {accumulate_avx2, scramble_avx2};
  }
  if (k == Xxh3Kernel::sse2) {
    return {accumulate_sse2, scramble_sse2};
  }
#endif
  return {accumulate_scalar, scramble_scalar};
}

struct Dispatch {
  Xxh3Kernel kernel;
  Kernels run;
};

// Chosen on first use rather than by a static initializer, so that a hash taken while other
// translation units are still being initialized finds its kernels.
Dispatch& dispatch() noexcept {
  static Dispatch d = [] {
#if defined(__x86_64__)
    const Xxh3Kernel k = has_avx2() ? Xxh3Kernel::avx2 : Xxh3Kernel::sse2;
#else
    const Xxh3Kernel k = Xxh3Kernel::scalar;
#endif
    return Dispatch{k, kernels_for(k)};
  }();
  return d;
}

std::uint64_t merge(const std::uint64_t* acc, std::uint64_t len) noexcept {
  std::uint64_t result = len * prime64_1;
  const unsigned char* sec = secret + 11;
  for (std::size_t i = 0; i < 4; ++i) {
    result += mul128_fold64(acc[2 * i] ^ read64(sec + 16 * i), acc[2 * i + 1] ^ read64(sec + 16 * i + 8));
  }
  return avalanche(result);
}

}  // namespace

Xxh3Kernel xxh3_kernel() noexcept { return dispatch().kernel; }

bool xxh3_use_kernel(Xxh3Kernel k) noexcept {
#if !defined(__x86_64__)
  if (k != Xxh3Kernel::scalar) {
    return false;
  }
#endif
  if (k == Xxh3Kernel::avx2 && !has_avx2()) {
    return false;
  }
  dispatch() = Dispatch{k, kernels_for(k)};
  return true;
}

void Xxh3::reset() noexcept {
  const std::uint64_t init[8] = {prime32_3, prime64_1, prime64_2, prime64_3,
                                 prime64_4, prime32_2, prime64_5, prime32_1};
  std::memcpy(acc_, init, sizeof acc_);
  total_len_ = 0;
  stripe_in_block_ = 0;
  tail_len_ = 0;
}

// Every stripe handed here is known not to end the input, so the block it completes is
// scrambled at once (the specification leaves only the input's last block unscrambled).
void Xxh3::consume(const unsigned char* p, std::size_t stripes) noexcept {
  const Kernels& kernels = dispatch().run;
  while (stripes > 0) {
    const std::size_t n = std::min(stripes, stripes_per_block - stripe_in_block_);
    kernels.accumulate(acc_, p, secret + 8 * stripe_in_block_, n);
    p += n * stripe_len;
    stripes -= n;
    stripe_in_block_ += n;
    if (stripe_in_block_ == stripes_per_block) {
      kernels.scramble(acc_);
      stripe_in_block_ = 0;
    }
  }
}

Xxh3& Xxh3::update(std::span<const std::byte> data) noexcept {
  auto p = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t n = data.size();
  total_len_ += n;
  if (tail_len_ + n <= buffer_size) {
    if (n != 0) {
      std::memcpy(tail_ + tail_len_, p, n);
    }
    tail_len_ += n;
    return *this;
  }
  // More than the buffer holds: whatever is buffered is followed by more input.
  if (tail_len_ != 0) {
    const std::size_t fill = buffer_size - tail_len_;
    std::memcpy(tail_ + tail_len_, p, fill);
    p += fill;
    n -= fill;
    consume(tail_, buffer_size / stripe_len);
    std::memcpy(before_tail_, tail_ + buffer_size - stripe_len, stripe_len);
    tail_len_ = 0;
  }
  // n >= 1 here. Every whole stripe followed by at least one byte goes now; 1..64 bytes stay.
  if (n > stripe_len) {
    const std::size_t stripes = (n - 1) / stripe_len;
    consume(p, stripes);
    p += stripes * stripe_len;
    n -= stripes * stripe_len;
    std::memcpy(before_tail_, p - stripe_len, stripe_len);
  }
  std::memcpy(tail_, p, n);
  tail_len_ = n;
  return *this;
}

std::uint64_t Xxh3::digest() const noexcept {
  if (total_len_ <= mid_size_max) {
    return hash_short(tail_, static_cast<std::size_t>(total_len_));
  }
  const Kernels& kernels = dispatch().run;
  alignas(64) std::uint64_t acc[8];
  std::memcpy(acc, acc_, sizeof acc);
  // Stripes of the tail that more bytes follow, within the (last) block, then the input's last
  // 64 bytes as the final stripe, which may reach back into before_tail_.
  std::size_t in_block = stripe_in_block_;
  const std::size_t stripes = (tail_len_ - 1) / stripe_len;
  for (std::size_t s = 0; s < stripes; ++s) {
    kernels.accumulate(acc, tail_ + s * stripe_len, secret + 8 * in_block, 1);
    if (++in_block == stripes_per_block) {
      kernels.scramble(acc);
      in_block = 0;
    }
  }
  unsigned char last[stripe_len];
  if (tail_len_ >= stripe_len) {
    std::memcpy(last, tail_ + tail_len_ - stripe_len, stripe_len);
  } else {
    const std::size_t from_before = stripe_len - tail_len_;
    std::memcpy(last, before_tail_ + stripe_len - from_before, from_before);
    std::memcpy(last + from_before, tail_, tail_len_);
  }
  kernels.accumulate(acc, last, secret + secret_size - stripe_len - 7, 1);
  return merge(acc, total_len_);
}

std::uint64_t xxh3_64(std::span<const std::byte> data) noexcept {
  return Xxh3().update(data).digest();
}

std::uint64_t xxh3_64(std::string_view text) noexcept { return Xxh3().update(text).digest(); }

}  // namespace niox::transfer
