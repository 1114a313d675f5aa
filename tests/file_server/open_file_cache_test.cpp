#include "open_file_cache.hpp"
#include "static_file_responder.hpp"
#include "temp_tree.hpp"
#include "test_printers.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <string>

namespace niox::http {
namespace {

using namespace std::chrono_literals;
constexpr std::time_t now = 1780000000;

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
    req_ = std::string("GET ") + std::string(target) + " HTTP/1.1\r\nHost: h\r\n" + std::string(extra) + "\r\n";
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

TEST_F(OpenFileCacheTest, EntriesExpireAfterValid) {
  OpenFileCache::Config cfg;
  cfg.valid = 0ms;  // every request re-resolves
  OpenFileCache fresh(cfg);
  EXPECT_EQ(get("/small.txt", fresh).body.string_view(), "small body");
  tree_.write("small.txt", "changed!");
  EXPECT_EQ(get("/small.txt", fresh).body.string_view(), "changed!");
  ::unlink((tree_ / "small.txt").c_str());
  EXPECT_EQ(get("/small.txt", fresh).status, HttpStatus::not_found);

  OpenFileCache lasting;  // 1 s: a change inside the window is not seen yet
  EXPECT_EQ(get("/big.bin", lasting).status, HttpStatus::ok);
  ::unlink((tree_ / "big.bin").c_str());
  EXPECT_EQ(get("/big.bin", lasting).status, HttpStatus::ok);
  const auto t = OpenFileCache::Clock::now();
  EXPECT_NE(lasting.find("big.bin", t), nullptr);
  EXPECT_EQ(lasting.find("big.bin", t + 2s), nullptr);  // expired: dropped
  EXPECT_EQ(lasting.size(), 0u);
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
  EXPECT_EQ(by_count.find("f0", t), nullptr);  // least recently used went first
  EXPECT_NE(by_count.find("f4", t), nullptr);

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
