#include "http_request_decoder.hpp"

#include <niox/buffer/buffer_pool.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <charconv>

namespace niox::http {
namespace {

// The header index's first capacity (see parse_head).
constexpr std::size_t usual_header_count = 16;

// RFC 9110 §5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." /
//                          "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
constexpr auto tchar_table = [] {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = true;
  return t;
}();

constexpr bool is_tchar(unsigned char c) noexcept { return tchar_table[c]; }

bool is_token(std::string_view s) noexcept {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return is_tchar(static_cast<unsigned char>(c)); });
}

// RFC 9110 §5.5: field-value characters are VCHAR, obs-text, SP and HTAB.
bool is_field_value(std::string_view s) noexcept {
  return std::all_of(s.begin(), s.end(), [](char ch) {
    auto c = static_cast<unsigned char>(ch);
    return c == '\t' || (c >= 0x20 && c != 0x7f);
  });
}

std::string_view trim_ows(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// Calls f(element) for each non-empty element of a comma-separated list (RFC 9110 §5.6.1).
template <class F>
void for_each_list_element(std::string_view list, F&& f) {
  while (true) {
    auto comma = list.find(',');
    auto element = trim_ows(list.substr(0, comma));
    if (!element.empty()) {
      f(element);
    }
    if (comma == std::string_view::npos) {
      return;
    }
    list.remove_prefix(comma + 1);
  }
}

}  // namespace

std::optional<std::string_view> HttpRequest::header(std::string_view name) const noexcept {
  for (const auto& h : headers_) {
    if (equals_ignore_case(h.name, name)) {
      return h.value;
    }
  }
  return std::nullopt;
}

HttpRequestDecoder::HttpRequestDecoder(HttpDecoderConfig config) : config_(config) {
  // A head needs at least "GET / HTTP/1.0\r\n\r\n"; a smaller limit could never decode anything.
  config_.max_header_bytes = std::max<std::size_t>(config_.max_header_bytes, 32);
}

DecodeStatus HttpRequestDecoder::fail(HttpStatus status, std::string_view reason) noexcept {
  state_ = State::error;
  error_status_ = status;
  error_reason_ = reason;
  return DecodeStatus::error;
}

bool HttpRequestDecoder::is_idle() const noexcept {
  switch (state_) {
    case State::head: return head_len_ == 0 && !leading_cr_;
    case State::request_ready: return body_left_ == 0;
    case State::skip_body:
    case State::error: return false;
  }
  return false;
}

void HttpRequestDecoder::grow_head() {
  const std::size_t capacity = head_capacity_ == 0
                                   ? std::min(initial_buffer_capacity, config_.max_header_bytes)
                                   : std::min(head_capacity_ * 2, config_.max_header_bytes);
  // From the thread's pool: no malloc once warm, and back to the pool between requests.
  ByteBuffer bigger = BufferPool::for_this_thread().allocate(capacity);  // not zero-filled
  if (head_len_ > 0) {
    std::memcpy(bigger.writable_bytes().data(), head(), head_len_);
  }
  head_buffer_ = std::move(bigger);
  head_capacity_ = capacity;
}

void HttpRequestDecoder::release_head() noexcept {
  head_buffer_ = ByteBuffer();
  head_capacity_ = 0;
  // Not `= {}` (the initializer-list assignment keeps the capacity).
  std::vector<HttpHeader>().swap(request_.headers_);
}

void HttpRequestDecoder::reset() noexcept {
  release_head();
  state_ = State::head;
  head_len_ = 0;
  line_start_ = 0;
  request_line_done_ = false;
  leading_empty_lines_ = 0;
  leading_cr_ = false;
  body_left_ = 0;
  request_.method_ = request_.target_ = {};
  error_status_ = HttpStatus::bad_request;
  error_reason_ = {};
}

DecodeStatus HttpRequestDecoder::decode(ByteBuffer& in) {
  std::size_t consumed = 0;
  auto status = decode(in.bytes(), consumed);
  in.position(in.position() + consumed);
  return status;
}

DecodeStatus HttpRequestDecoder::decode(std::span<const std::byte> in, std::size_t& consumed) {
  consumed = 0;
  if (state_ == State::error) {
    return DecodeStatus::error;
  }
  if (state_ == State::request_ready) {
    // The caller is done with the previous request: its views may now be overwritten.
    head_len_ = 0;
    release_head();
    line_start_ = 0;
    request_line_done_ = false;
    leading_empty_lines_ = 0;
    state_ = body_left_ > 0 ? State::skip_body : State::head;
  }
  const auto* p = reinterpret_cast<const char*>(in.data());
  const std::size_t n = in.size();
  if (state_ == State::skip_body) {
    auto k = static_cast<std::size_t>(std::min<std::uint64_t>(body_left_, n));
    consumed += k;
    body_left_ -= k;
    if (body_left_ > 0) {
      return DecodeStatus::need_more;
    }
    state_ = State::head;
  }
  while (consumed < n) {
    const char c = p[consumed];
    if (head_len_ == 0) {
      // RFC 9112 §2.2: a server SHOULD ignore at least one empty line before the request-line
      // (clients once sent an extra CRLF after a POST body).
      if (leading_cr_) {
        if (c != '\n') {
          return fail(HttpStatus::bad_request, "bare CR before the request line");
        }
        leading_cr_ = false;
        ++consumed;
        if (++leading_empty_lines_ > config_.max_leading_empty_lines) {
          return fail(HttpStatus::bad_request, "too many empty lines before the request line");
        }
        continue;
      }
      if (c == '\r') {
        leading_cr_ = true;
        ++consumed;
        continue;
      }
    }
    if (head_len_ == config_.max_header_bytes) {
      return request_line_done_
                 ? fail(HttpStatus::request_header_fields_too_large, "request head too large")
                 : fail(HttpStatus::uri_too_long, "request line too long");
    }
    if (head_len_ == head_capacity_) {
      grow_head();  // below the limit: room for at least one more byte
    }
    // Copy up to and including the next LF (or all that fits) in one go, then check the CRs in
    // that run: a CR is allowed only right before the LF, or as the run's last byte when its
    // LF has not arrived yet (or did not fit yet).
    const char* run = p + consumed;
    const std::size_t avail = std::min(n - consumed, head_capacity_ - head_len_);
    const auto* lf = static_cast<const char*>(std::memchr(run, '\n', avail));
    const std::size_t len = lf != nullptr ? static_cast<std::size_t>(lf - run) + 1 : avail;
    if (head_len_ > 0 && head()[head_len_ - 1] == '\r' && run[0] != '\n') {
      return fail(HttpStatus::bad_request, "bare CR in the request head");
    }
    if (const auto* cr = static_cast<const char*>(std::memchr(run, '\r', len)); cr != nullptr) {
      const auto at = static_cast<std::size_t>(cr - run);
      if (lf != nullptr ? at + 2 != len : at + 1 != len) {
        return fail(HttpStatus::bad_request, "bare CR in the request head");
      }
    }
    std::memcpy(head() + head_len_, run, len);
    head_len_ += len;
    consumed += len;
    if (lf != nullptr) {
      if (head_len_ < 2 || head()[head_len_ - 2] != '\r') {
        return fail(HttpStatus::bad_request, "bare LF in the request head");
      }
      const bool empty_line = head_len_ - 2 == line_start_;
      request_line_done_ = true;
      if (empty_line) {
        return parse_head();
      }
      line_start_ = head_len_;
    }
  }
  return DecodeStatus::need_more;
}

DecodeStatus HttpRequestDecoder::parse_head() {
  // Without the CRLF of the final empty line, every line (request line included) ends in CRLF.
  const std::string_view head(this->head(), head_len_ - 2);
  auto eol = head.find("\r\n");
  if (!parse_request_line(head.substr(0, eol))) {
    return DecodeStatus::error;
  }
  auto& headers = request_.headers_;
  headers.clear();
  if (headers.capacity() == 0) {
    // Room for the fields of a usual request (curl sends 3, a browser 10 to 20), grown on
    // demand up to max_headers. Not max_headers at once: 64 entries are 2 KiB, a size glibc
    // serves from neither its per-thread cache nor without first sorting its small free chunks,
    // and this runs for every request.
    headers.reserve(std::min<std::size_t>(config_.max_headers, usual_header_count));
  }
  std::size_t pos = eol + 2;
  while (pos < head.size()) {
    auto end = head.find("\r\n", pos);
    auto line = head.substr(pos, end - pos);
    pos = end + 2;
    if (line.front() == ' ' || line.front() == '\t') {
      // RFC 9112 §5.2: obs-fold; a server MAY reject it with 400, and we do.
      fail(HttpStatus::bad_request, "obsolete line folding");
      return DecodeStatus::error;
    }
    auto colon = line.find(':');
    if (colon == std::string_view::npos) {
      return fail(HttpStatus::bad_request, "field line without ':'");
    }
    auto name = line.substr(0, colon);
    if (!is_token(name)) {
      // Also catches whitespace before the colon, which RFC 9112 §5.1 says MUST be a 400.
      return fail(HttpStatus::bad_request, "invalid field name");
    }
    auto value = trim_ows(line.substr(colon + 1));
    if (!is_field_value(value)) {
      return fail(HttpStatus::bad_request, "invalid character in field value");
    }
    if (headers.size() == config_.max_headers) {
      return fail(HttpStatus::request_header_fields_too_large, "too many header fields");
    }
    headers.push_back({name, value});
  }
  if (!parse_field_semantics()) {
    return DecodeStatus::error;
  }
  body_left_ = request_.content_length_;
  state_ = State::request_ready;
  return DecodeStatus::request;
}

bool HttpRequestDecoder::parse_request_line(std::string_view line) {
  auto sp1 = line.find(' ');
  auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    fail(HttpStatus::bad_request, "request line is not 'method SP target SP version'");
    return false;
  }
  auto method = line.substr(0, sp1);
  auto target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  auto version = line.substr(sp2 + 1);
  if (!is_token(method)) {
    fail(HttpStatus::bad_request, "invalid method");
    return false;
  }
  if (target.empty() ||
      !std::all_of(target.begin(), target.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
    fail(HttpStatus::bad_request, "invalid request target");
    return false;
  }
  // RFC 9112 §2.3: HTTP-version = "HTTP/" DIGIT "." DIGIT, case-sensitive.
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !digit(version[5]) ||
      version[6] != '.' || !digit(version[7])) {
    fail(HttpStatus::bad_request, "invalid HTTP version");
    return false;
  }
  if (version == "HTTP/1.1") {
    request_.version_ = HttpVersion::http_1_1;
  } else if (version == "HTTP/1.0") {
    request_.version_ = HttpVersion::http_1_0;
  } else {
    fail(HttpStatus::http_version_not_supported, "unsupported HTTP version");
    return false;
  }
  request_.method_ = method;
  request_.target_ = target;
  return true;
}

bool HttpRequestDecoder::parse_field_semantics() {
  std::size_t hosts = 0;
  bool close = false;
  bool keep_alive = false;
  bool have_length = false;
  std::uint64_t length = 0;
  for (const auto& h : request_.headers_) {
    if (equals_ignore_case(h.name, "host")) {
      ++hosts;
    } else if (equals_ignore_case(h.name, "transfer-encoding")) {
      fail(HttpStatus::bad_request, "Transfer-Encoding on a request");
      return false;
    } else if (equals_ignore_case(h.name, "content-length")) {
      // RFC 9112 §6.3: a list of identical values may be taken as one; anything else is invalid.
      bool ok = true;
      bool any = false;
      for_each_list_element(h.value, [&](std::string_view v) {
        std::uint64_t x = 0;
        auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
        if (ec != std::errc{} || end != v.data() + v.size() || v.front() == '+' ||
            (have_length && x != length)) {
          ok = false;
          return;
        }
        have_length = true;
        any = true;
        length = x;
      });
      if (!ok || !any) {
        fail(HttpStatus::bad_request, "invalid Content-Length");
        return false;
      }
    } else if (equals_ignore_case(h.name, "connection")) {
      for_each_list_element(h.value, [&](std::string_view option) {
        close = close || equals_ignore_case(option, "close");
        keep_alive = keep_alive || equals_ignore_case(option, "keep-alive");
      });
    }
  }
  const bool http11 = request_.version_ == HttpVersion::http_1_1;
  // RFC 9112 §3.2: 400 for an HTTP/1.1 request without Host, and for any with several.
  if ((http11 && hosts != 1) || hosts > 1) {
    fail(HttpStatus::bad_request, hosts == 0 ? "missing Host" : "several Host fields");
    return false;
  }
  if (length > config_.max_discarded_body) {
    fail(HttpStatus::content_too_large, "request body too large");
    return false;
  }
  request_.content_length_ = length;
  request_.keep_alive_ = http11 ? !close : (keep_alive && !close);
  return true;
}

}  // namespace niox::http
