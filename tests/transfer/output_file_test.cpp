#include "output_file.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace niox::transfer {
namespace {

using Names = std::vector<std::string>;

void put(int fd, const std::string& s) {
  ASSERT_EQ(::write(fd, s.data(), s.size()), static_cast<ssize_t>(s.size()));
}

class OutputFileTest : public ::testing::TestWithParam<bool> {
 protected:
  OutputFile create(const std::string& dest, std::string_view name = "sent.bin") {
    std::error_code ec;
    auto f = OutputFile::create(dest, name, ec, GetParam());
    EXPECT_FALSE(ec) << ec.message();
    if (GetParam() && !f.is_nameless()) {
      ADD_FAILURE() << "O_TMPFILE expected on the test file system";
    }
    return f;
  }
  testing::TempDir dir_;
};

TEST_P(OutputFileTest, InvisibleUntilCommitted) {
  auto f = create(dir_ / "out.bin");
  put(f.fd(), "payload");
  if (f.is_nameless()) {
    EXPECT_EQ(dir_.list(), Names{});
  }
  std::error_code ec;
  f.commit(ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(f.fd(), -1);
  EXPECT_EQ(dir_.list(), Names{"out.bin"});
  EXPECT_EQ(dir_.read("out.bin"), "payload");
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "out.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077 & ~0055, 0u);  // never group/other writable
}

TEST_P(OutputFileTest, DiscardedOrDestroyedLeavesNothing) {
  {
    auto f = create(dir_ / "out.bin");
    put(f.fd(), "partial");
  }
  EXPECT_EQ(dir_.list(), Names{});
  auto g = create(dir_ / "out.bin");
  put(g.fd(), "partial");
  g.discard();
  g.discard();
  EXPECT_EQ(dir_.list(), Names{});
}

TEST_P(OutputFileTest, DirectoryDestinationUsesTheSentName) {
  auto f = create(dir_.str(), "report.pdf");
  EXPECT_EQ(f.path(), dir_ / "report.pdf");
  put(f.fd(), "pdf");
  std::error_code ec;
  f.commit(ec);
  EXPECT_EQ(dir_.read("report.pdf"), "pdf");
}

TEST_P(OutputFileTest, CommitReplacesAnExistingFile) {
  dir_.write("out.bin", "old content");
  auto f = create(dir_ / "out.bin");
  put(f.fd(), "new");
  EXPECT_EQ(dir_.read("out.bin"), "old content");
  std::error_code ec;
  f.commit(ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(dir_.read("out.bin"), "new");
  EXPECT_EQ(dir_.list(), Names{"out.bin"});
}

TEST_P(OutputFileTest, MissingDirectoryIsAnError) {
  std::error_code ec;
  auto f = OutputFile::create(dir_ / "no/such/out.bin", "x", ec, GetParam());
  EXPECT_EQ(ec, std::errc::no_such_file_or_directory);
  EXPECT_EQ(f.fd(), -1);
}

TEST_P(OutputFileTest, ReservesTheRangeItIsAskedFor) {
  auto f = create(dir_ / "out.bin");
  ASSERT_FALSE(f.reserve(0, 1 << 20));
  struct stat st {};
  ASSERT_EQ(::fstat(f.fd(), &st), 0);
  EXPECT_EQ(st.st_size, 1 << 20);
  const auto first = st.st_blocks;
  EXPECT_GE(first * 512, 1 << 20);
  ASSERT_FALSE(f.reserve(1 << 20, 1 << 20));  // the next range
  ASSERT_EQ(::fstat(f.fd(), &st), 0);
  EXPECT_EQ(st.st_size, 2 << 20);
  EXPECT_GE((st.st_blocks - first) * 512, 1 << 20);
  std::error_code ec;
  EXPECT_GT(f.available_space(ec), 0u);
  EXPECT_FALSE(ec) << ec.message();
}

TEST(OutputFileDestination, ProblemsAreNamedBeforeAnyFileIsMade) {
  testing::TempDir dir;
  EXPECT_EQ(OutputFile::destination_problem(dir.str()), "");
  EXPECT_EQ(OutputFile::destination_problem(dir.str() + "/"), "");
  EXPECT_EQ(OutputFile::destination_problem(dir / "new.bin"),
            "");  // a new file in an existing directory
  EXPECT_EQ(OutputFile::destination_problem(dir / "no/such/out.bin"),
            "the directory '" + dir / "no/such" + "' does not exist");
  EXPECT_EQ(OutputFile::destination_problem(dir / "missing/"),
            "the directory '" + dir / "missing" + "' does not exist");
  dir.write("plain", "x");
  EXPECT_EQ(OutputFile::destination_problem(dir / "plain/out.bin"),
            "'" + dir / "plain" + "' is not a directory");
  EXPECT_EQ(OutputFile::destination_problem(dir / "plain"), "");  // an existing file is replaced
  if (::geteuid() != 0) {                                         // root writes anywhere
    std::filesystem::create_directory(dir / "locked");
    std::filesystem::permissions(
        dir / "locked", std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    EXPECT_EQ(OutputFile::destination_problem(dir / "locked"),
              "the directory '" + dir / "locked" + "' is not writable");
    std::filesystem::permissions(dir / "locked", std::filesystem::perms::owner_all);
  }
}

TEST_P(OutputFileTest, MovedFromFileOwnsNothing) {
  auto f = create(dir_ / "out.bin");
  OutputFile g = std::move(f);
  EXPECT_EQ(f.fd(), -1);
  put(g.fd(), "x");
  std::error_code ec;
  f.commit(ec);
  EXPECT_TRUE(ec);
  g.commit(ec);
  EXPECT_FALSE(ec);
  EXPECT_EQ(dir_.read("out.bin"), "x");
}

INSTANTIATE_TEST_SUITE_P(Modes, OutputFileTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "tmpfile" : "temp_name"; });

}  // namespace
}  // namespace niox::transfer
