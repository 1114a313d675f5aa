#include "http_request_decoder.hpp"

#include "test_printers.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace niox::http {
namespace {

std::span<const std::byte> as_bytes(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// What a decoded request looked like, copied out of the decoder's views.
struct Seen {
  std::string method, target;
  HttpVersion version;
  std::vector<std::pair<std::string, std::string>> headers;
  bool keep_alive;
  std::uint64_t content_length;
  bool operator==(const Seen&) const = default;
};

struct Outcome {
  std::vector<Seen> requests;
  DecodeStatus last = DecodeStatus::need_more;
  HttpStatus error = HttpStatus::ok;
  bool idle = true;
  bool operator==(const Outcome&) const = default;
};

Seen copy(const HttpRequest& r) {
  Seen s{std::string(r.method()), std::string(r.target()), r.version(), {},
         r.keep_alive(),          r.content_length()};
  for (auto& h : r.headers()) {
    s.headers.emplace_back(h.name, h.value);
  }
  return s;
}

// Feeds `input` in pieces cut at `cuts` (sorted offsets) and collects everything decoded.
Outcome run(HttpRequestDecoder& d, std::string_view input, const std::vector<std::size_t>& cuts) {
  Outcome out;
  std::size_t begin = 0;
  auto feed = [&](std::string_view piece) {
    while (true) {
      std::size_t used = 0;
      auto st = d.decode(as_bytes(piece), used);
      EXPECT_LE(used, piece.size());
      piece.remove_prefix(used);
      out.last = st;
      if (st == DecodeStatus::request) {
        out.requests.push_back(copy(d.request()));
        continue;
      }
      if (st == DecodeStatus::error) {
        out.error = d.error_status();
        return false;
      }
      EXPECT_TRUE(piece.empty());
      return true;
    }
  };
  for (auto cut : cuts) {
    if (!feed(input.substr(begin, cut - begin))) {
      out.idle = d.is_idle();
      return out;
    }
    begin = cut;
  }
  feed(input.substr(begin));
  out.idle = d.is_idle();
  return out;
}

Outcome run_whole(std::string_view input, HttpDecoderConfig cfg = {}) {
  HttpRequestDecoder d(cfg);
  return run(d, input, {});
}

TEST(HttpRequestDecoder, DecodesSimpleGet) {
  auto out = run_whole("GET /index.html HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n");
  ASSERT_EQ(out.requests.size(), 1u);
  const auto& r = out.requests[0];
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/index.html");
  EXPECT_EQ(r.version, HttpVersion::http_1_1);
  EXPECT_TRUE(r.keep_alive);
  ASSERT_EQ(r.headers.size(), 2u);
  EXPECT_EQ(r.headers[0].first, "Host");
  EXPECT_EQ(r.headers[0].second, "example.com");
  EXPECT_TRUE(out.idle);
}

TEST(HttpRequestDecoder, HeaderLookupIsCaseInsensitiveAndValuesTrimmed) {
  HttpRequestDecoder d;
  std::size_t used = 0;
  std::string_view in = "HEAD / HTTP/1.1\r\nhOsT:   a.b \t\r\nX-Empty:\r\n\r\n";
  ASSERT_EQ(d.decode(as_bytes(in), used), DecodeStatus::request);
  EXPECT_EQ(used, in.size());
  EXPECT_EQ(d.request().header("HOST"), "a.b");
  EXPECT_EQ(d.request().header("x-empty"), "");
  EXPECT_FALSE(d.request().header("missing"));
  EXPECT_TRUE(d.request().is_head());
}

TEST(HttpRequestDecoder, PersistenceFollowsVersionAndConnection) {
  EXPECT_FALSE(run_whole("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
                   .requests.at(0)
                   .keep_alive);
  EXPECT_FALSE(run_whole("GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, CLOSE\r\n\r\n")
                   .requests.at(0)
                   .keep_alive);
  EXPECT_FALSE(run_whole("GET / HTTP/1.0\r\n\r\n").requests.at(0).keep_alive);
  auto ka10 = run_whole("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
  EXPECT_TRUE(ka10.requests.at(0).keep_alive);
  EXPECT_EQ(ka10.requests.at(0).version, HttpVersion::http_1_0);
}

TEST(HttpRequestDecoder, LeadingEmptyLinesAreIgnoredUpToALimit) {
  EXPECT_EQ(run_whole("\r\n\r\nGET / HTTP/1.0\r\n\r\n").requests.size(), 1u);
  HttpDecoderConfig cfg;
  cfg.max_leading_empty_lines = 2;
  EXPECT_EQ(run_whole("\r\n\r\n\r\nGET / HTTP/1.0\r\n\r\n", cfg).error, HttpStatus::bad_request);
}

struct BadInput {
  const char* name;
  std::string text;
  HttpStatus status;
};

class HttpRequestDecoderRejects : public ::testing::TestWithParam<BadInput> {};

TEST_P(HttpRequestDecoderRejects, WithStatus) {
  const auto& p = GetParam();
  HttpRequestDecoder d;
  auto out = run(d, p.text, {});
  EXPECT_EQ(out.last, DecodeStatus::error) << p.name;
  EXPECT_EQ(out.error, p.status) << p.name << ": " << d.error_reason();
  EXPECT_TRUE(out.requests.empty());
  // The error is sticky: nothing more is decoded on this connection.
  std::size_t used = 1;
  EXPECT_EQ(d.decode(as_bytes("GET / HTTP/1.0\r\n\r\n"), used), DecodeStatus::error);
  EXPECT_EQ(used, 0u);
  EXPECT_FALSE(d.is_idle());
}

const std::string ok_host = "Host: h\r\n";

INSTANTIATE_TEST_SUITE_P(
    Table, HttpRequestDecoderRejects,
    ::testing::Values(
        BadInput{"bare_lf", "GET / HTTP/1.1\nHost: h\r\n\r\n", HttpStatus::bad_request},
        BadInput{"bare_cr", "GET / HTTP/1.1\rHost: h\r\n\r\n", HttpStatus::bad_request},
        BadInput{"bare_lf_first", "\nGET / HTTP/1.1\r\n\r\n", HttpStatus::bad_request},
        BadInput{"two_spaces", "GET  / HTTP/1.1\r\n" + ok_host + "\r\n", HttpStatus::bad_request},
        BadInput{"no_version", "GET /\r\n" + ok_host + "\r\n", HttpStatus::bad_request},
        BadInput{"extra_word", "GET / HTTP/1.1 x\r\n" + ok_host + "\r\n", HttpStatus::bad_request},
        BadInput{"lowercase_http", "GET / http/1.1\r\n" + ok_host + "\r\n",
                 HttpStatus::bad_request},
        BadInput{"bad_method", "G(T / HTTP/1.1\r\n" + ok_host + "\r\n", HttpStatus::bad_request},
        BadInput{"tab_in_target", "GET /a\tb HTTP/1.1\r\n" + ok_host + "\r\n",
                 HttpStatus::bad_request},
        BadInput{"nul_in_target", std::string("GET /a\0b HTTP/1.1\r\n", 20) + ok_host + "\r\n",
                 HttpStatus::bad_request},
        BadInput{"http2", "GET / HTTP/2.0\r\n" + ok_host + "\r\n",
                 HttpStatus::http_version_not_supported},
        BadInput{"http09", "GET / HTTP/0.9\r\n\r\n", HttpStatus::http_version_not_supported},
        BadInput{"missing_host", "GET / HTTP/1.1\r\n\r\n", HttpStatus::bad_request},
        BadInput{"two_hosts", "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n",
                 HttpStatus::bad_request},
        BadInput{"obs_fold", "GET / HTTP/1.1\r\n" + ok_host + "X-A: 1\r\n  2\r\n\r\n",
                 HttpStatus::bad_request},
        BadInput{"space_before_colon", "GET / HTTP/1.1\r\nHost : h\r\n\r\n",
                 HttpStatus::bad_request},
        BadInput{"no_colon", "GET / HTTP/1.1\r\n" + ok_host + "Nonsense\r\n\r\n",
                 HttpStatus::bad_request},
        BadInput{"empty_name", "GET / HTTP/1.1\r\n" + ok_host + ": v\r\n\r\n",
                 HttpStatus::bad_request},
        BadInput{"control_in_value",
                 "GET / HTTP/1.1\r\n" + ok_host + std::string("X-A: a\0b\r\n\r\n", 12),
                 HttpStatus::bad_request},
        BadInput{"transfer_encoding",
                 "GET / HTTP/1.1\r\n" + ok_host + "Transfer-Encoding: chunked\r\n\r\n",
                 HttpStatus::bad_request},
        BadInput{"bad_content_length",
                 "GET / HTTP/1.1\r\n" + ok_host + "Content-Length: 1x\r\n\r\n",
                 HttpStatus::bad_request},
        BadInput{"negative_content_length",
                 "GET / HTTP/1.1\r\n" + ok_host + "Content-Length: -1\r\n\r\n",
                 HttpStatus::bad_request},
        BadInput{"conflicting_content_length",
                 "GET / HTTP/1.1\r\n" + ok_host + "Content-Length: 1\r\nContent-Length: 2\r\n\r\n",
                 HttpStatus::bad_request},
        BadInput{"overflowing_content_length",
                 "GET / HTTP/1.1\r\n" + ok_host + "Content-Length: 99999999999999999999999\r\n\r\n",
                 HttpStatus::bad_request},
        BadInput{"huge_body", "GET / HTTP/1.1\r\n" + ok_host + "Content-Length: 100000000\r\n\r\n",
                 HttpStatus::content_too_large},
        BadInput{"long_request_line", "GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n",
                 HttpStatus::uri_too_long},
        BadInput{"big_head",
                 "GET / HTTP/1.1\r\n" + ok_host + "X-Big: " + std::string(9000, 'v') + "\r\n\r\n",
                 HttpStatus::request_header_fields_too_large}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(HttpRequestDecoder, TooManyHeadersIs431) {
  std::string in = "GET / HTTP/1.1\r\nHost: h\r\n";
  for (int i = 0; i < 64; ++i) {
    in += "X-" + std::to_string(i) + ": v\r\n";
  }
  in += "\r\n";
  EXPECT_EQ(run_whole(in).error, HttpStatus::request_header_fields_too_large);
  HttpDecoderConfig cfg;
  cfg.max_headers = 65;
  EXPECT_EQ(run_whole(in, cfg).requests.size(), 1u);
}

TEST(HttpRequestDecoder, HeadExactlyAtTheLimitIsAccepted) {
  std::string in = "GET / HTTP/1.1\r\nHost: h\r\nX-Pad: ";
  HttpDecoderConfig cfg;
  cfg.max_header_bytes = 256;
  in += std::string(cfg.max_header_bytes - in.size() - 4, 'p') + "\r\n\r\n";
  ASSERT_EQ(in.size(), cfg.max_header_bytes);
  EXPECT_EQ(run_whole(in, cfg).requests.size(), 1u);
  in.insert(in.size() - 4, "p");
  EXPECT_EQ(run_whole(in, cfg).error, HttpStatus::request_header_fields_too_large);
}

TEST(HttpRequestDecoder, OversizedHeadIsRefusedAsSoonAsTheLimitIsReached) {
  // The decoder never waits for (or stores) more than its limit: the error comes while the
  // client is still sending, with at most max_header_bytes consumed.
  HttpDecoderConfig cfg;
  cfg.max_header_bytes = 1024;
  HttpRequestDecoder d(cfg);
  std::string in = "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(100000, 'a');
  std::size_t used = 0;
  EXPECT_EQ(d.decode(as_bytes(in), used), DecodeStatus::error);
  EXPECT_EQ(d.error_status(), HttpStatus::request_header_fields_too_large);
  EXPECT_EQ(used, 1024u);
}

TEST(HttpRequestDecoder, HeadBufferGrowsWithTheHeadNotWithTheLimit) {
  // A huge limit costs nothing until a head that large arrives: one byte holds a small buffer.
  HttpDecoderConfig cfg;
  cfg.max_header_bytes = 1 << 20;
  HttpRequestDecoder d(cfg);
  EXPECT_EQ(d.buffer_capacity(), 0u);
  std::size_t used = 0;
  EXPECT_EQ(d.decode(as_bytes("G"), used), DecodeStatus::need_more);
  EXPECT_GT(d.buffer_capacity(), 0u);
  EXPECT_LE(d.buffer_capacity(), 4096u);

  // A 100 KB head grows it geometrically, to no more than twice what the head needs, and is
  // decoded intact whatever the pieces it came in.
  const std::string big(100000, 'x');
  const std::string rest = "ET /a HTTP/1.1\r\nHost: h\r\nX-Big: " + big + "\r\nX-After: 1\r\n\r\n";
  for (std::size_t off = 0; off < rest.size(); off += 777) {
    auto piece = std::string_view(rest).substr(off, 777);
    auto st = d.decode(as_bytes(piece), used);
    EXPECT_EQ(used, piece.size());
    EXPECT_EQ(st, off + 777 >= rest.size() ? DecodeStatus::request : DecodeStatus::need_more);
  }
  EXPECT_EQ(d.request().target(), "/a");
  EXPECT_EQ(d.request().header("X-Big"), big);
  EXPECT_EQ(d.request().header("X-After"), "1");
  EXPECT_GE(d.buffer_capacity(), rest.size() + 1);
  EXPECT_LE(d.buffer_capacity(), 2 * (rest.size() + 1));

  // The next request on the connection starts small again.
  EXPECT_EQ(d.decode(as_bytes("GET / HTTP/1.1\r\n"), used), DecodeStatus::need_more);
  EXPECT_LE(d.buffer_capacity(), 4096u);
  EXPECT_EQ(d.decode(as_bytes("Host: h\r\n\r\n"), used), DecodeStatus::request);
  EXPECT_EQ(d.request().target(), "/");
}

// Between keep-alive requests the decoder holds no buffer: the decode() after a request gives
// the head buffer back to the thread's pool, and the next request takes one again.
TEST(HttpRequestDecoder, BetweenKeepAliveRequestsItHoldsNoBuffer) {
  HttpRequestDecoder d;
  std::size_t used = 0;
  ASSERT_EQ(d.decode(as_bytes("GET /a HTTP/1.1\r\nHost: h\r\n\r\n"), used), DecodeStatus::request);
  EXPECT_GT(d.buffer_capacity(), 0u);
  EXPECT_EQ(d.request().target(), "/a");
  EXPECT_EQ(d.decode(as_bytes(""), used), DecodeStatus::need_more);
  EXPECT_EQ(d.buffer_capacity(), 0u);
  EXPECT_TRUE(d.is_idle());
  ASSERT_EQ(d.decode(as_bytes("GET /b HTTP/1.1\r\nHost: h\r\n\r\n"), used), DecodeStatus::request);
  EXPECT_EQ(d.request().target(), "/b");
  EXPECT_EQ(d.request().header("Host"), "h");
}

TEST(HttpRequestDecoder, GrowingBufferKeepsTheExactLimit) {
  // A limit that is not a power of two is still exact: a head of that size is accepted, one
  // byte more is 431, and the buffer never exceeds the limit.
  for (std::size_t limit : {std::size_t{300}, std::size_t{5000}, std::size_t{70001}}) {
    HttpDecoderConfig cfg;
    cfg.max_header_bytes = limit;
    std::string in = "GET / HTTP/1.1\r\nHost: h\r\nX-Pad: ";
    in += std::string(limit - in.size() - 4, 'p') + "\r\n\r\n";
    ASSERT_EQ(in.size(), limit);
    HttpRequestDecoder d(cfg);
    for (char c : in) {
      std::size_t used = 0;
      d.decode(as_bytes(std::string_view(&c, 1)), used);
      EXPECT_LE(d.buffer_capacity(), limit);
    }
    EXPECT_EQ(d.request().header("Host"), "h") << limit;
    EXPECT_EQ(run_whole(in, cfg).requests.size(), 1u) << limit;
    in.insert(in.size() - 4, "p");
    EXPECT_EQ(run_whole(in, cfg).error, HttpStatus::request_header_fields_too_large) << limit;
  }
}

TEST(HttpRequestDecoder, ContentLengthBodyIsSkippedAcrossPieces) {
  HttpRequestDecoder d;
  std::string in =
      "GET /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: "
      "h\r\n\r\n";
  auto out = run(d, in, {in.find("hello") + 2});
  ASSERT_EQ(out.requests.size(), 2u);
  EXPECT_EQ(out.requests[0].content_length, 5u);
  EXPECT_EQ(out.requests[1].target, "/b");
  EXPECT_TRUE(out.idle);
}

TEST(HttpRequestDecoder, IdleOnlyBetweenRequests) {
  HttpRequestDecoder d;
  std::size_t used = 0;
  EXPECT_TRUE(d.is_idle());
  EXPECT_EQ(d.decode(as_bytes("GET / HT"), used), DecodeStatus::need_more);
  EXPECT_FALSE(d.is_idle());
  EXPECT_EQ(d.decode(as_bytes("TP/1.0\r\nContent-Length: 2\r\n\r\n"), used), DecodeStatus::request);
  EXPECT_FALSE(d.is_idle());  // the body is still to come
  EXPECT_EQ(d.decode(as_bytes("xy"), used), DecodeStatus::need_more);
  EXPECT_TRUE(d.is_idle());
  d.reset();
  EXPECT_TRUE(d.is_idle());
}

TEST(HttpRequestDecoder, ByteBufferOverloadAdvancesPosition) {
  HttpRequestDecoder d;
  auto buf = ByteBuffer::wrap(std::string_view("GET /1 HTTP/1.0\r\n\r\nGET /2 HTTP/1.0\r\n\r\nGE"));
  ASSERT_EQ(d.decode(buf), DecodeStatus::request);
  EXPECT_EQ(d.request().target(), "/1");
  EXPECT_EQ(buf.position(), 19u);
  ASSERT_EQ(d.decode(buf), DecodeStatus::request);
  EXPECT_EQ(d.request().target(), "/2");
  EXPECT_EQ(d.decode(buf), DecodeStatus::need_more);
  EXPECT_FALSE(buf.has_remaining());
}

// A pipelined stream, and streams that fail part-way, decode the same however they are cut.
TEST(HttpRequestDecoder, EverySplitGivesTheSameResult) {
  const std::vector<std::string> streams = {
      "GET /a HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n"
      "\r\nHEAD /b?q=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
      "GET /c HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
      "DELETE /d HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
      "GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n",
      "GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\nHost: h\r\n\r\n",
  };
  HttpDecoderConfig small;
  small.max_header_bytes = 64;  // the third request of stream 0 fits, a longer one would not
  for (const auto& stream : streams) {
    for (const auto& cfg : {HttpDecoderConfig{}, small}) {
      const Outcome whole = run_whole(stream, cfg);
      for (std::size_t i = 0; i <= stream.size(); ++i) {
        HttpRequestDecoder d(cfg);
        EXPECT_EQ(run(d, stream, {i}), whole) << "cut at " << i;
        for (std::size_t j = i; j <= stream.size(); j += 7) {
          HttpRequestDecoder d2(cfg);
          EXPECT_EQ(run(d2, stream, {i, j}), whole) << "cuts at " << i << "," << j;
        }
      }
    }
  }
  EXPECT_EQ(run_whole(streams[0]).requests.size(), 4u);
  EXPECT_EQ(run_whole(streams[1]).requests.size(), 1u);
  EXPECT_EQ(run_whole(streams[1]).error, HttpStatus::bad_request);
}

TEST(HttpRequestDecoder, ByteAtATimeMatchesWhole) {
  std::string stream =
      "GET /x HTTP/1.1\r\nHost: h\r\nRange: bytes=0-1\r\n\r\nGET /y HTTP/1.1\r\nHost: h\r\n\r\n";
  std::vector<std::size_t> cuts;
  for (std::size_t i = 1; i < stream.size(); ++i) {
    cuts.push_back(i);
  }
  HttpRequestDecoder d;
  EXPECT_EQ(run(d, stream, cuts), run_whole(stream));
}

TEST(HttpRequestDecoder, AbsoluteFormTargetIsKeptForThePathStage) {
  auto out = run_whole("GET http://example.com/a?b HTTP/1.1\r\nHost: example.com\r\n\r\n");
  EXPECT_EQ(out.requests.at(0).target, "http://example.com/a?b");
}

}  // namespace
}  // namespace niox::http
