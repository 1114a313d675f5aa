#include "open_file_cache.hpp"
#include "static_file_responder.hpp"
#include "request_time.hpp"
#include "temp_tree.hpp"
#include "test_printers.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace niox::http {
namespace {

using namespace std::chrono_literals;

class OpenFileCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tree_.write("small.txt", "small body");
    tree_.write("big.bin", std::string(100000, 'b'));
    tree_.write("dir/index.html", "<p>index</p>");
    root_ = std::make_unique<FileRoot>(tree_.path().string());
    responder_ = std::make_unique<StaticFileResponder>(*root_);
  }

  HttpResponse get(std::string_view target, OpenFileCache& cache, std::string_view extra = "") {
    req_ = std::string("GET ") + std::string(target) + " HTTP/1.1\r\nHost: h\r\n" +
           std::string(extra) + "\r\n";
    auto in = ByteBuffer::wrap(std::string_view(req_));
    EXPECT_EQ(decoder_.decode(in), DecodeStatus::request);
    return responder_->respond(decoder_.request(), now, &cache);
  }

  testing::TempTree tree_;
  std::unique_ptr<FileRoot> root_;
  std::unique_ptr<StaticFileResponder> responder_;
  HttpRequestDecoder decoder_;
  std::string req_;
};

TEST_F(OpenFileCacheTest, HotSmallFileIsASharedSliceOfTheCachedBytes) {
  OpenFileCache cache;
  auto first = get("/small.txt", cache);
  auto second = get("/small.txt", cache);
  EXPECT_EQ(first.body.string_view(), "small body");
  EXPECT_EQ(second.body.string_view(), "small body");
  EXPECT_TRUE(first.body.shares_memory_with(second.body));  // no copy per response
  EXPECT_TRUE(second.body.is_read_only());
  EXPECT_FALSE(second.file.valid());
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.content_bytes(), 10u);
  auto range = get("/small.txt", cache, "Range: bytes=6-9\r\n");
  EXPECT_EQ(range.status, HttpStatus::partial_content);
  EXPECT_EQ(range.body.string_view(), "body");
}

TEST_F(OpenFileCacheTest, HotLargeFileGetsItsOwnDescriptor) {
  OpenFileCache cache;
  auto a = get("/big.bin", cache);
  auto b = get("/big.bin", cache);
  ASSERT_TRUE(a.has_file_region());
  ASSERT_TRUE(b.has_file_region());
  EXPECT_NE(a.file.get(), b.file.get());
  EXPECT_TRUE(::fcntl(b.file.get(), F_GETFD) & FD_CLOEXEC);
  char c = 0;
  EXPECT_EQ(::pread(b.file.get(), &c, 1, 99999), 1);
  EXPECT_EQ(c, 'b');
  EXPECT_EQ(cache.content_bytes(), 0u);
}

// Whether this process holds a descriptor open on `path` (deleted or not).
bool holds_open(const std::filesystem::path& path) {
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(e.path(), ec).string();
    if (!ec && (target == path.string() || target == path.string() + " (deleted)")) {
      return true;
    }
  }
  return false;
}

TEST_F(OpenFileCacheTest, DeletedFileIsNotServedAndItsDescriptorIsClosed) {
  OpenFileCache::Config cfg;
  cfg.valid = 0ms;  // every use is checked
  OpenFileCache cache(cfg);
  ASSERT_EQ(get("/big.bin", cache).status, HttpStatus::ok);
  ASSERT_EQ(get("/small.txt", cache).status, HttpStatus::ok);
  EXPECT_TRUE(holds_open(tree_ / "big.bin"));  // the cache keeps it open
  ASSERT_EQ(::unlink((tree_ / "big.bin").c_str()), 0);
  ASSERT_EQ(::unlink((tree_ / "small.txt").c_str()), 0);
  EXPECT_EQ(get("/big.bin", cache).status, HttpStatus::not_found);
  EXPECT_EQ(get("/small.txt", cache).status, HttpStatus::not_found);
  EXPECT_FALSE(holds_open(tree_ / "big.bin"));
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.content_bytes(), 0u);
}

TEST_F(OpenFileCacheTest, ReplacedFileServesTheNewContent) {
  OpenFileCache::Config cfg;
  cfg.valid = 0ms;
  OpenFileCache cache(cfg);
  ASSERT_EQ(get("/small.txt", cache).body.string_view(), "small body");
  ASSERT_TRUE(get("/big.bin", cache).has_file_region());
  // Replaced by a rename (a new inode, same size), as deployments do.
  tree_.write("new.tmp", "fresh body");
  ASSERT_EQ(::rename((tree_ / "new.tmp").c_str(), (tree_ / "small.txt").c_str()), 0);
  tree_.write("new.bin", std::string(100000, 'n'));
  ASSERT_EQ(::rename((tree_ / "new.bin").c_str(), (tree_ / "big.bin").c_str()), 0);
  EXPECT_EQ(get("/small.txt", cache).body.string_view(), "fresh body");
  auto big = get("/big.bin", cache);
  ASSERT_TRUE(big.has_file_region());
  std::string got(100000, '\0');
  ASSERT_EQ(::pread(big.file.get(), got.data(), got.size(), 0), 100000);
  EXPECT_EQ(got, std::string(100000, 'n'));
  big = HttpResponse();
  // The replaced file's descriptor is gone; only the new one is held.
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(e.path(), ec).string();
    EXPECT_NE(target, (tree_ / "big.bin").string() + " (deleted)");
  }
  // Rewritten in place (same inode, another size): seen too.
  tree_.write("small.txt", "rewritten in place");
  EXPECT_EQ(get("/small.txt", cache).body.string_view(), "rewritten in place");
  EXPECT_EQ(cache.size(), 2u);
}

TEST_F(OpenFileCacheTest, EntriesAreCheckedAgainOnceValidHasPassed) {
  OpenFileCache cache;  // trusted for `valid` after each check, then checked on the next use
  const auto valid = OpenFileCache::Config{}.valid;
  ASSERT_EQ(get("/big.bin", cache).status, HttpStatus::ok);
  ASSERT_EQ(get("/small.txt", cache).status, HttpStatus::ok);
  ASSERT_EQ(get("/dir/", cache).status, HttpStatus::ok);
  const auto t = OpenFileCache::Clock::now() + valid;
  EXPECT_NE(cache.find(*root_, "big.bin", t), nullptr);  // unchanged: still served from the cache
  EXPECT_NE(cache.find(*root_, "dir", t + valid), nullptr);
  ::unlink((tree_ / "big.bin").c_str());
  tree_.write("small.txt", "changed!");
  EXPECT_EQ(cache.find(*root_, "big.bin", t + 2 * valid), nullptr);    // deleted: dropped
  EXPECT_EQ(cache.find(*root_, "small.txt", t + 2 * valid), nullptr);  // changed: dropped
  EXPECT_FALSE(holds_open(tree_ / "big.bin"));
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(get("/small.txt", cache).body.string_view(), "changed!");
}

TEST_F(OpenFileCacheTest, SweepClosesADeletedFileWithoutARequestForIt) {
  OpenFileCache cache;
  ASSERT_EQ(get("/big.bin", cache).status, HttpStatus::ok);
  ASSERT_EQ(get("/small.txt", cache).status, HttpStatus::ok);
  ASSERT_EQ(get("/dir/", cache).status, HttpStatus::ok);
  ASSERT_EQ(::unlink((tree_ / "big.bin").c_str()), 0);
  cache.sweep(*root_, OpenFileCache::Clock::now() + OpenFileCache::Config{}.valid);
  EXPECT_FALSE(holds_open(tree_ / "big.bin"));
  EXPECT_EQ(cache.size(), 2u);  // the unchanged ones stay
  EXPECT_EQ(get("/big.bin", cache).status, HttpStatus::not_found);
}

TEST_F(OpenFileCacheTest, FailuresAreNotCachedAndRulesStillApply) {
  OpenFileCache cache;
  EXPECT_EQ(get("/missing", cache).status, HttpStatus::not_found);
  EXPECT_EQ(get("/../x", cache).status, HttpStatus::forbidden);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(get("/dir", cache).status, HttpStatus::moved_permanently);
  EXPECT_EQ(get("/dir", cache).status, HttpStatus::moved_permanently);  // from the cache too
  EXPECT_EQ(get("/dir/", cache).body.string_view(), "<p>index</p>");
}

TEST_F(OpenFileCacheTest, BoundedByEntriesAndBytes) {
  for (int i = 0; i < 5; ++i) tree_.write("f" + std::to_string(i), std::string(1000, 'x'));
  OpenFileCache::Config cfg;
  cfg.max_entries = 3;
  OpenFileCache by_count(cfg);
  for (int i = 0; i < 5; ++i) get("/f" + std::to_string(i), by_count);
  EXPECT_EQ(by_count.size(), 3u);
  const auto t = OpenFileCache::Clock::now();
  EXPECT_EQ(by_count.find(*root_, "f0", t), nullptr);  // least recently used went first
  EXPECT_NE(by_count.find(*root_, "f4", t), nullptr);

  cfg.max_entries = 100;
  cfg.max_total_bytes = 2500;
  OpenFileCache by_bytes(cfg);
  for (int i = 0; i < 5; ++i) get("/f" + std::to_string(i), by_bytes);
  EXPECT_LE(by_bytes.content_bytes(), 2500u);
  EXPECT_EQ(by_bytes.size(), 2u);

  cfg.max_entries = 0;
  OpenFileCache none(cfg);
  EXPECT_EQ(get("/f1", none).body.remaining(), 1000u);  // still served, just not cached
  EXPECT_EQ(none.size(), 0u);
}

}  // namespace
}  // namespace niox::http
