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

// The file is hashed through mappings: one that shrinks while it is mapped must give an error,
// not a SIGBUS. A mapping made before the truncation stands in for the race.
TEST_P(ChecksumTest, FileShrinkingUnderTheMappingIsAnError) {
  auto path = (std::filesystem::temp_directory_path() / "niox-xxh-XXXXXX").string();
  int fd = ::mkstemp(path.data());
  ASSERT_GE(fd, 0);
  ::unlink(path.c_str());
  const auto data = pattern(3 * 1024 * 1024);
  ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  std::error_code ec;
  Checksum h(GetParam());
  std::vector<std::byte> scratch(4096);
  checksum_file_update(h, fd, 0, data.size(), scratch, ec);
  EXPECT_FALSE(ec);
  EXPECT_EQ(h.digest(), in_memory(GetParam(), data));
  // Shrunk before the call: the end is found (pread), an error, no SIGBUS.
  ASSERT_EQ(::ftruncate(fd, 1024 * 1024 + 100), 0);
  Checksum h2(GetParam());
  checksum_file_update(h2, fd, 0, data.size(), scratch, ec);
  EXPECT_EQ(ec, std::errc::io_error);
  ::close(fd);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ChecksumTest,
                         ::testing::Values(ChecksumAlgorithm::xxh3_64, ChecksumAlgorithm::xxh64),
                         [](const auto& info) {
                           return std::string(info.param == ChecksumAlgorithm::xxh64 ? "xxh64" : "xxh3_64");
                         });

}  // namespace
}  // namespace niox::transfer
