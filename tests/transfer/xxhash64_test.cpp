#include "xxhash64.hpp"

#include "known_pattern.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace niox::transfer {
namespace {

std::string pattern(std::size_t n) { return test::known_pattern(n); }

TEST(XxHash64, KnownAnswers) {
  EXPECT_EQ(xxh64(""), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(xxh64("a"), 0xD24EC4F1A98C6E5BULL);
  EXPECT_EQ(xxh64("abc"), 0x44BC2CF5AD770999ULL);
  EXPECT_EQ(xxh64("The quick brown fox jumps over the lazy dog"), 0x0B242D361FDA71BCULL);
  const auto data = pattern(1000);
  EXPECT_EQ(xxh64(std::string_view(data).substr(0, 4)), 0xC60D15B1E3FF8F04ULL);
  EXPECT_EQ(xxh64(std::string_view(data).substr(0, 8)), 0x3DA5C7AA269683E0ULL);
  EXPECT_EQ(xxh64(std::string_view(data).substr(0, 31)), 0x4A74F3A1A39AD4A1ULL);
  EXPECT_EQ(xxh64(std::string_view(data).substr(0, 32)), 0x8D57D6A4671CC43DULL);
  EXPECT_EQ(xxh64(std::string_view(data).substr(0, 33)), 0x62C9FD21ED857664ULL);
  EXPECT_EQ(xxh64(data), 0x99594F4828043D35ULL);
  EXPECT_EQ(xxh64(data, 12345), 0xCBD42AE414E71A03ULL);
}

TEST(XxHash64, IncrementalEqualsOneShotForEverySplit) {
  const auto data = pattern(200);
  for (std::size_t len : {0u, 1u, 31u, 32u, 33u, 64u, 65u, 100u, 200u}) {
    std::string_view whole = std::string_view(data).substr(0, len);
    const auto expected = xxh64(whole);
    for (std::size_t i = 0; i <= len; ++i) {
      for (std::size_t j = i; j <= len; j += 5) {
        XxHash64 h;
        h.update(whole.substr(0, i)).update(whole.substr(i, j - i)).update(whole.substr(j));
        ASSERT_EQ(h.digest(), expected) << len << " cut at " << i << "," << j;
        EXPECT_EQ(h.total_length(), len);
      }
    }
  }
}

TEST(XxHash64, ByteAtATimeAndDigestDoesNotDisturbState) {
  const auto data = pattern(1000);
  XxHash64 h;
  for (std::size_t i = 0; i < data.size(); ++i) {
    h.update(std::string_view(data).substr(i, 1));
    if (i == 499) {
      EXPECT_EQ(h.digest(), xxh64(std::string_view(data).substr(0, 500)));
    }
  }
  EXPECT_EQ(h.digest(), 0x99594F4828043D35ULL);
  h.reset();
  EXPECT_EQ(h.digest(), 0xEF46DB3751D8E999ULL);
  h.update(std::span<const std::byte>{}).update("a").update(std::span<const std::byte>{});
  EXPECT_EQ(h.digest(), 0xD24EC4F1A98C6E5BULL);
}

}  // namespace
}  // namespace niox::transfer
