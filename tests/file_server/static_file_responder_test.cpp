#include "http_fields.hpp"
#include "static_file_responder.hpp"
#include "request_time.hpp"
#include "temp_tree.hpp"
#include "test_printers.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <string>

namespace niox::http {
namespace {

constexpr std::time_t file_mtime = 784111777;  // Sun, 06 Nov 1994 08:49:37 GMT

struct Parsed {
  std::string status_line;
  std::map<std::string, std::string> fields;  // lower-case names
  bool has(const std::string& name) const { return fields.count(name) != 0; }
  const std::string& at(const std::string& name) const { return fields.at(name); }
};

Parsed parse_head(const ByteBuffer& head) {
  std::string text(head.string_view());
  Parsed p;
  EXPECT_TRUE(text.size() >= 4 && text.substr(text.size() - 4) == "\r\n\r\n") << text;
  std::size_t pos = text.find("\r\n");
  p.status_line = text.substr(0, pos);
  pos += 2;
  while (pos < text.size() - 2) {
    auto end = text.find("\r\n", pos);
    auto line = text.substr(pos, end - pos);
    auto colon = line.find(": ");
    EXPECT_NE(colon, std::string::npos) << line;
    std::string name = line.substr(0, colon);
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_FALSE(p.fields.count(name)) << "duplicate field " << name;
    p.fields[name] = line.substr(colon + 2);
    pos = end + 2;
  }
  return p;
}

std::string read_region(const HttpResponse& r) {
  std::string out(static_cast<std::size_t>(r.file_count), '\0');
  EXPECT_EQ(::pread(r.file.get(), out.data(), out.size(), static_cast<off_t>(r.file_offset)),
            static_cast<ssize_t>(out.size()));
  return out;
}

class StaticFileResponderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tree_.write("small.txt", "alpha");
    big_.reserve(1000);
    for (int i = 0; i < 1000; ++i) big_.push_back(static_cast<char>('a' + i % 26));
    tree_.write("big.bin", big_);
    tree_.write("empty.html", "");
    tree_.write("dir/index.html", "<p>dir</p>");
    for (const char* f : {"small.txt", "big.bin", "empty.html", "dir/index.html"}) {
      timespec times[2] = {{file_mtime, 0}, {file_mtime, 0}};
      ASSERT_EQ(::utimensat(AT_FDCWD, (tree_ / f).c_str(), times, 0), 0);
    }
    root_ = std::make_unique<FileRoot>(tree_.path().string());
    StaticFileConfig cfg;
    cfg.small_body_max = 64;
    responder_ = std::make_unique<StaticFileResponder>(*root_, cfg);
  }

  HttpResponse respond(std::string_view request, std::time_t at = now) {
    HttpRequestDecoder decoder;
    auto in = ByteBuffer::wrap(request);
    auto st = decoder.decode(in);
    if (st == DecodeStatus::error) {
      return responder_->respond_to_decode_error(decoder.error_status(), at);
    }
    EXPECT_EQ(st, DecodeStatus::request) << request;
    return responder_->respond(decoder.request(), at);
  }

  testing::TempTree tree_;
  std::string big_;
  std::unique_ptr<FileRoot> root_;
  std::unique_ptr<StaticFileResponder> responder_;
};

TEST_F(StaticFileResponderTest, SmallFileTravelsInMemoryWithItsHead) {
  auto r = respond("GET /small.txt HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(r.status, HttpStatus::ok);
  auto p = parse_head(r.head);
  EXPECT_EQ(p.status_line, "HTTP/1.1 200 OK");
  EXPECT_EQ(p.at("content-type"), "text/plain; charset=utf-8");
  EXPECT_EQ(p.at("content-length"), "5");
  EXPECT_EQ(p.at("last-modified"), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(p.at("date"), format_http_date(now));
  EXPECT_EQ(p.at("accept-ranges"), "bytes");
  EXPECT_EQ(p.at("server"), "niox");
  EXPECT_FALSE(p.has("connection"));
  EXPECT_EQ(r.body.string_view(), "alpha");
  EXPECT_FALSE(r.has_file_region());
  EXPECT_FALSE(r.file.valid());  // closed: nothing left to send from it
  EXPECT_TRUE(r.keep_alive);
  EXPECT_EQ(r.total_bytes(), r.head.remaining() + 5);
}

// Date and Last-Modified are formatted once and kept while they stay the same: each response
// still carries its own second and its own file's time.
TEST_F(StaticFileResponderTest, EveryResponseCarriesItsOwnDateAndItsFilesTime) {
  constexpr std::time_t newer = 1700000000;
  tree_.write("newer.txt", "beta");
  timespec times[2] = {{newer, 0}, {newer, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (tree_ / "newer.txt").c_str(), times, 0), 0);
  const std::pair<const char*, std::time_t> asked[] = {
      {"/small.txt", now},     {"/newer.txt", now}, {"/small.txt", now + 1},
      {"/newer.txt", now + 1}, {"/small.txt", now}, {"/newer.txt", now + 86400}};
  for (const auto& [path, at] : asked) {
    auto p =
        parse_head(respond(std::string("GET ") + path + " HTTP/1.1\r\nHost: h\r\n\r\n", at).head);
    EXPECT_EQ(p.at("date"), format_http_date(at)) << path << " at " << at;
    EXPECT_EQ(p.at("last-modified"),
              format_http_date(std::string_view(path) == "/small.txt" ? file_mtime : newer))
        << path << " at " << at;
  }
  auto error = parse_head(respond("DELETE /small.txt HTTP/1.1\r\nHost: h\r\n\r\n", now + 2).head);
  EXPECT_EQ(error.at("date"), format_http_date(now + 2));
}

// A head is written into a buffer sized beforehand: a long server name or Location still fits
// whole.
TEST_F(StaticFileResponderTest, LongServerNamesAndLocationsFitTheHead) {
  StaticFileConfig cfg;
  cfg.server_name = std::string(5000, 's');
  StaticFileResponder long_named(*root_, cfg);
  std::string dir;  // 2,412 characters, in segments a file system takes
  for (int i = 0; i < 12; ++i) dir += (i ? "/" : "") + std::string(200, static_cast<char>('a' + i));
  tree_.write(dir + "/index.html", "<p>deep</p>");
  HttpRequestDecoder decoder(HttpDecoderConfig{.max_header_bytes = 16384});
  const std::string request = "GET /" + dir + "?q=1 HTTP/1.1\r\nHost: h\r\n\r\n";
  auto in = ByteBuffer::wrap(std::string_view(request));
  ASSERT_EQ(decoder.decode(in), DecodeStatus::request);
  auto redirect = parse_head(long_named.respond(decoder.request(), now).head);
  EXPECT_EQ(redirect.status_line, "HTTP/1.1 301 Moved Permanently");
  EXPECT_EQ(redirect.at("server"), cfg.server_name);
  EXPECT_EQ(redirect.at("location"), "/" + dir + "/?q=1");

  decoder.reset();
  const std::string ranged = "GET /big.bin HTTP/1.1\r\nHost: h\r\nRange: bytes=1-998\r\n\r\n";
  auto in2 = ByteBuffer::wrap(std::string_view(ranged));
  ASSERT_EQ(decoder.decode(in2), DecodeStatus::request);
  auto partial = parse_head(long_named.respond(decoder.request(), now).head);
  EXPECT_EQ(partial.status_line, "HTTP/1.1 206 Partial Content");
  EXPECT_EQ(partial.at("server"), cfg.server_name);
  EXPECT_EQ(partial.at("content-range"), "bytes 1-998/1000");
}

TEST_F(StaticFileResponderTest, LargeFileBecomesARegion) {
  auto r = respond("GET /big.bin HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(r.status, HttpStatus::ok);
  auto p = parse_head(r.head);
  EXPECT_EQ(p.at("content-length"), "1000");
  EXPECT_EQ(p.at("content-type"), "application/octet-stream");
  EXPECT_FALSE(r.body.has_remaining());
  ASSERT_TRUE(r.has_file_region());
  EXPECT_EQ(r.file_offset, 0u);
  EXPECT_EQ(r.file_count, 1000u);
  EXPECT_EQ(read_region(r), big_);
}

TEST_F(StaticFileResponderTest, HeadHasGetsFieldsAndNoBody) {
  auto get = parse_head(respond("GET /big.bin HTTP/1.1\r\nHost: h\r\n\r\n").head);
  auto r = respond("HEAD /big.bin HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(parse_head(r.head).fields, get.fields);
  EXPECT_FALSE(r.body.has_remaining());
  EXPECT_FALSE(r.has_file_region());
  auto small = respond("HEAD /small.txt HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(parse_head(small.head).at("content-length"), "5");
  EXPECT_FALSE(small.body.has_remaining());
}

TEST_F(StaticFileResponderTest, DirectoryServesIndexWithItsType) {
  auto r = respond("GET /dir/ HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(parse_head(r.head).at("content-type"), "text/html; charset=utf-8");
  EXPECT_EQ(r.body.string_view(), "<p>dir</p>");
}

TEST_F(StaticFileResponderTest, DirectoryWithoutSlashIsRedirected) {
  auto r = respond("GET /dir?x=1 HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(r.status, HttpStatus::moved_permanently);
  auto p = parse_head(r.head);
  EXPECT_EQ(p.at("location"), "/dir/?x=1");
  EXPECT_EQ(r.body.string_view(), "301 Moved Permanently\n");
  EXPECT_TRUE(r.keep_alive);
  // The normalised path, escaped again where it must be: "/d%69r" is "/dir".
  EXPECT_EQ(parse_head(respond("HEAD /d%69r HTTP/1.1\r\nHost: h\r\n\r\n").head).at("location"),
            "/dir/");
  EXPECT_EQ(parse_head(respond("GET http://h/dir HTTP/1.1\r\nHost: h\r\n\r\n").head).at("location"),
            "/dir/");
  EXPECT_EQ(respond("GET / HTTP/1.1\r\nHost: h\r\n\r\n").status,
            HttpStatus::not_found);  // no index
  EXPECT_EQ(respond("GET /dir/ HTTP/1.1\r\nHost: h\r\n\r\n").status, HttpStatus::ok);
}

TEST_F(StaticFileResponderTest, DirectoryRedirectNeverNamesAnotherHost) {
  // "//evil.com/../dir" is "dir" inside the root; echoing the raw target back would give
  // "Location: //evil.com/../dir/", which a browser resolves to the host evil.com.
  for (const char* target : {"//evil.com/../dir", "//evil.com/%2e%2e/dir", "//dir", "///dir",
                             "http://h//evil.com/../dir", "/./dir", "//evil.com/..//dir"}) {
    auto r = respond(std::string("GET ") + target + " HTTP/1.1\r\nHost: h\r\n\r\n");
    EXPECT_EQ(r.status, HttpStatus::moved_permanently) << target;
    EXPECT_EQ(parse_head(r.head).at("location"), "/dir/") << target;
  }
  EXPECT_EQ(parse_head(respond("GET //evil.com/../dir?a=b HTTP/1.1\r\nHost: h\r\n\r\n").head)
                .at("location"),
            "/dir/?a=b");
}

TEST_F(StaticFileResponderTest, TrailingSlashOnAFileIs404) {
  // A trailing slash, or a trailing "/." (RFC 3986 §5.2.4 keeps the slash), names a directory,
  // and a regular file is not one.
  OpenFileCache cache;
  for (const char* warm : {"/small.txt", "/big.bin", "/dir/index.html"}) {
    HttpRequestDecoder decoder;
    auto req = std::string("GET ") + warm + " HTTP/1.1\r\nHost: h\r\n\r\n";
    auto in = ByteBuffer::wrap(std::string_view(req));
    ASSERT_EQ(decoder.decode(in), DecodeStatus::request);
    ASSERT_EQ(responder_->respond(decoder.request(), now, &cache).status, HttpStatus::ok) << warm;
  }
  for (const char* target : {"/small.txt/", "/small.txt/.", "/small.txt/%2e", "/small.txt//",
                             "/big.bin/", "/dir/index.html/", "/dir/index.html/."}) {
    for (const char* method : {"GET", "HEAD"}) {
      HttpRequestDecoder decoder;
      auto req = std::string(method) + " " + target + " HTTP/1.1\r\nHost: h\r\n\r\n";
      auto in = ByteBuffer::wrap(std::string_view(req));
      ASSERT_EQ(decoder.decode(in), DecodeStatus::request);
      EXPECT_EQ(responder_->respond(decoder.request(), now).status, HttpStatus::not_found)
          << method << " " << target;
      // The same with the file in the cache.
      EXPECT_EQ(responder_->respond(decoder.request(), now, &cache).status, HttpStatus::not_found)
          << method << " " << target << " (cached)";
    }
  }
  EXPECT_EQ(respond("GET /small.txt HTTP/1.1\r\nHost: h\r\n\r\n").status, HttpStatus::ok);
  EXPECT_EQ(respond("GET /dir/. HTTP/1.1\r\nHost: h\r\n\r\n").status, HttpStatus::ok);
  EXPECT_EQ(respond("GET /dir/x/.. HTTP/1.1\r\nHost: h\r\n\r\n").status, HttpStatus::ok);
}

TEST_F(StaticFileResponderTest, EmptyFile) {
  auto r = respond("GET /empty.html HTTP/1.1\r\nHost: h\r\nRange: bytes=0-0\r\n\r\n");
  EXPECT_EQ(r.status, HttpStatus::ok);
  EXPECT_EQ(parse_head(r.head).at("content-length"), "0");
  EXPECT_EQ(r.total_bytes(), r.head.remaining());
}

TEST_F(StaticFileResponderTest, SingleRangeIsPartialContent) {
  auto r = respond("GET /small.txt HTTP/1.1\r\nHost: h\r\nRange: bytes=1-3\r\n\r\n");
  EXPECT_EQ(r.status, HttpStatus::partial_content);
  auto p = parse_head(r.head);
  EXPECT_EQ(p.status_line, "HTTP/1.1 206 Partial Content");
  EXPECT_EQ(p.at("content-range"), "bytes 1-3/5");
  EXPECT_EQ(p.at("content-length"), "3");
  EXPECT_EQ(r.body.string_view(), "lph");

  auto big = respond("GET /big.bin HTTP/1.1\r\nHost: h\r\nRange: bytes=-900\r\n\r\n");
  EXPECT_EQ(parse_head(big.head).at("content-range"), "bytes 100-999/1000");
  ASSERT_TRUE(big.has_file_region());
  EXPECT_EQ(big.file_offset, 100u);
  EXPECT_EQ(read_region(big), big_.substr(100));

  // A range small enough travels in memory even from a big file.
  auto tail = respond("GET /big.bin HTTP/1.1\r\nHost: h\r\nRange: bytes=990-\r\n\r\n");
  EXPECT_EQ(tail.body.string_view(), big_.substr(990));
}

TEST_F(StaticFileResponderTest, UnsatisfiableRangeIs416) {
  auto r = respond("GET /small.txt HTTP/1.1\r\nHost: h\r\nRange: bytes=5-\r\n\r\n");
  EXPECT_EQ(r.status, HttpStatus::range_not_satisfiable);
  auto p = parse_head(r.head);
  EXPECT_EQ(p.at("content-range"), "bytes */5");
  EXPECT_EQ(r.body.string_view(), "416 Range Not Satisfiable\n");
  EXPECT_TRUE(r.keep_alive);
}

TEST_F(StaticFileResponderTest, IgnoredRanges) {
  for (const char* req : {"GET /small.txt HTTP/1.1\r\nHost: h\r\nRange: bytes=0-0,2-3\r\n\r\n",
                          "HEAD /small.txt HTTP/1.1\r\nHost: h\r\nRange: bytes=0-0\r\n\r\n",
                          "GET /small.txt HTTP/1.1\r\nHost: h\r\nRange: bytes=0-0\r\n"
                          "If-Range: Mon, 07 Nov 1994 08:49:37 GMT\r\n\r\n",
                          "GET /small.txt HTTP/1.1\r\nHost: h\r\nRange: bytes=0-0\r\n"
                          "If-Range: \"etag\"\r\n\r\n"}) {
    auto r = respond(req);
    EXPECT_EQ(r.status, HttpStatus::ok) << req;
    EXPECT_EQ(parse_head(r.head).at("content-length"), "5") << req;
  }
  auto matching = respond(
      "GET /small.txt HTTP/1.1\r\nHost: h\r\nRange: bytes=0-0\r\n"
      "If-Range: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n");
  EXPECT_EQ(matching.status, HttpStatus::partial_content);
}

TEST_F(StaticFileResponderTest, IfModifiedSince) {
  for (const char* date : {"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
                           "Sun Nov  6 08:49:37 1994", "Mon, 07 Nov 1994 00:00:00 GMT"}) {
    auto r = respond(std::string("GET /big.bin HTTP/1.1\r\nHost: h\r\nIf-Modified-Since: ") + date +
                     "\r\n\r\n");
    EXPECT_EQ(r.status, HttpStatus::not_modified) << date;
    auto p = parse_head(r.head);
    EXPECT_EQ(p.status_line, "HTTP/1.1 304 Not Modified");
    EXPECT_EQ(p.at("last-modified"), "Sun, 06 Nov 1994 08:49:37 GMT");
    EXPECT_FALSE(p.has("content-length"));
    EXPECT_EQ(r.total_bytes(), r.head.remaining());
  }
  for (const char* date : {"Sun, 06 Nov 1994 08:49:36 GMT", "garbage"}) {
    auto r = respond(std::string("GET /small.txt HTTP/1.1\r\nHost: h\r\nIf-Modified-Since: ") +
                     date + "\r\n\r\n");
    EXPECT_EQ(r.status, HttpStatus::ok) << date;
  }
  auto inm = respond(
      "GET /small.txt HTTP/1.1\r\nHost: h\r\nIf-None-Match: \"x\"\r\n"
      "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n");
  EXPECT_EQ(inm.status, HttpStatus::ok);
}

TEST_F(StaticFileResponderTest, IfModifiedSinceInTheFutureIsIgnored) {
  // RFC 9110 §13.1.3: a date later than the server's current time is invalid, and the field is
  // then ignored: the full response, not 304.
  for (std::time_t offset : {1, 3600, 86400 * 365}) {
    auto date = format_http_date(now + offset);
    auto r =
        respond("GET /small.txt HTTP/1.1\r\nHost: h\r\nIf-Modified-Since: " + date + "\r\n\r\n");
    EXPECT_EQ(r.status, HttpStatus::ok) << date;
    EXPECT_EQ(r.body.string_view(), "alpha") << date;
  }
  // Up to the current time it is a valid date, later than the file's: 304.
  for (std::time_t offset : {0, -1, -86400}) {
    auto date = format_http_date(now + offset);
    auto r =
        respond("GET /small.txt HTTP/1.1\r\nHost: h\r\nIf-Modified-Since: " + date + "\r\n\r\n");
    EXPECT_EQ(r.status, HttpStatus::not_modified) << date;
  }
}

TEST_F(StaticFileResponderTest, OtherMethodsAre405WithAllow) {
  auto r = respond("POST /small.txt HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_EQ(r.status, HttpStatus::method_not_allowed);
  auto p = parse_head(r.head);
  EXPECT_EQ(p.at("allow"), "GET, HEAD");
  EXPECT_EQ(r.body.string_view(), "405 Method Not Allowed\n");
  EXPECT_EQ(p.at("content-length"), std::to_string(r.body.remaining()));
  EXPECT_TRUE(r.keep_alive);  // the body was skipped: framing is intact
}

TEST_F(StaticFileResponderTest, ErrorsHaveShortTextBodies) {
  struct Case {
    const char* target;
    HttpStatus status;
  };
  for (auto c :
       {Case{"/nope", HttpStatus::not_found}, Case{"/../x", HttpStatus::forbidden},
        Case{"/a%2fb", HttpStatus::bad_request}, Case{"/.hidden", HttpStatus::not_found}}) {
    auto r = respond(std::string("GET ") + c.target + " HTTP/1.1\r\nHost: h\r\n\r\n");
    EXPECT_EQ(r.status, c.status) << c.target;
    auto p = parse_head(r.head);
    EXPECT_EQ(p.at("content-type"), "text/plain; charset=utf-8");
    EXPECT_EQ(p.at("content-length"), std::to_string(r.body.remaining()));
    EXPECT_LT(r.body.remaining(), 64u);
    EXPECT_TRUE(r.keep_alive);
    auto head = respond(std::string("HEAD ") + c.target + " HTTP/1.1\r\nHost: h\r\n\r\n");
    EXPECT_EQ(head.status, c.status);
    EXPECT_FALSE(head.body.has_remaining());
  }
}

TEST_F(StaticFileResponderTest, DecodeErrorsCloseTheConnection) {
  auto r = respond("GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(10000, 'x') + "\r\n\r\n");
  EXPECT_EQ(r.status, HttpStatus::request_header_fields_too_large);
  auto p = parse_head(r.head);
  EXPECT_EQ(p.status_line, "HTTP/1.1 431 Request Header Fields Too Large");
  EXPECT_EQ(p.at("connection"), "close");
  EXPECT_FALSE(r.keep_alive);
  EXPECT_EQ(respond("GET / HTTP/1.1\r\n\r\n").status, HttpStatus::bad_request);
}

TEST_F(StaticFileResponderTest, PersistenceHeaders) {
  auto close11 = respond("GET /small.txt HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  EXPECT_FALSE(close11.keep_alive);
  EXPECT_EQ(parse_head(close11.head).at("connection"), "close");
  auto plain10 = respond("GET /small.txt HTTP/1.0\r\n\r\n");
  EXPECT_FALSE(plain10.keep_alive);
  EXPECT_EQ(parse_head(plain10.head).at("connection"), "close");
  auto ka10 = respond("GET /small.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_TRUE(ka10.keep_alive);
  EXPECT_EQ(parse_head(ka10.head).at("connection"), "keep-alive");
  EXPECT_EQ(parse_head(ka10.head).status_line, "HTTP/1.1 200 OK");
}

TEST_F(StaticFileResponderTest, FileShrunkBeforeTheReadIs500AndCloses) {
  auto opened = root_->open("small.txt");
  ASSERT_EQ(opened.status, HttpStatus::ok);
  ASSERT_EQ(::truncate((tree_ / "small.txt").c_str(), 2), 0);
  HttpRequestDecoder decoder;
  auto in = ByteBuffer::wrap(std::string_view("GET /small.txt HTTP/1.1\r\nHost: h\r\n\r\n"));
  ASSERT_EQ(decoder.decode(in), DecodeStatus::request);
  auto r = responder_->respond_with_file(decoder.request(), std::move(opened.file), now);
  EXPECT_EQ(r.status, HttpStatus::internal_server_error);
  EXPECT_FALSE(r.keep_alive);
}

}  // namespace
}  // namespace niox::http

namespace niox::http {
namespace {

TEST(BuiltInSite, IsServedWithTheRightTypes) {
  FileRoot root(NIOX_FILE_SERVER_SITE_DIR);
  StaticFileResponder responder(root);
  for (auto [target, type] : {std::pair{"/", "text/html; charset=utf-8"},
                              std::pair{"/style.css", "text/css; charset=utf-8"},
                              std::pair{"/hello.txt", "text/plain; charset=utf-8"}}) {
    HttpRequestDecoder decoder;
    auto req = std::string("GET ") + target + " HTTP/1.1\r\nHost: h\r\n\r\n";
    auto in = ByteBuffer::wrap(std::string_view(req));
    ASSERT_EQ(decoder.decode(in), DecodeStatus::request);
    auto r = responder.respond(decoder.request(), now);
    EXPECT_EQ(r.status, HttpStatus::ok) << target;
    EXPECT_EQ(parse_head(r.head).at("content-type"), type);
    EXPECT_TRUE(r.body.has_remaining());
  }
}

}  // namespace
}  // namespace niox::http
