#include "http_status.hpp"

namespace niox::http {

std::string_view reason_phrase(HttpStatus s) noexcept {
  switch (s) {
    case HttpStatus::ok: return "OK";
    case HttpStatus::partial_content: return "Partial Content";
    case HttpStatus::moved_permanently: return "Moved Permanently";
    case HttpStatus::not_modified: return "Not Modified";
    case HttpStatus::bad_request: return "Bad Request";
    case HttpStatus::forbidden: return "Forbidden";
    case HttpStatus::not_found: return "Not Found";
    case HttpStatus::method_not_allowed: return "Method Not Allowed";
    case HttpStatus::content_too_large: return "Content Too Large";
    case HttpStatus::uri_too_long: return "URI Too Long";
    case HttpStatus::range_not_satisfiable: return "Range Not Satisfiable";
    case HttpStatus::request_header_fields_too_large: return "Request Header Fields Too Large";
    case HttpStatus::internal_server_error: return "Internal Server Error";
    case HttpStatus::not_implemented: return "Not Implemented";
    case HttpStatus::service_unavailable: return "Service Unavailable";
    case HttpStatus::http_version_not_supported: return "HTTP Version Not Supported";
  }
  return "Unknown";
}

}  // namespace niox::http
