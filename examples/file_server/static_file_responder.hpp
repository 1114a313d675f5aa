// StaticFileResponder — turns a decoded request into a planned response, ready for a transport
// to write: a header block, then either a small in-memory body or a file region sent zero-copy.
//
//   HttpResponse r = responder.respond(decoder.request());
//   write_gathering({r.head, r.body});                 // one writev: head and small body together
//   if (r.has_file_region()) send_file(r.file, r.file_offset, r.file_count);  // FileRegion
//   if (!r.keep_alive) close_after_flush();
//
// Decisions (RFC 9110 unless noted):
//   - Methods: GET and HEAD; anything else is 405 with "Allow: GET, HEAD" (§15.5.6).
//   - HEAD gets exactly GET's header fields and no body (§9.3.2).
//   - Conditionals (§13.2.2 order): If-None-Match, since this server sends no ETag, never
//     matches and makes If-Modified-Since ignored (§13.1.3); If-Modified-Since on GET/HEAD with
//     a Last-Modified not later than the date is 304 with no body (§15.4.5). A date later than
//     the server's current time is invalid and ignored (§13.1.3): the full response.
//   - Range only on GET (§14.2), single range only (see parse_range); If-Range (§13.1.5) applies
//     the range only when it is an HTTP-date equal to Last-Modified, else the whole file is sent.
//   - Files up to small_body_max are read into memory (pread) so that a small response is one
//     write; larger ones become a region of the file, whose descriptor moves into the response.
//   - A directory named without its trailing slash ("/docs") is 301 to "/docs/" (query kept), as
//     relative links in its index.html would otherwise resolve against the parent (§15.4.2).
//     The Location is the normalised path inside the root (directory_redirect_location), never
//     the raw target: "//evil.com/../docs" is redirected to "/docs/".
//   - A regular file named as a directory ("/a.txt/", "/a.txt/.") is 404.
//   - Errors have a short text/plain body ("404 Not Found\n").
//   - Every response carries Date (§6.6.1) and Server; file responses Last-Modified and
//     Accept-Ranges: bytes.
//   - Keep-alive follows the request (RFC 9112 §9.3) except after a decoding error or a 5xx,
//     which close the connection ("Connection: close" is then sent). An HTTP/1.0 client that
//     asked for keep-alive is answered "Connection: keep-alive".
#pragma once

#include "file_root.hpp"
#include "open_file_cache.hpp"
#include "http_request_decoder.hpp"
#include "http_status.hpp"
#include "request_path.hpp"

#include <niox/base/file_descriptor.hpp>
#include <niox/buffer/byte_buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string>

namespace niox::http {

struct StaticFileConfig {
  // Files (or ranges) up to this many bytes travel in memory with the header block.
  std::size_t small_body_max = 16 * 1024;
  std::string server_name = "niox";
  RequestPathOptions path;
};

// A planned response. It owns everything it refers to: `head` and `body` are buffers of their
// own, `file` is the descriptor to send from. A transport keeps the response (or moves its parts
// into its outbound queue) until the last byte is written.
struct HttpResponse {
  HttpStatus status = HttpStatus::ok;
  ByteBuffer head;      // status line, fields, empty line; [position, limit) to send
  ByteBuffer body;      // in-memory body, possibly empty
  FileDescriptor file;  // the file region to send after head and body, if any
  std::uint64_t file_offset = 0;
  std::uint64_t file_count = 0;
  bool keep_alive = true;  // false: close the connection once everything is written

  bool has_file_region() const noexcept { return file.valid() && file_count > 0; }
  // Bytes on the wire: head + body + file region.
  std::uint64_t total_bytes() const noexcept {
    return head.remaining() + body.remaining() + (has_file_region() ? file_count : 0);
  }
};

class StaticFileResponder {
 public:
  // `root` must outlive the responder. Thread-safe: one responder may serve many loops, each
  // passing its own OpenFileCache (if any).
  explicit StaticFileResponder(const FileRoot& root, StaticFileConfig config = {});

  // The response to a decoded request, `now` being the time for the Date field. With a `cache`
  // (one per event loop), hot files are served from it (see OpenFileCache).
  HttpResponse respond(const HttpRequest& request, std::time_t now = std::time(nullptr),
                       OpenFileCache* cache = nullptr) const;

  // The response to a request the decoder refused (400, 413, 414, 431, 505): a short body and
  // "Connection: close".
  HttpResponse respond_to_decode_error(HttpStatus status,
                                       std::time_t now = std::time(nullptr)) const;

  // The response for an already opened file (`request` must be GET or HEAD).
  HttpResponse respond_with_file(const HttpRequest& request, ResolvedFile&& file,
                                 std::time_t now = std::time(nullptr)) const;

  const StaticFileConfig& config() const noexcept { return config_; }

 private:
  HttpResponse text_response(HttpStatus status, bool keep_alive, bool http10, bool head_only,
                             std::time_t now, std::uint64_t size_for_416 = 0,
                             std::string_view location = {}) const;

  // What a file response needs to know about the file, wherever it comes from.
  struct FileMeta {
    std::uint64_t size;
    std::time_t mtime;
    std::string_view path;
  };
  // Plans the response for a file: its body comes from `content` (the whole file in memory,
  // sliced without copying) when given, else from `fd` (read if small, a region if large).
  HttpResponse plan_file(const HttpRequest& request, const FileMeta& meta,
                         const ByteBuffer* content, FileDescriptor fd, std::time_t now) const;
  HttpResponse redirect_to_directory(const HttpRequest& request, const RequestPath& path,
                                     std::time_t now) const;

  const FileRoot& root_;
  StaticFileConfig config_;
};

}  // namespace niox::http
