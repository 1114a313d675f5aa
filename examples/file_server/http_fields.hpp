// The field formats a static file server reads and writes: media types by file extension,
// HTTP-dates (RFC 9110 §5.6.7) and byte ranges (RFC 9110 §14).
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

namespace niox::http {

// The Content-Type for a path, from the extension of its last segment (case-insensitive):
// html, css, js, json, txt, png, jpg, gif, svg, ico, wasm, pdf, mp4, woff2 and a few more; text
// types carry "; charset=utf-8". Anything else is application/octet-stream, which tells a
// browser not to render or sniff it.
std::string_view content_type_for(std::string_view path) noexcept;

// An IMF-fixdate is always exactly this long: "Sun, 06 Nov 1994 08:49:37 GMT".
inline constexpr std::size_t http_date_length = 29;

// Formats `t` (seconds since the epoch, UTC) as an IMF-fixdate (RFC 9110 §5.6.7) into `out`,
// which must hold http_date_length characters; returns the view over them. Years outside
// 0..9999 are clamped, so the length never changes.
std::string_view format_http_date(std::time_t t, char (&out)[http_date_length]) noexcept;
std::string format_http_date(std::time_t t);

// Parses an HTTP-date in any of the three forms a recipient MUST accept (RFC 9110 §5.6.7):
//   IMF-fixdate  "Sun, 06 Nov 1994 08:49:37 GMT"
//   RFC 850      "Sunday, 06-Nov-94 08:49:37 GMT"
//   asctime      "Sun Nov  6 08:49:37 1994"
// The day name is checked for form, not for agreement with the date (senders get it wrong and
// nothing depends on it). A two-digit RFC 850 year more than 50 years after `now`'s year is read
// as the most recent past year with those digits (RFC 9110 §5.6.7). Returns nullopt for anything
// else, including impossible dates such as Feb 30 or hour 24.
std::optional<std::time_t> parse_http_date(std::string_view s,
                                           std::time_t now = std::time(nullptr));

// The result of applying a Range field to a representation of `size` bytes (RFC 9110 §14.2).
struct ByteRange {
  enum class Kind : std::uint8_t {
    none,           // no usable range: serve the whole representation with 200
    satisfiable,    // serve [first, last] with 206 and Content-Range: bytes first-last/size
    unsatisfiable,  // 416 with Content-Range: bytes */size
  };
  Kind kind = Kind::none;
  std::uint64_t first = 0;  // inclusive
  std::uint64_t last = 0;   // inclusive
  std::uint64_t length() const noexcept { return last - first + 1; }
};

// Interprets a Range field value for a representation of `size` bytes. Decided behaviour:
//   "bytes=a-b"  -> [a, min(b, size-1)]; a >= size is unsatisfiable; b < a is invalid (none)
//   "bytes=a-"   -> [a, size-1]; a >= size is unsatisfiable
//   "bytes=-n"   -> the last min(n, size) bytes; n == 0 is unsatisfiable
//   several ranges ("bytes=0-1,5-9") -> none: the whole file with 200. RFC 9110 §14.2 lets a
//     server ignore Range, and multipart/byteranges buys little for a static server.
//   another unit, bad syntax, numbers beyond 2^63 -> none (RFC 9110 §14.2: MAY ignore)
//   size == 0 -> none: an empty file is served whole rather than as an odd 206/416.
ByteRange parse_range(std::string_view value, std::uint64_t size) noexcept;

}  // namespace niox::http
