#include "request_path.hpp"

#include "http_request_decoder.hpp"  // equals_ignore_case

#include <algorithm>
#include <climits>
#include <optional>

namespace niox::http {
namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

RequestPath failure(HttpStatus s) {
  RequestPath r;
  r.status = s;
  return r;
}

// Most targets are a plain origin-form path ("/css/site.css"): no escape, query, empty, "." or
// hidden segment, and short enough that no segment or the whole can exceed a limit. Such a
// target decodes to itself without its slashes at either end, which the general walk below would
// build byte by byte.
std::optional<RequestPath> decode_plain_path(std::string_view target,
                                             const RequestPathOptions& options) {
  if (target.empty() || target.front() != '/' ||
      target.size() - 1 > std::min<std::size_t>(NAME_MAX, options.max_path)) {
    return std::nullopt;
  }
  char prev = '/';
  for (char c : target.substr(1)) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '%' || c == '?' || c == '#' || c == '\\' ||
        (prev == '/' && (c == '/' || c == '.'))) {
      return std::nullopt;
    }
    prev = c;
  }
  RequestPath out;
  out.trailing_slash = target.back() == '/';
  out.relative.assign(target.substr(1, target.size() - (out.trailing_slash ? 2 : 1)));
  return out;
}

}  // namespace

RequestPath decode_request_path(std::string_view target, const RequestPathOptions& options) {
  if (auto plain = decode_plain_path(target, options)) {
    return std::move(*plain);
  }
  return decode_request_path_walk(target, options);
}

RequestPath decode_request_path_walk(std::string_view target, const RequestPathOptions& options) {
  // 1. absolute-form: scheme "://" authority path-abempty
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.size() >= scheme.size() &&
        equals_ignore_case(target.substr(0, scheme.size()), scheme)) {
      target.remove_prefix(scheme.size());
      auto slash = target.find_first_of("/?#");
      target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
      if (target.front() != '/') {
        target = "/";  // "http://host?q" names the root
      }
      break;
    }
  }
  if (target.empty() || target.front() != '/') {
    return failure(HttpStatus::bad_request);
  }
  // 2. query and fragment
  target = target.substr(0, target.find_first_of("?#"));

  RequestPath out;
  out.relative.reserve(std::min(target.size(), options.max_path));
  std::string segment;
  // Each segment is decoded, then pushed onto `relative` or, for "..", pops the last one.
  auto finish_segment = [&]() -> HttpStatus {
    if (segment.empty() || segment == ".") {
      return HttpStatus::ok;
    }
    if (segment == "..") {
      if (out.relative.empty()) {
        return HttpStatus::forbidden;
      }
      auto slash = out.relative.rfind('/');
      out.relative.resize(slash == std::string::npos ? 0 : slash);
      return HttpStatus::ok;
    }
    if (segment.size() > NAME_MAX) {
      return HttpStatus::not_found;
    }
    if (!out.relative.empty()) {
      out.relative.push_back('/');
    }
    out.relative += segment;
    if (out.relative.size() > options.max_path) {
      return HttpStatus::uri_too_long;
    }
    return HttpStatus::ok;
  };
  // A hidden segment that a later ".." removes was never opened, so it is checked at the end.
  for (std::size_t i = 0; i < target.size(); ++i) {
    char c = target[i];
    if (c == '/') {
      if (auto s = finish_segment(); s != HttpStatus::ok) {
        return failure(s);
      }
      segment.clear();
      continue;
    }
    if (c == '%') {
      int hi = i + 2 < target.size() ? hex_value(target[i + 1]) : -1;
      int lo = hi >= 0 ? hex_value(target[i + 2]) : -1;
      if (lo < 0) {
        return failure(HttpStatus::bad_request);
      }
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
      if (c == '/') {
        return failure(HttpStatus::bad_request);
      }
    }
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '\\') {
      return failure(HttpStatus::bad_request);
    }
    if (segment.size() > options.max_path) {
      return failure(HttpStatus::uri_too_long);
    }
    segment.push_back(c);
  }
  // What the last segment was, before it is applied: "" (the path ended in '/'), "." or "..".
  out.trailing_slash = segment.empty() || segment == "." || segment == "..";
  if (auto s = finish_segment(); s != HttpStatus::ok) {
    return failure(s);
  }
  if (!options.allow_hidden) {
    std::string_view rest = out.relative;
    while (!rest.empty()) {
      if (rest.front() == '.') {
        return failure(HttpStatus::not_found);
      }
      auto slash = rest.find('/');
      rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    }
  }
  return out;
}

std::string directory_redirect_location(const RequestPath& path, std::string_view target) {
  // RFC 3986 §3.3: pchar = unreserved / pct-encoded / sub-delims / ":" / "@"
  auto plain = [](unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("-._~!$&'()*+,;=:@").find(static_cast<char>(c)) !=
               std::string_view::npos;
  };
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string location = "/";
  for (char ch : path.relative) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == '/' || plain(c)) {
      location.push_back(ch);
    } else {
      location.push_back('%');
      location.push_back(hex[c >> 4]);
      location.push_back(hex[c & 0xf]);
    }
  }
  if (!path.relative.empty()) {
    location.push_back('/');
  }
  // The query as the client sent it (visible ASCII, checked by the request decoder). No '?'
  // can come before it: the authority of an absolute-form target holds none.
  if (auto q = target.find_first_of("?#"); q != std::string_view::npos && target[q] == '?') {
    location += target.substr(q, target.find('#', q) - q);
  }
  return location;
}

}  // namespace niox::http
