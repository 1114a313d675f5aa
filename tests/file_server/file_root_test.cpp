#include "file_root.hpp"
#include "request_path.hpp"
#include "temp_tree.hpp"
#include "test_printers.hpp"

#include "support/open_fds.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

namespace niox::http {
namespace {

using Resolver = FileRoot::Resolver;

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::pread(fd, buf, sizeof buf, static_cast<off_t>(out.size()))) > 0) {
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// tree/outside/secret.txt is the file no request may ever read.
class FileRootTest : public ::testing::TestWithParam<Resolver> {
 protected:
  void SetUp() override {
    tree_.write("outside/secret.txt", "SECRET");
    tree_.write("root/index.html", "<h1>home</h1>");
    tree_.write("root/a.txt", "alpha");
    tree_.write("root/sub/b.css", "b{}");
    tree_.write("root/sub/index.html", "sub index");
    tree_.mkdir("root/noindex");
    tree_.mkdir("root/index_is_dir/index.html");
    tree_.symlink("a.txt", "root/link_in");
    tree_.symlink("../a.txt", "root/sub/link_up_in");
    tree_.symlink("../outside/secret.txt", "root/link_out");
    tree_.symlink((tree_ / "outside/secret.txt").string(), "root/link_abs");
    tree_.symlink("../outside", "root/dirlink_out");
    tree_.symlink("../..", "root/sub/upup");
    tree_.symlink("loop2", "root/loop1");
    tree_.symlink("loop1", "root/loop2");
    tree_.symlink("/proc/self/root/etc/hostname", "root/magic");
    ASSERT_EQ(::mkfifo((tree_ / "root/fifo").c_str(), 0600), 0);
    root_ = std::make_unique<FileRoot>((tree_ / "root").string(), GetParam());
    if (root_->resolver() != GetParam()) {
      GTEST_SKIP() << "openat2 is not available";
    }
    fds_before_ = niox::test::open_fd_count();
  }
  void TearDown() override {
    if (root_ && root_->resolver() == GetParam()) {
      EXPECT_EQ(niox::test::open_fd_count(), fds_before_) << "a descriptor leaked";
    }
  }

  OpenResult open(std::string_view target) {
    auto path = decode_request_path(target);
    if (path.status != HttpStatus::ok) {
      OpenResult r;
      r.status = path.status;
      return r;
    }
    return root_->open(path.relative);
  }

  testing::TempTree tree_;
  std::unique_ptr<FileRoot> root_;
  int fds_before_ = 0;
};

TEST_P(FileRootTest, OpensRegularFilesWithSizeAndTime) {
  auto r = open("/a.txt");
  ASSERT_EQ(r.status, HttpStatus::ok);
  EXPECT_EQ(read_all(r.file.fd.get()), "alpha");
  EXPECT_EQ(r.file.size, 5u);
  EXPECT_EQ(r.file.path, "a.txt");
  struct stat st {};
  ASSERT_EQ(::stat((tree_ / "root/a.txt").c_str(), &st), 0);
  EXPECT_EQ(r.file.mtime, st.st_mtim.tv_sec);
  EXPECT_TRUE(::fcntl(r.file.fd.get(), F_GETFD) & FD_CLOEXEC);
}

TEST_P(FileRootTest, DirectoriesServeTheirIndex) {
  auto r = open("/");
  ASSERT_EQ(r.status, HttpStatus::ok);
  EXPECT_EQ(r.file.path, "index.html");
  EXPECT_EQ(read_all(r.file.fd.get()), "<h1>home</h1>");
  auto s = open("/sub/");
  ASSERT_EQ(s.status, HttpStatus::ok);
  EXPECT_EQ(s.file.path, "sub/index.html");
  EXPECT_EQ(open("/sub").status, HttpStatus::ok);
  EXPECT_EQ(open("/noindex/").status, HttpStatus::not_found);
  EXPECT_EQ(open("/index_is_dir/").status, HttpStatus::not_found);
}

TEST_P(FileRootTest, MissingFilesAreNotFound) {
  EXPECT_EQ(open("/nope.txt").status, HttpStatus::not_found);
  EXPECT_EQ(open("/a.txt/x").status, HttpStatus::not_found);  // ENOTDIR
  EXPECT_EQ(open("/sub/nope/x").status, HttpStatus::not_found);
}

TEST_P(FileRootTest, SymlinksLeadingOutAreRefused) {
  for (const char* t : {"/link_out", "/link_abs", "/dirlink_out/secret.txt",
                        "/sub/upup/outside/secret.txt", "/magic"}) {
    auto r = open(t);
    EXPECT_EQ(r.status, HttpStatus::forbidden) << t;
    EXPECT_FALSE(r.file.fd.valid()) << t;
  }
}

TEST_P(FileRootTest, SymlinksInsideAreFollowedOnlyByTheKernelResolver) {
  for (const char* t : {"/link_in", "/sub/link_up_in"}) {
    auto r = open(t);
    if (GetParam() == Resolver::openat2) {
      ASSERT_EQ(r.status, HttpStatus::ok) << t;
      EXPECT_EQ(read_all(r.file.fd.get()), "alpha");
    } else {
      EXPECT_EQ(r.status, HttpStatus::forbidden) << t;  // the walk follows no symlink at all
    }
  }
}

TEST_P(FileRootTest, SymlinkLoopsAndSpecialFilesAreForbidden) {
  EXPECT_EQ(open("/loop1").status, HttpStatus::forbidden);
  EXPECT_EQ(open("/fifo").status, HttpStatus::forbidden);  // and the open did not block
}

TEST_P(FileRootTest, CraftedTargetsNeverReachOutside) {
  for (const char* t :
       {"/../outside/secret.txt", "/%2e%2e/outside/secret.txt", "/sub/../../outside/secret.txt",
        "/..%2foutside%2fsecret.txt", "/%2e%2e%5coutside%5csecret.txt", "/..\\outside\\secret.txt",
        "/secret.txt%00.html", "//..//outside/secret.txt", "http://h/../outside/secret.txt"}) {
    auto r = open(t);
    EXPECT_NE(r.status, HttpStatus::ok) << t;
    EXPECT_FALSE(r.file.fd.valid()) << t;
  }
}

TEST_P(FileRootTest, RelativePathsWithDotSegmentsAreRefusedEvenIfPassedDirectly) {
  // open() is meant for decode_request_path's output; anything else must still stay inside.
  EXPECT_NE(root_->open("../outside/secret.txt").status, HttpStatus::ok);
  EXPECT_NE(root_->open("sub/../../outside/secret.txt").status, HttpStatus::ok);
  EXPECT_NE(root_->open("/etc/hostname").status, HttpStatus::ok);
  EXPECT_EQ(root_->open(std::string_view("a.txt\0/../../outside", 21)).status,
            HttpStatus::not_found);
}

TEST_P(FileRootTest, RootRenamedAfterOpeningStillServesTheSameDirectory) {
  std::filesystem::rename(tree_ / "root", tree_ / "moved");
  std::filesystem::create_directories(tree_ / "root");
  tree_.write("root/a.txt", "impostor");
  auto r = open("/a.txt");
  ASSERT_EQ(r.status, HttpStatus::ok);
  EXPECT_EQ(read_all(r.file.fd.get()), "alpha");
}

INSTANTIATE_TEST_SUITE_P(Resolvers, FileRootTest,
                         ::testing::Values(Resolver::openat2, Resolver::walk),
                         [](const auto& info) {
                           return info.param == Resolver::openat2 ? "openat2" : "walk";
                         });

TEST(FileRoot, MissingRootThrowsOrReportsAnError) {
  EXPECT_THROW(FileRoot("/nonexistent-niox-root/x"), std::system_error);
  std::error_code ec;
  FileRoot root("/nonexistent-niox-root/x", FileRoot::Resolver::auto_detect, ec);
  EXPECT_EQ(ec, std::errc::no_such_file_or_directory);
}

TEST(FileRoot, AutoDetectPicksAResolver) {
  testing::TempTree tree;
  FileRoot root(tree.path().string());
  EXPECT_NE(root.resolver(), FileRoot::Resolver::auto_detect);
}

}  // namespace
}  // namespace niox::http
