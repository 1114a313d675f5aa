#include <niox/base/file_descriptor.hpp>

#include "checksum.hpp"

#include "known_pattern.hpp"
#include "support/loop_sockets.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace niox::transfer {
namespace {

std::string pattern(std::size_t n) { return test::known_pattern(n); }

std::uint64_t in_memory(ChecksumAlgorithm a, std::string_view s) {
  return a == ChecksumAlgorithm::xxh64 ? xxh64(s) : xxh3_64(s);
}

class ChecksumTest : public ::testing::TestWithParam<ChecksumAlgorithm> {};

TEST_P(ChecksumTest, IsTheAlgorithmTheHeaderNames) {
  const auto data = pattern(70000);
  Checksum c(GetParam());
  c.update(std::as_bytes(std::span(data.data(), 1000)));
  c.update(std::as_bytes(std::span(data.data() + 1000, data.size() - 1000)));
  EXPECT_EQ(c.algorithm(), GetParam());
  EXPECT_EQ(c.total_length(), data.size());
  EXPECT_EQ(c.digest(), in_memory(GetParam(), data));
}

TEST_P(ChecksumTest, FileChecksumMatchesInMemory) {
  niox::FileDescriptor file = niox::test::loop_temp_file();
  const int fd = file.get();
  ASSERT_TRUE(file.valid());
  const auto data = pattern(600 * 1024 + 7);  // several read chunks and a ragged end
  ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  std::error_code ec;
  EXPECT_EQ(checksum_file(GetParam(), fd, 0, data.size(), ec), in_memory(GetParam(), data));
  EXPECT_FALSE(ec);
  EXPECT_EQ(checksum_file(GetParam(), fd, 100, 5000, ec),
            in_memory(GetParam(), std::string_view(data).substr(100, 5000)));
  checksum_file(GetParam(), fd, 0, data.size() + 1, ec);
  EXPECT_EQ(ec, std::errc::io_error);  // the file ended early
  file.reset();
  checksum_file(GetParam(), fd, 0, 1, ec);  // the number, now closed
  EXPECT_EQ(ec, std::errc::bad_file_descriptor);
}

// The hasher keeps its mapping between calls: a file that shrinks while it is mapped must give an
// error, not a SIGBUS. Here the truncation comes between two calls, inside the kept window.
TEST_P(ChecksumTest, FileShrinkingUnderTheKeptMappingIsAnError) {
  niox::FileDescriptor file = niox::test::loop_temp_file();
  const int fd = file.get();
  ASSERT_TRUE(file.valid());
  const auto data = pattern(3 * 1024 * 1024);
  ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  std::error_code ec;
  FileHasher hasher;
  Checksum h(GetParam());
  hasher.update(h, fd, 0, data.size(), ec);
  EXPECT_FALSE(ec);
  EXPECT_EQ(h.digest(), in_memory(GetParam(), data));

  Checksum h2(GetParam());
  hasher.update(h2, fd, 0, 1024 * 1024, ec);  // maps the whole file
  ASSERT_FALSE(ec);
  ASSERT_EQ(::ftruncate(fd, 1024 * 1024 + 100), 0);
  hasher.update(h2, fd, 1024 * 1024, 2 * 1024 * 1024, ec);  // past the new end, still mapped
  EXPECT_EQ(ec, std::errc::io_error);

  // The hasher goes on working after the error, and the new end is found by a fresh call too.
  Checksum h3(GetParam());
  hasher.update(h3, fd, 0, 1024 * 1024 + 100, ec);
  EXPECT_FALSE(ec);
  EXPECT_EQ(h3.digest(),
            in_memory(GetParam(), std::string_view(data).substr(0, 1024 * 1024 + 100)));
  Checksum h4(GetParam());
  hasher.update(h4, fd, 1024 * 1024, 101, ec);
  EXPECT_EQ(ec, std::errc::io_error);
}

// Chunks in any order, across the 64 MiB window and 2 MiB alignment, of a file that grows
// between calls (a receiver hashes behind its writes): every range reads the file's bytes.
TEST_P(ChecksumTest, RangesAcrossWindowsOfAGrowingFile) {
  niox::FileDescriptor file = niox::test::loop_temp_file();
  const int fd = file.get();
  ASSERT_TRUE(file.valid());
  constexpr std::size_t mib = 1024 * 1024;
  // Mostly a hole, so the test stays cheap: known bytes around each boundary that matters.
  std::string data(70 * mib + 12345, '\0');
  for (std::size_t at :
       {std::size_t{0}, 2 * mib - 3000, 64 * mib - 5000, 66 * mib - 100, 70 * mib}) {
    const auto piece = pattern(std::min<std::size_t>(10000, data.size() - at));
    data.replace(at, piece.size(), piece);
  }
  // Written in two steps: the first hashes see a file of 65 MiB.
  const std::size_t first = 65 * mib;
  ASSERT_EQ(::pwrite(fd, data.data(), first, 0), static_cast<ssize_t>(first));
  FileHasher hasher;
  std::error_code ec;
  Checksum whole(GetParam());
  std::size_t at = 0;
  for (; at + 3 * mib + 7 <= first; at += 3 * mib + 7) {
    hasher.update(whole, fd, at, 3 * mib + 7, ec);
    ASSERT_FALSE(ec) << at;
  }
  ASSERT_EQ(::pwrite(fd, data.data() + first, data.size() - first, static_cast<off_t>(first)),
            static_cast<ssize_t>(data.size() - first));
  hasher.update(whole, fd, at, data.size() - at, ec);
  ASSERT_FALSE(ec);
  EXPECT_EQ(whole.digest(), in_memory(GetParam(), data));

  // Backwards and across a window boundary, then a small range inside a page.
  for (std::size_t from : {66 * mib - 200, 64 * mib - 6000, 2 * mib - 3001, std::size_t{5}}) {
    Checksum part(GetParam());
    hasher.update(part, fd, from, 4 * mib, ec);
    ASSERT_FALSE(ec) << from;
    EXPECT_EQ(part.digest(), in_memory(GetParam(), std::string_view(data).substr(from, 4 * mib)))
        << from;
  }
  Checksum tail(GetParam());
  hasher.update(tail, fd, data.size() - 10, 11, ec);
  EXPECT_EQ(ec, std::errc::io_error);  // one byte past the end
}

// A file dropped from the page cache (cold: each range is read from disk as it is hashed, the
// mapping populated ahead of the hash) hashes to the bytes written, in any chunking.
TEST_P(ChecksumTest, FileDroppedFromThePageCacheHashesTheSame) {
  niox::FileDescriptor file = niox::test::loop_temp_file();
  const int fd = file.get();
  ASSERT_TRUE(file.valid());
  const auto data = pattern(5 * 1024 * 1024 + 4097);
  ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ASSERT_EQ(::fdatasync(fd), 0);
  ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  FileHasher hasher;
  Checksum h(GetParam());
  std::error_code ec;
  for (std::size_t at = 0; at < data.size(); at += 1024 * 1024 - 1) {
    hasher.update(h, fd, at, std::min<std::size_t>(1024 * 1024 - 1, data.size() - at), ec);
    ASSERT_FALSE(ec) << at;
  }
  EXPECT_EQ(h.digest(), in_memory(GetParam(), data));
}

// Something that is not a regular file cannot be mapped and falls back to pread: a pipe gives
// pread's error.
TEST_P(ChecksumTest, APipeIsAnErrorNotAWrongChecksum) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  niox::FileDescriptor reader(p[0]), writer(p[1]);
  const auto data = pattern(40000);
  ASSERT_EQ(::write(p[1], data.data(), data.size()), static_cast<ssize_t>(data.size()));
  writer.reset();
  FileHasher hasher;
  Checksum h(GetParam());
  std::error_code ec;
  hasher.update(h, p[0], 0, data.size(), ec);
  EXPECT_EQ(ec, std::errc::invalid_seek);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ChecksumTest,
                         ::testing::Values(ChecksumAlgorithm::xxh3_64, ChecksumAlgorithm::xxh64),
                         [](const auto& info) {
                           return std::string(info.param == ChecksumAlgorithm::xxh64 ? "xxh64"
                                                                                     : "xxh3_64");
                         });

// ---- The two algorithms' known answers --------------------------------------------------

// Every length class of the specification and its edges: empty, 1-3, 4-8, 9-16, 17-128,
// 129-240, then stripes, the 1 KiB block and the buffered tail around them.
const std::vector<std::pair<std::size_t, std::uint64_t>> known = {
    {0, 0x2d06800538d394c2ULL},      {1, 0x4c5cca45d0f4811fULL},    {2, 0xa7e250c97710ff27ULL},
    {3, 0x15f7093b173d005cULL},      {4, 0xdca012f95811b6b9ULL},    {5, 0xb290cafc7b254345ULL},
    {8, 0xdec6a9a43575982eULL},      {9, 0xcbe393399f17ffbdULL},    {15, 0x545e19990471dc37ULL},
    {16, 0x7e484c18d74895d0ULL},     {17, 0x208bde5ee2bed407ULL},   {31, 0xa937652b0119ca11ULL},
    {32, 0x03df0ac5255d1446ULL},     {33, 0x199a362122d71f46ULL},   {64, 0xdd30702ab46b3745ULL},
    {100, 0x8c97158042fbf926ULL},    {127, 0xa915ed6396db8cc0ULL},  {128, 0xf92b70eaa21a6288ULL},
    {129, 0xf8f76713f2bb60faULL},    {200, 0x12fdb864685f344dULL},  {239, 0xcaa9b7a588464745ULL},
    {240, 0xccc7375172c41f03ULL},    {241, 0x0b3b630948ce4a00ULL},  {255, 0x89932170686cdd9aULL},
    {256, 0xec85b75bafe6ca74ULL},    {257, 0x12ef0ff633841459ULL},  {300, 0xbaad8e6a5f186ce6ULL},
    {512, 0xefc2e52d1c2ffbaaULL},    {1023, 0xf0d330ce2b3300fbULL}, {1024, 0x23bc880ebf0d29c6ULL},
    {1025, 0xc09fdfbc398c7d82ULL},   {1088, 0xa16bad67843c5a45ULL}, {2048, 0x19f6f9c987331373ULL},
    {2049, 0x5045460f5d85c275ULL},   {4096, 0xa3c19f8174cde0bbULL}, {16447, 0xfaa1f4c0d13cb781ULL},
    {100000, 0xccf90df7e7e37036ULL},
};

// The protocol's checksum values: the same with libxxhash's dispatched kernel as with the
// stripe kernels niox-transfer carried before, one shot and incremental.
TEST(Xxh3, KnownAnswersForEveryLengthClass) {
  for (const auto& [n, want] : known) {
    EXPECT_EQ(xxh3_64(pattern(n)), want) << "length " << n;
    EXPECT_EQ(Checksum(ChecksumAlgorithm::xxh3_64).update(pattern(n)).digest(), want)
        << "length " << n;
  }
}

TEST(Xxh3, IncrementalEqualsOneShotForEverySplit) {
  for (std::size_t n : {241, 300, 1025, 2049, 4096}) {
    const auto whole = pattern(n);
    const auto expected = xxh3_64(whole);
    for (std::size_t cut = 0; cut <= n; ++cut) {
      Checksum h(ChecksumAlgorithm::xxh3_64);
      h.update(std::string_view(whole).substr(0, cut));
      h.update(std::string_view(whole).substr(cut));
      ASSERT_EQ(h.digest(), expected) << "length " << n << " cut at " << cut;
    }
  }
}

TEST(Xxh3, UnevenPiecesAndRunningDigests) {
  const auto data = pattern(100000);
  Checksum h(ChecksumAlgorithm::xxh3_64);
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
        Checksum h(ChecksumAlgorithm::xxh64);
        h.update(whole.substr(0, i)).update(whole.substr(i, j - i)).update(whole.substr(j));
        ASSERT_EQ(h.digest(), expected) << len << " cut at " << i << "," << j;
        EXPECT_EQ(h.total_length(), len);
      }
    }
  }
}

TEST(XxHash64, ByteAtATimeAndDigestDoesNotDisturbState) {
  const auto data = pattern(1000);
  Checksum h(ChecksumAlgorithm::xxh64);
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
