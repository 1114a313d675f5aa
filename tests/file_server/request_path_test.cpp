#include "request_path.hpp"

#include "test_printers.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

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

TEST(RequestPath, TrailingDotSegmentsNameADirectory) {
  // RFC 3986 §5.2.4: "/a/." and "/a/b/.." resolve to "/a/", with the slash.
  for (const char* t : {"/a/", "/a/.", "/a/./", "/a/b/..", "/a/%2e", "/a/%2E%2e", "/a//", "/a/?q=x",
                        "/a/.#f", "/"}) {
    EXPECT_TRUE(decode_request_path(t).trailing_slash) << t;
  }
  for (const char* t : {"/a", "/a/.x", "/a/..b", "/a?/", "/a#/", "/a/b/../c"}) {
    EXPECT_FALSE(decode_request_path(t).trailing_slash) << t;
  }
}

TEST(RequestPath, ClimbingAboveTheRootIsForbidden) {
  for (const char* t : {"/..", "/../etc/passwd", "/a/../../etc/passwd", "/%2e%2e/etc/passwd",
                        "/%2E%2E/x", "/.%2e/x", "/a/b/../../../x", "/./../x", "//../x"}) {
    EXPECT_EQ(status(t), HttpStatus::forbidden) << t;
  }
}

TEST(RequestPath, EncodedSeparatorsNulAndControlsAreBadRequests) {
  for (const char* t :
       {"/a%2fb", "/a%2Fb", "/..%2f..%2fetc/passwd", "/a%5cb", "/a%5C..%5Cb", "/a\\b",
        "/..\\..\\etc", "/a%00.html", "/a%0d%0aSet-Cookie:x", "/a%7f", "/a%1b"}) {
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

TEST(RequestPath, DirectoryRedirectLocationIsTheNormalisedPathInsideTheRoot) {
  auto location = [](std::string_view target) {
    auto path = decode_request_path(target);
    EXPECT_EQ(path.status, HttpStatus::ok) << target;
    return directory_redirect_location(path, target);
  };
  // Built from what the path resolved to, never from the raw target: "//evil.com/../sub" is
  // "sub" inside the root, and a Location of "//evil.com/../sub/" would name another host.
  EXPECT_EQ(location("//evil.com/../sub"), "/sub/");
  EXPECT_EQ(location("///evil.com/../sub"), "/sub/");
  EXPECT_EQ(location("//sub"), "/sub/");
  EXPECT_EQ(location("//evil.com/%2e%2e/sub"), "/sub/");
  EXPECT_EQ(location("http://h//evil.com/../sub"), "/sub/");
  EXPECT_EQ(location("/sub"), "/sub/");
  EXPECT_EQ(location("/a//b/./c/../d?x=1#frag"), "/a/b/d/?x=1");
  EXPECT_EQ(location("/d%69r"), "/dir/");    // unreserved bytes need no escape
  EXPECT_EQ(location("/a%20b"), "/a%20b/");  // others are escaped again
  EXPECT_EQ(location("/caf%C3%A9"), "/caf%C3%A9/");
  EXPECT_EQ(location("/q%3Fh%23"), "/q%3Fh%23/");  // '?' and '#' in a name stay in the path
  EXPECT_EQ(location("/100%25"), "/100%25/");
  EXPECT_EQ(location("/a:b@c!$&'()*+,;=-._~"), "/a:b@c!$&'()*+,;=-._~/");
  for (const char* t : {"//evil.com/../sub", "//%2fevil.com/../sub", "/./evil.com/../sub", "//x",
                        "/%5c/evil.com"}) {
    auto path = decode_request_path(t);
    if (path.status != HttpStatus::ok) {
      continue;  // refused before any redirect
    }
    auto l = directory_redirect_location(path, t);
    EXPECT_FALSE(l.starts_with("//")) << t << " -> " << l;
    EXPECT_FALSE(l.starts_with("/\\")) << t << " -> " << l;
  }
}

// decode_request_path takes a short cut for plain paths: every target gives what the general
// walk gives, with every limit and option.
TEST(RequestPath, PlainPathShortCutAgreesWithTheWalk) {
  constexpr std::string_view alphabet = "//..ab%2eF?#\\\x01\x7f\xc3";
  std::mt19937 rng(16);
  std::vector<std::string> targets{"/",
                                   "//",
                                   "/a/",
                                   "/.a",
                                   "/a/.",
                                   "/a/..",
                                   "/a..b/c.",
                                   "/%41",
                                   "/a?b",
                                   "a/b",
                                   "",
                                   std::string(1, '/') + std::string(255, 'n'),
                                   std::string(1, '/') + std::string(256, 'n'),
                                   "/" + std::string(200, 'n') + "/" + std::string(60, 'm')};
  for (int i = 0; i < 20000; ++i) {
    std::string t(1 + rng() % 12, ' ');
    for (char& c : t) c = alphabet[rng() % alphabet.size()];
    if (rng() % 4 != 0) t[0] = '/';
    targets.push_back(std::move(t));
  }
  for (RequestPathOptions opt : {RequestPathOptions{}, RequestPathOptions{.max_path = 5},
                                 RequestPathOptions{.allow_hidden = true}}) {
    for (const std::string& t : targets) {
      RequestPath fast = decode_request_path(t, opt);
      RequestPath walk = decode_request_path_walk(t, opt);
      ASSERT_EQ(fast.status, walk.status) << t << " max_path " << opt.max_path;
      ASSERT_EQ(fast.relative, walk.relative) << t;
      ASSERT_EQ(fast.trailing_slash, walk.trailing_slash) << t;
    }
  }
}

}  // namespace
}  // namespace niox::http
