// The HTTP status codes the file server answers with (RFC 9110 §15) and their reason phrases.
#pragma once

#include <cstdint>
#include <string_view>

namespace niox::http {

enum class HttpStatus : std::uint16_t {
  ok = 200,
  partial_content = 206,
  moved_permanently = 301,
  not_modified = 304,
  bad_request = 400,
  forbidden = 403,
  not_found = 404,
  method_not_allowed = 405,
  content_too_large = 413,
  uri_too_long = 414,
  range_not_satisfiable = 416,
  request_header_fields_too_large = 431,
  internal_server_error = 500,
  not_implemented = 501,
  service_unavailable = 503,
  http_version_not_supported = 505,
};

constexpr int code(HttpStatus s) noexcept { return static_cast<int>(s); }

// "OK", "Not Found", ... (RFC 9110 §15); "Unknown" for a value outside the enumeration.
std::string_view reason_phrase(HttpStatus s) noexcept;

}  // namespace niox::http
