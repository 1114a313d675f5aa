#include "checksum.hpp"

#include "known_pattern.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
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
  auto path = (std::filesystem::temp_directory_path() / "niox-xxh-XXXXXX").string();
  int fd = ::mkstemp(path.data());
  ASSERT_GE(fd, 0);
  ::unlink(path.c_str());
  const auto data = pattern(600 * 1024 + 7);  // several read chunks and a ragged end
  ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  std::error_code ec;
  EXPECT_EQ(checksum_file(GetParam(), fd, 0, data.size(), ec), in_memory(GetParam(), data));
  EXPECT_FALSE(ec);
  EXPECT_EQ(checksum_file(GetParam(), fd, 100, 5000, ec),
            in_memory(GetParam(), std::string_view(data).substr(100, 5000)));
  checksum_file(GetParam(), fd, 0, data.size() + 1, ec);
  EXPECT_EQ(ec, std::errc::io_error);  // the file ended early
  ::close(fd);
  checksum_file(GetParam(), fd, 0, 1, ec);
  EXPECT_EQ(ec, std::errc::bad_file_descriptor);
}

int temp_file() {
  auto path = (std::filesystem::temp_directory_path() / "niox-xxh-XXXXXX").string();
  int fd = ::mkstemp(path.data());
  if (fd >= 0) {
    ::unlink(path.c_str());
  }
  return fd;
}

// The hasher keeps its mapping between calls: a file that shrinks while it is mapped must give an
// error, not a SIGBUS. Here the truncation comes between two calls, inside the kept window.
TEST_P(ChecksumTest, FileShrinkingUnderTheKeptMappingIsAnError) {
  int fd = temp_file();
  ASSERT_GE(fd, 0);
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
  EXPECT_EQ(h3.digest(), in_memory(GetParam(), std::string_view(data).substr(0, 1024 * 1024 + 100)));
  Checksum h4(GetParam());
  hasher.update(h4, fd, 1024 * 1024, 101, ec);
  EXPECT_EQ(ec, std::errc::io_error);
  ::close(fd);
}

// Chunks in any order, across the 64 MiB window and 2 MiB alignment, of a file that grows
// between calls (a receiver hashes behind its writes): every range reads the file's bytes.
TEST_P(ChecksumTest, RangesAcrossWindowsOfAGrowingFile) {
  int fd = temp_file();
  ASSERT_GE(fd, 0);
  constexpr std::size_t mib = 1024 * 1024;
  // Mostly a hole, so the test stays cheap: known bytes around each boundary that matters.
  std::string data(70 * mib + 12345, '\0');
  for (std::size_t at : {std::size_t{0}, 2 * mib - 3000, 64 * mib - 5000, 66 * mib - 100, 70 * mib}) {
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
    EXPECT_EQ(part.digest(), in_memory(GetParam(), std::string_view(data).substr(from, 4 * mib))) << from;
  }
  Checksum tail(GetParam());
  hasher.update(tail, fd, data.size() - 10, 11, ec);
  EXPECT_EQ(ec, std::errc::io_error);  // one byte past the end
  ::close(fd);
}

// Something that is not a regular file cannot be mapped and falls back to pread: a pipe gives
// pread's error.
TEST_P(ChecksumTest, APipeIsAnErrorNotAWrongChecksum) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  const auto data = pattern(40000);
  ASSERT_EQ(::write(p[1], data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ::close(p[1]);
  FileHasher hasher;
  Checksum h(GetParam());
  std::error_code ec;
  hasher.update(h, p[0], 0, data.size(), ec);
  EXPECT_EQ(ec, std::errc::invalid_seek);
  ::close(p[0]);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ChecksumTest,
                         ::testing::Values(ChecksumAlgorithm::xxh3_64, ChecksumAlgorithm::xxh64),
                         [](const auto& info) {
                           return std::string(info.param == ChecksumAlgorithm::xxh64 ? "xxh64" : "xxh3_64");
                         });

}  // namespace
}  // namespace niox::transfer
