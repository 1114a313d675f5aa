// HttpRequestDecoder — an incremental HTTP/1.1 request-head decoder (RFC 9112) for a server that
// serves GET and HEAD. Bytes arrive in arbitrary pieces: a request may be split anywhere and one
// piece may hold several pipelined requests. The decoder is a push parser like Netty's
// HttpRequestDecoder, but hands out one request at a time:
//
//   std::size_t used = 0;
//   while (true) {
//     auto st = decoder.decode(bytes.subspan(off), used);  off += used;
//     if (st == DecodeStatus::request)   respond(decoder.request());   // views valid until the next decode()
//     else if (st == DecodeStatus::error) { respond_error(decoder.error_status()); close(); break; }
//     else break;                                                       // need_more: all bytes consumed
//   }
//
// Memory.  The request head (request line, header fields, their CRLFs) is copied into one buffer
// that grows with the head: 1 KiB at its first byte, doubled as bytes arrive, never beyond
// HttpDecoderConfig::max_header_bytes. So a large limit costs nothing until a head that large
// arrives, and a connection that sent one byte holds 1 KiB whatever the limit. A buffer that
// grew is released when the next request begins (a keep-alive connection does not keep one
// large head's memory); a 1 KiB one is reused. Plus an index of at most max_headers (name,
// value) views, with room for 16 at first. A larger head is answered 431 (or 414 when the
// request line alone does not fit) as soon as the limit is crossed. Request bodies are never
// stored.
//
// Decided behaviour (each is the strict choice RFC 9112 permits; every error closes the
// connection because framing can no longer be trusted):
//   - Lines end in CRLF. A bare LF or bare CR is 400 (RFC 9112 §2.2 lets a recipient accept bare
//     LF; refusing it closes a request-smuggling door). Up to max_leading_empty_lines empty lines
//     before a request line are ignored (RFC 9112 §2.2).
//   - request-line = method SP request-target SP HTTP-version with single spaces (RFC 9112 §3);
//     the method must be a token, the target visible ASCII, the version "HTTP/d.d"
//     (case-sensitive, §2.3). HTTP/1.0 and 1.1 are served; another version is 505.
//   - Field lines: name is a token immediately followed by ':' (whitespace before the colon is 400,
//     §5.1); the value is trimmed of SP/HTAB and may hold VCHAR, obs-text, SP and HTAB only.
//     obs-fold (a line starting with SP/HTAB) is 400 (§5.2).
//   - HTTP/1.1 without exactly one Host field is 400 (§3.2).
//   - Content-Length (all values equal, §6.3) is accepted on any request and its body is skipped
//     unread, up to max_discarded_body bytes (else 413). GET and HEAD bodies have no meaning
//     (RFC 9110 §9.3.1-2), so this only keeps the connection's framing. Transfer-Encoding on a
//     request is 400: this server takes no request content, and refusing TE (with or without
//     Content-Length) avoids the ambiguities of §6.1/§6.3.
//   - Persistence (§9.3): HTTP/1.1 keeps the connection open unless a Connection field has the
//     "close" option; HTTP/1.0 closes unless it has "keep-alive".
// Method checks (405) belong to the responder: the decoder accepts any token method.
#pragma once

#include "http_status.hpp"

#include <niox/buffer/byte_buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace niox::http {

enum class HttpVersion : std::uint8_t { http_1_0, http_1_1 };

// One field line; both views point into the decoder's head buffer.
struct HttpHeader {
  std::string_view name;
  std::string_view value;
};

// ASCII case-insensitive equality, as field names and tokens compare (RFC 9110 §5.1). Inline:
// most calls are a lookup among names of other lengths, decided by the first comparison.
inline bool equals_ignore_case(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto x = static_cast<unsigned char>(a[i]);
    auto y = static_cast<unsigned char>(b[i]);
    if (x >= 'A' && x <= 'Z') x = static_cast<unsigned char>(x + 32);
    if (y >= 'A' && y <= 'Z') y = static_cast<unsigned char>(y + 32);
    if (x != y) {
      return false;
    }
  }
  return true;
}

// A decoded request head. Every view points into the decoder that produced it and is valid until
// that decoder's next decode() or reset().
class HttpRequest {
 public:
  std::string_view method() const noexcept { return method_; }
  std::string_view target() const noexcept { return target_; }
  HttpVersion version() const noexcept { return version_; }
  std::span<const HttpHeader> headers() const noexcept { return headers_; }
  // The value of the first field named `name` (case-insensitive), if any.
  std::optional<std::string_view> header(std::string_view name) const noexcept;
  // Whether the client asked for the connection to stay open after the response (RFC 9112 §9.3).
  bool keep_alive() const noexcept { return keep_alive_; }
  // Declared body length (skipped by the decoder), 0 when none.
  std::uint64_t content_length() const noexcept { return content_length_; }
  bool is_get() const noexcept { return method_ == "GET"; }
  bool is_head() const noexcept { return method_ == "HEAD"; }

 private:
  friend class HttpRequestDecoder;
  std::string_view method_;
  std::string_view target_;
  HttpVersion version_ = HttpVersion::http_1_1;
  std::vector<HttpHeader> headers_;
  bool keep_alive_ = true;
  std::uint64_t content_length_ = 0;
};

struct HttpDecoderConfig {
  // Request line + field lines + CRLFs. Bigger heads are 431 (414 if the request line is cut).
  std::size_t max_header_bytes = 8192;
  // Field lines per request; more is 431.
  std::size_t max_headers = 64;
  // Largest Content-Length skipped on a request; more is 413.
  std::uint64_t max_discarded_body = 64 * 1024;
  // Empty lines tolerated before a request line; more is 400.
  std::size_t max_leading_empty_lines = 8;
};

enum class DecodeStatus : std::uint8_t {
  need_more,  // every byte given was consumed; feed more
  request,    // request() holds a complete head; bytes after it were not consumed
  error,      // error_status() says why; nothing more will be decoded on this connection
};

class HttpRequestDecoder {
 public:
  explicit HttpRequestDecoder(HttpDecoderConfig config = {});
  // One connection's state: moved with it, never shared.
  HttpRequestDecoder(const HttpRequestDecoder&) = delete;
  HttpRequestDecoder& operator=(const HttpRequestDecoder&) = delete;
  HttpRequestDecoder(HttpRequestDecoder&&) noexcept = default;
  HttpRequestDecoder& operator=(HttpRequestDecoder&&) noexcept = default;

  // Consumes bytes from `in`, sets `consumed` to how many, and stops at the end of one request
  // head, at an error, or when `in` is exhausted. A request's skipped body is consumed by the
  // following calls, before the next head. `in` is only read during the call.
  DecodeStatus decode(std::span<const std::byte> in, std::size_t& consumed);
  // The same over in's [position, limit); advances in.position() by what was consumed.
  DecodeStatus decode(ByteBuffer& in);

  // The last request decoded; valid after decode() returned DecodeStatus::request, until the
  // next decode() or reset().
  const HttpRequest& request() const noexcept { return request_; }

  // Why decoding stopped: 400, 413, 414, 431 or 505. Meaningful after DecodeStatus::error.
  HttpStatus error_status() const noexcept { return error_status_; }
  // A short human explanation of the error, for logs (never sent to the client).
  std::string_view error_reason() const noexcept { return error_reason_; }

  // True when no part of a request (head or skipped body) is pending: an end of stream here is
  // a clean close, elsewhere a truncated request.
  bool is_idle() const noexcept;

  // Forgets everything, including a sticky error, and gives the head buffer back.
  void reset() noexcept;

  const HttpDecoderConfig& config() const noexcept { return config_; }

  // Bytes the head buffer holds now: 0 before a request's first byte, so between keep-alive
  // requests (the decode() after a request gives the head buffer back to the thread's pool).
  std::size_t buffer_capacity() const noexcept { return head_capacity_; }

  // The head buffer's size at a request's first byte.
  static constexpr std::size_t initial_buffer_capacity = 1024;

 private:
  enum class State : std::uint8_t { head, request_ready, skip_body, error };

  DecodeStatus fail(HttpStatus status, std::string_view reason) noexcept;
  DecodeStatus parse_head();
  bool parse_request_line(std::string_view line);
  bool parse_field_semantics();
  // Doubles the head buffer (up to max_header_bytes), keeping its bytes.
  void grow_head();
  // Gives the head buffer and the header list back; only between requests.
  void release_head() noexcept;

  HttpDecoderConfig config_;
  State state_ = State::head;
  ByteBuffer head_buffer_;  // head_capacity_ bytes from the pool, from a request's first byte
  char* head() noexcept { return reinterpret_cast<char*>(head_buffer_.writable_bytes().data()); }
  std::size_t head_capacity_ = 0;
  std::size_t head_len_ = 0;
  std::size_t line_start_ = 0;      // offset in head_ of the line being read
  bool request_line_done_ = false;  // the first LF of the head has been seen
  std::size_t leading_empty_lines_ = 0;
  bool leading_cr_ = false;  // a CR of an ignored empty line is pending its LF
  std::uint64_t body_left_ = 0;
  HttpRequest request_;
  HttpStatus error_status_ = HttpStatus::bad_request;
  std::string_view error_reason_;
};

}  // namespace niox::http
