// From a request-target to a path relative to the served root, before any file system access.
//
//   "/docs/a%20b/../index.html?x=1"  ->  "docs/index.html"
//
// Steps, in order (RFC 9112 §3.2, RFC 3986 §2.1, §3.3, §5.2.4):
//   1. Form: origin-form "/path?query", or absolute-form "http://host/path" whose scheme and
//      authority are dropped (RFC 9112 §3.2.2: a server MUST accept it). Anything else is 400.
//   2. The query and a (never legitimately sent) fragment are cut off.
//   3. Each segment is percent-decoded. An invalid escape ("%g1", "%4"), a decoded NUL or any
//      control byte, and an encoded '/' or '\' ("%2f", "%5c") are 400: an encoded separator
//      would mean a name the file system cannot hold, and decoding it into a separator is the
//      classic way around a traversal check. A literal '\' is 400 too.
//   4. Dot-segments are removed on the decoded segments, so "%2e%2e" is ".." like "..". Empty
//      segments ("//") are ignored. A ".." that would climb above the root is 403, decided on
//      the text alone: the answer is the same whatever exists outside the root, so it leaks
//      nothing, and nothing outside is ever opened to find out.
//   5. Unless hidden files are allowed, a segment starting with '.' (".git", ".env") is 404, as
//      if it did not exist.
//   6. A decoded path longer than max_path is 414; a segment longer than NAME_MAX is 404 (no
//      such name can exist).
// What is left is a relative path of plain names joined by single '/', or "" for the root
// itself. Symlinks are dealt with when opening (FileRoot).
#pragma once

#include "http_status.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace niox::http {

struct RequestPathOptions {
  std::size_t max_path = 4096;  // PATH_MAX
  bool allow_hidden = false;
};

struct RequestPath {
  HttpStatus status = HttpStatus::ok;  // ok, or 400/403/404/414
  std::string relative;                // valid when status is ok: "" or "a/b/c"
  // The target named a directory: its path ends in '/', or in a "." or ".." segment, which
  // RFC 3986 §5.2.4 resolves with the slash ("/docs/." is "/docs/"). A regular file is not one.
  bool trailing_slash = false;
};

RequestPath decode_request_path(std::string_view target, const RequestPathOptions& options = {});

// The general decoding, byte by byte, that decode_request_path skips for a plain path; the
// tests hold the two to the same results.
RequestPath decode_request_path_walk(std::string_view target,
                                     const RequestPathOptions& options = {});

// The Location of the redirect from a directory named without its slash to the same name with
// it: built from `path` (what the target resolved to inside the root, status ok), never from
// the raw target, whose "//evil.com/../dir" a browser would resolve to another host. The
// result is "/" + the relative path with every byte outside RFC 3986's pchar percent-encoded
// + "/", then the target's query if it had one: it always starts with a single '/' followed
// by a name byte, never "//" or "/\".
std::string directory_redirect_location(const RequestPath& path, std::string_view target);

}  // namespace niox::http
