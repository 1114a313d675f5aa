#include "http_server_connection.hpp"
#include "request_time.hpp"
#include "temp_tree.hpp"
#include "test_printers.hpp"

#include <gtest/gtest.h>

#include <malloc.h>

#include <random>
#include <string>
#include <vector>

#include <unistd.h>

namespace niox::http {
namespace {

// What the client would receive for these responses: heads, bodies and file regions in order.
std::string wire(const std::vector<HttpResponse>& responses) {
  std::string out;
  for (const auto& r : responses) {
    out += r.head.string_view();
    out += r.body.string_view();
    if (r.has_file_region()) {
      std::string region(static_cast<std::size_t>(r.file_count), '\0');
      EXPECT_EQ(
          ::pread(r.file.get(), region.data(), region.size(), static_cast<off_t>(r.file_offset)),
          static_cast<ssize_t>(region.size()));
      out += region;
    }
  }
  return out;
}

class HttpServerConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tree_.write("index.html", "<h1>home</h1>");
    tree_.write("big.bin", std::string(5000, 'z'));
    root_ = std::make_unique<FileRoot>(tree_.path().string());
    StaticFileConfig cfg;
    cfg.small_body_max = 1024;
    responder_ = std::make_unique<StaticFileResponder>(*root_, cfg);
  }

  struct Result {
    std::string wire;
    std::size_t responses = 0;
    bool closing = false;
    bool clean_end = false;
  };

  // Feeds `input` in pieces cut at `cuts`, draining responses after every read, like a transport.
  Result serve(std::string_view input, const std::vector<std::size_t>& cuts,
               std::size_t max_queued = 32, OpenFileCache* cache = nullptr) {
    HttpServerConnection conn(*responder_, {}, max_queued, cache);
    Result result;
    std::vector<HttpResponse> queue;
    std::string pending;  // bytes read but not yet consumed (the transport's cumulation)
    std::size_t begin = 0;
    auto deliver = [&](std::string_view piece) {
      pending += piece;
      while (!conn.is_closing()) {
        auto in = ByteBuffer::wrap(std::string_view(pending));
        conn.on_read(in, queue, now);
        pending.erase(0, in.position());
        const bool stalled = queue.empty();
        result.responses += queue.size();
        result.wire += wire(queue);
        queue.clear();
        if (stalled || pending.empty()) {
          break;
        }
      }
    };
    for (auto cut : cuts) {
      deliver(input.substr(begin, cut - begin));
      begin = cut;
    }
    deliver(input.substr(begin));
    result.closing = conn.is_closing();
    result.clean_end = conn.on_end_of_input();
    return result;
  }

  testing::TempTree tree_;
  std::unique_ptr<FileRoot> root_;
  std::unique_ptr<StaticFileResponder> responder_;
};

const std::string pipeline =
    "GET / HTTP/1.1\r\nHost: h\r\n\r\n"
    "HEAD /big.bin HTTP/1.1\r\nHost: h\r\n\r\n"
    "GET /big.bin HTTP/1.1\r\nHost: h\r\nRange: bytes=10-4009\r\n\r\n"
    "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbody"
    "GET /missing HTTP/1.1\r\nHost: h\r\n\r\n"
    "GET /../etc/passwd HTTP/1.1\r\nHost: h\r\n\r\n"
    "GET /big.bin HTTP/1.1\r\nHost: h\r\n\r\n";

TEST_F(HttpServerConnectionTest, AnswersPipelinedRequestsInOrder) {
  auto r = serve(pipeline, {});
  EXPECT_EQ(r.responses, 7u);
  EXPECT_FALSE(r.closing);
  EXPECT_TRUE(r.clean_end);
  std::vector<std::string> statuses;
  for (std::size_t pos = 0; (pos = r.wire.find("HTTP/1.1 ", pos)) != std::string::npos; pos += 9) {
    statuses.push_back(r.wire.substr(pos + 9, 3));
  }
  EXPECT_EQ(statuses, (std::vector<std::string>{"200", "200", "206", "405", "404", "403", "200"}));
  EXPECT_NE(r.wire.find(std::string(4000, 'z')), std::string::npos);
}

TEST_F(HttpServerConnectionTest, EverySplitProducesTheSameBytes) {
  const auto whole = serve(pipeline, {});
  for (std::size_t i = 0; i <= pipeline.size(); i += 3) {
    auto r = serve(pipeline, {i});
    ASSERT_EQ(r.wire, whole.wire) << "cut at " << i;
    EXPECT_TRUE(r.clean_end);
  }
}

TEST_F(HttpServerConnectionTest, CacheChangesNoByte) {
  OpenFileCache cache;
  const auto uncached = serve(pipeline, {});
  EXPECT_EQ(serve(pipeline, {}, 32, &cache).wire, uncached.wire);  // filling the cache
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(serve(pipeline, {}, 32, &cache).wire, uncached.wire);  // served from it
  for (std::size_t i = 0; i <= pipeline.size(); i += 11) {
    ASSERT_EQ(serve(pipeline, {i}, 32, &cache).wire, uncached.wire) << "cut at " << i;
  }
}

TEST_F(HttpServerConnectionTest, ResponseQueueIsBounded) {
  std::string flood;
  for (int i = 0; i < 100; ++i) flood += "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
  HttpServerConnection conn(*responder_, {}, 8);
  std::vector<HttpResponse> queue;
  auto in = ByteBuffer::wrap(std::string_view(flood));
  conn.on_read(in, queue, now);
  EXPECT_EQ(queue.size(), 8u);
  EXPECT_TRUE(in.has_remaining());  // the rest waits until the queue is written
  conn.on_read(in, queue, now);
  EXPECT_EQ(queue.size(), 8u);  // still full: nothing more decoded
  queue.clear();
  conn.on_read(in, queue, now);
  EXPECT_EQ(queue.size(), 8u);
  // The bounded path yields the same bytes as an unbounded one.
  EXPECT_EQ(serve(flood, {}, 8).wire, serve(flood, {}, 1000).wire);
}

TEST_F(HttpServerConnectionTest, ConnectionCloseStopsDecoding) {
  auto r = serve(
      "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n",
      {});
  EXPECT_EQ(r.responses, 1u);
  EXPECT_TRUE(r.closing);
  auto http10 = serve("GET / HTTP/1.0\r\n\r\nGET / HTTP/1.0\r\n\r\n", {});
  EXPECT_EQ(http10.responses, 1u);
}

TEST_F(HttpServerConnectionTest, MalformedRequestGetsAnErrorThenClose) {
  auto r = serve(
      "GET / HTTP/1.1\r\nHost: h\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\nBad Header: x\r\n\r\n"
      "GET / HTTP/1.1\r\nHost: h\r\n\r\n",
      {});
  EXPECT_EQ(r.responses, 2u);
  EXPECT_TRUE(r.closing);
  EXPECT_NE(r.wire.find("HTTP/1.1 400 Bad Request\r\n"), std::string::npos);
  EXPECT_NE(r.wire.find("Connection: close\r\n"), std::string::npos);
  auto huge = serve("GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(20000, 'x'), {});
  EXPECT_EQ(huge.responses, 1u);
  EXPECT_NE(huge.wire.find("431"), std::string::npos);
}

// Between keep-alive requests a connection holds no decoder (its state, head buffer and header
// index): one only while a request is partly read, a skipped body included.
TEST_F(HttpServerConnectionTest, HoldsADecoderOnlyWhileARequestIsPartlyRead) {
  HttpServerConnection conn(*responder_);
  std::vector<HttpResponse> queue;
  auto feed = [&](std::string_view bytes) {
    auto in = ByteBuffer::wrap(bytes);
    conn.on_read(in, queue, now);
    EXPECT_FALSE(in.has_remaining());
  };
  EXPECT_FALSE(conn.holds_decoder());
  EXPECT_TRUE(conn.is_idle());
  feed("GET / HTTP/1.1\r\nHo");
  EXPECT_TRUE(queue.empty());
  EXPECT_TRUE(conn.holds_decoder());
  EXPECT_FALSE(conn.is_idle());
  feed("st: h\r\n\r\n");
  EXPECT_EQ(queue.size(), 1u);
  EXPECT_FALSE(conn.holds_decoder());
  EXPECT_TRUE(conn.is_idle());
  feed("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbo");
  EXPECT_EQ(queue.size(), 2u);
  EXPECT_TRUE(conn.holds_decoder());  // two bytes of its body are still to be skipped
  EXPECT_FALSE(conn.is_idle());
  feed("dyGET / HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(queue.size(), 3u);
  EXPECT_FALSE(conn.holds_decoder());
  EXPECT_FALSE(conn.is_closing());
  EXPECT_TRUE(conn.on_end_of_input());
}

// What an idle keep-alive connection holds after one request, in heap bytes (glibc's count of
// bytes in use; a sanitizer's allocator is not counted there): the connection object and no
// more. It held its decoder too (about 270 bytes more) before the decoder was given back
// between requests.
TEST_F(HttpServerConnectionTest, AnIdleKeepAliveConnectionHoldsOnlyItself) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's allocator is not glibc's";
#endif
  constexpr int n = 200;
  const std::string_view request = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
  std::vector<std::unique_ptr<HttpServerConnection>> conns;
  conns.reserve(n + 1);
  std::vector<HttpResponse> queue;
  queue.reserve(32);
  auto one_exchange = [&] {
    conns.push_back(std::make_unique<HttpServerConnection>(*responder_));
    auto in = ByteBuffer::wrap(request);
    conns.back()->on_read(in, queue, now);
    ASSERT_EQ(queue.size(), 1u);
    queue.clear();
  };
  auto heap_in_use = [] {
    struct mallinfo2 m = ::mallinfo2();
    return static_cast<double>(m.uordblks + m.hblkhd);
  };
  one_exchange();  // warms the thread's spare decoders and buffer pool
  const double before = heap_in_use();
  for (int i = 0; i < n; ++i) {
    one_exchange();
  }
  const double per_connection = (heap_in_use() - before) / n;
  // The object in its malloc chunk: its size plus the chunk's header, in steps of 16.
  EXPECT_LE(per_connection, static_cast<double>(sizeof(HttpServerConnection) + 24));
  EXPECT_LE(sizeof(HttpServerConnection), 96u);
}

TEST_F(HttpServerConnectionTest, TruncatedRequestIsNotACleanEnd) {
  auto r = serve("GET / HTTP/1.1\r\nHost: h\r\n\r\nGET / HT", {});
  EXPECT_EQ(r.responses, 1u);
  EXPECT_FALSE(r.clean_end);
}

// Random bytes and mutated requests: never a crash (the sanitizers watch), always a
// well-formed status line first, and the same bytes out however the input is cut.
TEST_F(HttpServerConnectionTest, MutatedInputIsSplitIndependent) {
  std::mt19937 rng(12345);
  const char raw[] = "GET HEAD/ HTTP/1.01\r\n:Host%2e.\0\t abc";
  const std::string alphabet(raw, sizeof raw - 1);
  for (int round = 0; round < 300; ++round) {
    std::string input = pipeline;
    const int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits; ++e) {
      std::size_t at = rng() % (input.size() + 1);
      switch (rng() % 3) {
        case 0: input.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
        case 1:
          if (at < input.size()) input.erase(at, 1);
          break;
        default:
          if (at < input.size()) input[at] = static_cast<char>(rng() & 0xff);
          break;
      }
    }
    const auto whole = serve(input, {});
    if (!whole.wire.empty()) {
      ASSERT_EQ(whole.wire.substr(0, 9), "HTTP/1.1 ");
    }
    std::vector<std::size_t> cuts;
    for (std::size_t i = rng() % 17; i < input.size(); i += 1 + rng() % 40) cuts.push_back(i);
    ASSERT_EQ(serve(input, cuts).wire, whole.wire) << "round " << round;
  }
}

}  // namespace
}  // namespace niox::http
