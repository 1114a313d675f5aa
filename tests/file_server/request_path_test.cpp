#include "request_path.hpp"

#include "test_printers.hpp"

#include <gtest/gtest.h>

#include <string>

namespace niox::http {
namespace {

std::string ok(std::string_view target, RequestPathOptions opt = {}) {
  auto r = decode_request_path(target, opt);
  EXPECT_EQ(r.status, HttpStatus::ok) << target;
  return r.relative;
}

HttpStatus status(std::string_view target, RequestPathOptions opt = {}) {
  auto r = decode_request_path(target, opt);
  if (r.status != HttpStatus::ok) {
    EXPECT_TRUE(r.relative.empty()) << target;
  }
  return r.status;
}

TEST(RequestPath, PlainPaths) {
  EXPECT_EQ(ok("/"), "");
  EXPECT_EQ(ok("/index.html"), "index.html");
  EXPECT_EQ(ok("/a/b/c.txt"), "a/b/c.txt");
  EXPECT_TRUE(decode_request_path("/docs/").trailing_slash);
  EXPECT_FALSE(decode_request_path("/docs").trailing_slash);
}

TEST(RequestPath, QueryAndFragmentAreStripped) {
  EXPECT_EQ(ok("/a.html?x=1&y=/../../etc"), "a.html");
  EXPECT_EQ(ok("/a.html#frag"), "a.html");
  EXPECT_EQ(ok("/?"), "");
}

TEST(RequestPath, PercentDecoding) {
  EXPECT_EQ(ok("/a%20b.txt"), "a b.txt");
  EXPECT_EQ(ok("/%41%62c"), "Abc");
  EXPECT_EQ(ok("/caf%C3%A9"), "caf\xC3\xA9");
  EXPECT_EQ(ok("/100%25"), "100%");
}

TEST(RequestPath, EmptyAndDotSegmentsCollapse) {
  EXPECT_EQ(ok("//a///b//"), "a/b");
  EXPECT_EQ(ok("/./a/./b/."), "a/b");
  EXPECT_EQ(ok("/a/b/../c"), "a/c");
  EXPECT_EQ(ok("/a/%2e%2e/c"), "c");
  EXPECT_EQ(ok("/a/.%2E/c"), "c");
  EXPECT_EQ(ok("/a/.."), "");
  RequestPathOptions allow;
  allow.allow_hidden = true;
  EXPECT_EQ(ok("/a/...", allow), "a/...");  // a name, not a dot-segment
}

TEST(RequestPath, ClimbingAboveTheRootIsForbidden) {
  for (const char* t : {"/..", "/../etc/passwd", "/a/../../etc/passwd", "/%2e%2e/etc/passwd",
                        "/%2E%2E/x", "/.%2e/x", "/a/b/../../../x", "/./../x", "//../x"}) {
    EXPECT_EQ(status(t), HttpStatus::forbidden) << t;
  }
}

TEST(RequestPath, EncodedSeparatorsNulAndControlsAreBadRequests) {
  for (const char* t : {"/a%2fb", "/a%2Fb", "/..%2f..%2fetc/passwd", "/a%5cb", "/a%5C..%5Cb",
                        "/a\\b", "/..\\..\\etc", "/a%00.html", "/a%0d%0aSet-Cookie:x", "/a%7f",
                        "/a%1b"}) {
    EXPECT_EQ(status(t), HttpStatus::bad_request) << t;
  }
}

TEST(RequestPath, InvalidEscapesAreBadRequests) {
  for (const char* t : {"/a%", "/a%4", "/a%g0", "/a%0g", "/%%41", "/a%-1"}) {
    EXPECT_EQ(status(t), HttpStatus::bad_request) << t;
  }
}

TEST(RequestPath, OtherFormsOfTarget) {
  EXPECT_EQ(ok("http://example.com/a/b?c"), "a/b");
  EXPECT_EQ(ok("HTTPS://example.com"), "");
  EXPECT_EQ(ok("http://example.com?x"), "");
  EXPECT_EQ(status("*"), HttpStatus::bad_request);
  EXPECT_EQ(status("example.com:80"), HttpStatus::bad_request);
  EXPECT_EQ(status("a/b"), HttpStatus::bad_request);
  EXPECT_EQ(status(""), HttpStatus::bad_request);
  EXPECT_EQ(status("ftp://h/a"), HttpStatus::bad_request);
}

TEST(RequestPath, HiddenNamesAreNotFoundUnlessAllowed) {
  EXPECT_EQ(status("/.git/config"), HttpStatus::not_found);
  EXPECT_EQ(status("/a/.env"), HttpStatus::not_found);
  EXPECT_EQ(status("/%2egit/config"), HttpStatus::not_found);
  EXPECT_EQ(ok("/.git/../a"), "a");  // removed before anything is opened
  RequestPathOptions allow;
  allow.allow_hidden = true;
  EXPECT_EQ(ok("/.well-known/x", allow), ".well-known/x");
}

TEST(RequestPath, LengthLimits) {
  RequestPathOptions opt;
  opt.max_path = 64;
  EXPECT_EQ(ok("/" + std::string(64, 'a'), opt).size(), 64u);
  EXPECT_EQ(status("/" + std::string(65, 'a'), opt), HttpStatus::uri_too_long);
  EXPECT_EQ(status("/" + std::string(30, 'a') + "/" + std::string(40, 'b'), opt),
            HttpStatus::uri_too_long);
  EXPECT_EQ(status("/" + std::string(256, 'n')), HttpStatus::not_found);  // > NAME_MAX
  EXPECT_EQ(ok("/" + std::string(255, 'n')).size(), 255u);
  // A very long path that climbs back down stays bounded and is judged on its result.
  std::string deep;
  for (int i = 0; i < 2000; ++i) deep += "/x/..";
  EXPECT_EQ(ok(deep + "/f"), "f");
  EXPECT_EQ(status(std::string(100000, '/') + std::string(100000, 'a')), HttpStatus::uri_too_long);
}

}  // namespace
}  // namespace niox::http
