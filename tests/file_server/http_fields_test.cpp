#include "http_fields.hpp"

#include "test_printers.hpp"

#include <gtest/gtest.h>

namespace niox::http {
namespace {

TEST(ContentType, ByExtensionCaseInsensitive) {
  EXPECT_EQ(content_type_for("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(content_type_for("a/b/STYLE.CSS"), "text/css; charset=utf-8");
  EXPECT_EQ(content_type_for("app.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(content_type_for("d.json"), "application/json");
  EXPECT_EQ(content_type_for("r.txt"), "text/plain; charset=utf-8");
  EXPECT_EQ(content_type_for("p.png"), "image/png");
  EXPECT_EQ(content_type_for("p.jpg"), "image/jpeg");
  EXPECT_EQ(content_type_for("p.jpeg"), "image/jpeg");
  EXPECT_EQ(content_type_for("p.gif"), "image/gif");
  EXPECT_EQ(content_type_for("p.svg"), "image/svg+xml");
  EXPECT_EQ(content_type_for("favicon.ico"), "image/vnd.microsoft.icon");
  EXPECT_EQ(content_type_for("m.wasm"), "application/wasm");
  EXPECT_EQ(content_type_for("doc.pdf"), "application/pdf");
  EXPECT_EQ(content_type_for("v.mp4"), "video/mp4");
  EXPECT_EQ(content_type_for("f.woff2"), "font/woff2");
}

TEST(ContentType, UnknownOrMissingExtensionIsOctetStream) {
  EXPECT_EQ(content_type_for("archive.xyz"), "application/octet-stream");
  EXPECT_EQ(content_type_for("README"), "application/octet-stream");
  EXPECT_EQ(content_type_for(".html"), "application/octet-stream");  // a hidden name, no extension
  EXPECT_EQ(content_type_for("dir.html/file"), "application/octet-stream");
  EXPECT_EQ(content_type_for("file."), "application/octet-stream");
  // Near misses of a known extension: longer, shorter, or the same bytes with a NUL after them.
  EXPECT_EQ(content_type_for("p.htmlx"), "application/octet-stream");
  EXPECT_EQ(content_type_for("p.woff2woff2"), "application/octet-stream");
  EXPECT_EQ(content_type_for("p.ht"), "application/octet-stream");
  EXPECT_EQ(content_type_for(std::string_view("p.gz\0", 5)), "application/octet-stream");
  EXPECT_EQ(content_type_for("p.WoFf2"), "font/woff2");
}

TEST(HttpDate, FormatsImfFixdate) {
  // RFC 9110 §5.6.7's own example.
  EXPECT_EQ(format_http_date(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(format_http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
  EXPECT_EQ(format_http_date(951782400), "Tue, 29 Feb 2000 00:00:00 GMT");
  EXPECT_EQ(format_http_date(-1), "Wed, 31 Dec 1969 23:59:59 GMT");
  EXPECT_EQ(format_http_date(4102444800), "Fri, 01 Jan 2100 00:00:00 GMT");
  EXPECT_EQ(format_http_date(std::numeric_limits<std::time_t>::max()).size(), http_date_length);
}

TEST(HttpDate, ParsesTheThreeFormats) {
  const std::time_t now = 1795000000;  // 2026
  EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT", now), 784111777);
  EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT", now), 784111777);
  EXPECT_EQ(parse_http_date("Sun Nov  6 08:49:37 1994", now), 784111777);
  EXPECT_EQ(parse_http_date("Thu Feb 29 00:00:00 2024", now), 1709164800);
}

TEST(HttpDate, RoundTripsEveryDayOfSomeYears) {
  for (std::time_t t = 946684800 - 86400 * 400; t < 946684800 + 86400 * 800; t += 86400 + 3661) {
    EXPECT_EQ(parse_http_date(format_http_date(t)), t) << format_http_date(t);
  }
}

TEST(HttpDate, Rfc850TwoDigitYearsFollowTheFiftyYearRule) {
  const std::time_t in_2026 = 1780000000;
  // 76 -> 2076 is exactly 50 years ahead: allowed; 77 -> 2077 is more, so 1977.
  EXPECT_EQ(
      format_http_date(*parse_http_date("Monday, 01-Jan-76 00:00:00 GMT", in_2026)).substr(12, 4),
      "2076");
  EXPECT_EQ(
      format_http_date(*parse_http_date("Monday, 01-Jan-77 00:00:00 GMT", in_2026)).substr(12, 4),
      "1977");
  EXPECT_EQ(
      format_http_date(*parse_http_date("Monday, 01-Jan-25 00:00:00 GMT", in_2026)).substr(12, 4),
      "2025");
}

TEST(HttpDate, RejectsMalformedAndImpossibleDates) {
  for (const char* bad :
       {"", "yesterday", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, 06 nov 1994 08:49:37 GMT", "Sun, 30 Feb 2024 00:00:00 GMT",
        "Sun, 29 Feb 2023 00:00:00 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:00 GMT", "Xyz, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT ", " Sun, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:3x GMT", "Sunday, 06-Nov-1994 08:49:37 GMT",
        "Sun Nov 6 08:49:37 1994", "Sun Nov  6 08:49:37 94", "Sun, 00 Nov 1994 08:49:37 GMT"}) {
    EXPECT_FALSE(parse_http_date(bad)) << bad;
  }
}

void expect_range(std::string_view value, std::uint64_t size, ByteRange::Kind kind,
                  std::uint64_t first = 0, std::uint64_t last = 0) {
  auto r = parse_range(value, size);
  EXPECT_EQ(r.kind, kind) << value;
  if (kind == ByteRange::Kind::satisfiable) {
    EXPECT_EQ(r.first, first) << value;
    EXPECT_EQ(r.last, last) << value;
  }
}

TEST(Range, SingleRangeForms) {
  using K = ByteRange::Kind;
  expect_range("bytes=0-99", 1000, K::satisfiable, 0, 99);
  expect_range("bytes=500-", 1000, K::satisfiable, 500, 999);
  expect_range("bytes=-100", 1000, K::satisfiable, 900, 999);
  expect_range("bytes=-5000", 1000, K::satisfiable, 0, 999);
  expect_range("bytes=990-5000", 1000, K::satisfiable, 990, 999);
  expect_range("bytes=999-999", 1000, K::satisfiable, 999, 999);
  expect_range("Bytes= 1-2 ", 1000, K::satisfiable, 1, 2);
  EXPECT_EQ(parse_range("bytes=10-19", 100).length(), 10u);
}

TEST(Range, UnsatisfiableRanges) {
  using K = ByteRange::Kind;
  expect_range("bytes=1000-", 1000, K::unsatisfiable);
  expect_range("bytes=1000-2000", 1000, K::unsatisfiable);
  expect_range("bytes=-0", 1000, K::unsatisfiable);
}

TEST(Range, IgnoredRangesServeTheWholeFile) {
  using K = ByteRange::Kind;
  for (const char* v :
       {"bytes=0-1,5-9", "bytes=5-1", "items=0-1", "bytes=", "bytes=-", "bytes=a-b", "bytes 0-1",
        "bytes=0-1-2", "bytes=+1-2", "bytes=1--2", "bytes=99999999999999999999-", "bytes=0x10-"}) {
    expect_range(v, 1000, K::none);
  }
  expect_range("bytes=0-0", 0, K::none);
  expect_range("bytes=-5", 0, K::none);
}

}  // namespace
}  // namespace niox::http
