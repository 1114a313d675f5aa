#include "xxhash64.hpp"
#include "xxhash_words.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

namespace niox::transfer {
namespace {

using xxhash::read32;
using xxhash::read64;
using xxhash::prime64_1;
using xxhash::prime64_2;
using xxhash::prime64_3;
using xxhash::prime64_4;
using xxhash::prime64_5;

inline std::uint64_t round(std::uint64_t acc, std::uint64_t lane) noexcept {
  acc += lane * prime64_2;
  acc = std::rotl(acc, 31);
  return acc * prime64_1;
}

inline std::uint64_t merge_round(std::uint64_t acc, std::uint64_t val) noexcept {
  acc ^= round(0, val);
  return acc * prime64_1 + prime64_4;
}

// Consumes whole 32-byte stripes from p; returns the first unconsumed byte.
inline const unsigned char* stripes(std::uint64_t (&acc)[4], const unsigned char* p,
                                    const unsigned char* end) noexcept {
  std::uint64_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
  while (end - p >= 32) {
    a0 = round(a0, read64(p));
    a1 = round(a1, read64(p + 8));
    a2 = round(a2, read64(p + 16));
    a3 = round(a3, read64(p + 24));
    p += 32;
  }
  acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
  return p;
}

}  // namespace

void XxHash64::reset(std::uint64_t seed) noexcept {
  seed_ = seed;
  acc_[0] = seed + prime64_1 + prime64_2;
  acc_[1] = seed + prime64_2;
  acc_[2] = seed;
  acc_[3] = seed - prime64_1;
  total_len_ = 0;
  pending_len_ = 0;
}

XxHash64& XxHash64::update(std::span<const std::byte> data) noexcept {
  if (data.empty()) {
    return *this;  // an empty span may have no storage: keep memcpy away from a null pointer
  }
  auto p = reinterpret_cast<const unsigned char*>(data.data());
  const auto end = p + data.size();
  total_len_ += data.size();
  if (pending_len_ > 0) {
    std::size_t take = std::min<std::size_t>(32 - pending_len_, data.size());
    std::memcpy(pending_ + pending_len_, p, take);
    pending_len_ += take;
    p += take;
    if (pending_len_ < 32) {
      return *this;
    }
    stripes(acc_, pending_, pending_ + 32);
    pending_len_ = 0;
  }
  p = stripes(acc_, p, end);
  pending_len_ = static_cast<std::size_t>(end - p);
  if (pending_len_ > 0) {
    std::memcpy(pending_, p, pending_len_);
  }
  return *this;
}

std::uint64_t XxHash64::digest() const noexcept {
  std::uint64_t h;
  if (total_len_ >= 32) {
    h = std::rotl(acc_[0], 1) + std::rotl(acc_[1], 7) + std::rotl(acc_[2], 12) +
        std::rotl(acc_[3], 18);
    for (auto a : acc_) {
      h = merge_round(h, a);
    }
  } else {
    h = seed_ + prime64_5;
  }
  h += total_len_;
  const unsigned char* p = pending_;
  const unsigned char* end = pending_ + pending_len_;
  while (end - p >= 8) {
    h ^= round(0, read64(p));
    h = std::rotl(h, 27) * prime64_1 + prime64_4;
    p += 8;
  }
  if (end - p >= 4) {
    h ^= static_cast<std::uint64_t>(read32(p)) * prime64_1;
    h = std::rotl(h, 23) * prime64_2 + prime64_3;
    p += 4;
  }
  while (p < end) {
    h ^= static_cast<std::uint64_t>(*p) * prime64_5;
    h = std::rotl(h, 11) * prime64_1;
    ++p;
  }
  return xxhash::avalanche64(h);
}

std::uint64_t xxh64(std::span<const std::byte> data, std::uint64_t seed) noexcept {
  return XxHash64(seed).update(data).digest();
}

std::uint64_t xxh64(std::string_view text, std::uint64_t seed) noexcept {
  return XxHash64(seed).update(text).digest();
}

}  // namespace niox::transfer
