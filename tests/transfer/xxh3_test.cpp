#include "xxh3.hpp"

#include "known_pattern.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace niox::transfer {
namespace {

std::string pattern(std::size_t n) { return test::known_pattern(n); }

// Every length class of the specification and its edges: empty, 1-3, 4-8, 9-16, 17-128,
// 129-240, then stripes, the 1 KiB block and the buffered tail around them.
const std::vector<std::pair<std::size_t, std::uint64_t>> known = {
    {0, 0x2d06800538d394c2ULL},      {1, 0x4c5cca45d0f4811fULL},     {2, 0xa7e250c97710ff27ULL},
    {3, 0x15f7093b173d005cULL},      {4, 0xdca012f95811b6b9ULL},     {5, 0xb290cafc7b254345ULL},
    {8, 0xdec6a9a43575982eULL},      {9, 0xcbe393399f17ffbdULL},     {15, 0x545e19990471dc37ULL},
    {16, 0x7e484c18d74895d0ULL},     {17, 0x208bde5ee2bed407ULL},    {31, 0xa937652b0119ca11ULL},
    {32, 0x03df0ac5255d1446ULL},     {33, 0x199a362122d71f46ULL},    {64, 0xdd30702ab46b3745ULL},
    {100, 0x8c97158042fbf926ULL},    {127, 0xa915ed6396db8cc0ULL},   {128, 0xf92b70eaa21a6288ULL},
    {129, 0xf8f76713f2bb60faULL},    {200, 0x12fdb864685f344dULL},   {239, 0xcaa9b7a588464745ULL},
    {240, 0xccc7375172c41f03ULL},    {241, 0x0b3b630948ce4a00ULL},   {255, 0x89932170686cdd9aULL},
    {256, 0xec85b75bafe6ca74ULL},    {257, 0x12ef0ff633841459ULL},   {300, 0xbaad8e6a5f186ce6ULL},
    {512, 0xefc2e52d1c2ffbaaULL},    {1023, 0xf0d330ce2b3300fbULL},  {1024, 0x23bc880ebf0d29c6ULL},
    {1025, 0xc09fdfbc398c7d82ULL},   {1088, 0xa16bad67843c5a45ULL},  {2048, 0x19f6f9c987331373ULL},
    {2049, 0x5045460f5d85c275ULL},   {4096, 0xa3c19f8174cde0bbULL},  {16447, 0xfaa1f4c0d13cb781ULL},
    {100000, 0xccf90df7e7e37036ULL},
};

TEST(Xxh3, KnownAnswersForEveryLengthClassWithEachKernel) {
  const Xxh3Kernel chosen = xxh3_kernel();
  for (Xxh3Kernel k : {Xxh3Kernel::scalar, Xxh3Kernel::sse2, Xxh3Kernel::avx2}) {
    if (!xxh3_use_kernel(k)) {
      continue;  // not this CPU's (AVX2 missing, or not x86-64)
    }
    for (const auto& [n, want] : known) {
      EXPECT_EQ(xxh3_64(pattern(n)), want) << "length " << n << " kernel " << static_cast<int>(k);
    }
  }
  xxh3_use_kernel(chosen);
}

TEST(Xxh3, IncrementalEqualsOneShotForEverySplit) {
  for (std::size_t n : {241, 300, 1025, 2049, 4096}) {
    const auto whole = pattern(n);
    const auto expected = xxh3_64(whole);
    for (std::size_t cut = 0; cut <= n; ++cut) {
      Xxh3 h;
      h.update(std::string_view(whole).substr(0, cut));
      h.update(std::string_view(whole).substr(cut));
      ASSERT_EQ(h.digest(), expected) << "length " << n << " cut at " << cut;
    }
  }
}

TEST(Xxh3, UnevenPiecesAndRunningDigests) {
  const auto data = pattern(100000);
  Xxh3 h;
  std::size_t at = 0;
  for (std::size_t piece = 1; at < data.size(); piece = piece * 7 % 1531 + 1) {
    const std::size_t n = std::min(piece, data.size() - at);
    h.update(std::string_view(data).substr(at, n));
    at += n;
    // digest() leaves the state alone: a running digest equals the one-shot of the prefix.
    if (at % 13 == 0 || at == data.size()) {
      ASSERT_EQ(h.digest(), xxh3_64(std::string_view(data).substr(0, at))) << "after " << at;
    }
  }
  EXPECT_EQ(h.digest(), 0xccf90df7e7e37036ULL);
  EXPECT_EQ(h.total_length(), data.size());
  h.reset();
  EXPECT_EQ(h.digest(), 0x2d06800538d394c2ULL);
}

}  // namespace
}  // namespace niox::transfer
