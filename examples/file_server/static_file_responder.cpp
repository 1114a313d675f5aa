#include "static_file_responder.hpp"

#include "http_fields.hpp"

#include <niox/buffer/buffer_pool.hpp>

#include <cerrno>
#include <charconv>

#include <fcntl.h>

#include <unistd.h>

namespace niox::http {
namespace {

// One instant's HTTP-date, formatted again only when asked for another.
class DateText {
 public:
  DateText() noexcept { format_http_date(at_, text_); }

  std::string_view of(std::time_t t) noexcept {
    if (t != at_) {
      format_http_date(t, text_);
      at_ = t;
    }
    return {text_, http_date_length};
  }

 private:
  std::time_t at_ = 0;
  char text_[http_date_length];
};

// A response head, written straight into a buffer from the loop thread's pool: a head is
// written and released within its request (ByteBuffer::allocate would be a zeroed heap block,
// which glibc's calloc takes past its per-thread cache), and a format library's buffer would be
// one more copy, and its format strings parsed again per response. The buffer holds
// `fixed_room` plus whatever the caller says it adds beyond the fields below; a head that did
// not fit would throw BufferOverflowException, never be cut short.
class Head {
 public:
  // Every field a head can have, other than the server name and a Location: the longest
  // status line, Date, Content-Type (the longest media type), Content-Length, Last-Modified,
  // Accept-Ranges, Content-Range with three 20-digit numbers, Allow and Connection take 370.
  static constexpr std::size_t fixed_room = 512;

  Head(HttpStatus status, std::string_view server, std::time_t now, std::size_t more_room = 0)
      : buf_(BufferPool::for_this_thread().allocate(fixed_room + server.size() + more_room)) {
    add("HTTP/1.1 ")
        .add(static_cast<std::uint64_t>(code(status)))
        .add(" ")
        .add(reason_phrase(status));
    add("\r\nServer: ").add(server).add("\r\nDate: ").add(http_date_now(now)).add("\r\n");
  }

  Head& add(std::string_view text) {
    buf_.put(text);
    return *this;
  }
  Head& add(std::uint64_t n) {
    char digits[20];
    const auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
    return add(std::string_view(digits, static_cast<std::size_t>(end - digits)));
  }

  // The Connection field where the default does not say it, and the blank line.
  ByteBuffer finish(bool keep_alive, bool http10) {
    if (!keep_alive) {
      add("Connection: close\r\n");
    } else if (http10) {
      add("Connection: keep-alive\r\n");
    }
    add("\r\n");
    buf_.flip();
    return std::move(buf_);
  }

 private:
  // The Date of every response in one second is the same text: formatted once per second and
  // thread (each loop thread writes its own heads).
  static std::string_view http_date_now(std::time_t now) noexcept {
    thread_local DateText date;
    return date.of(now);
  }

  ByteBuffer buf_;
};

// Reads exactly `count` bytes at `offset`; false if the file ended early or failed.
bool pread_fully(int fd, std::span<std::byte> dst, std::uint64_t offset) {
  while (!dst.empty()) {
    ssize_t n = ::pread(fd, dst.data(), dst.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    dst = dst.subspan(static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
  }
  return true;
}

}  // namespace

StaticFileResponder::StaticFileResponder(const FileRoot& root, StaticFileConfig config)
    : root_(root), config_(std::move(config)) {}

HttpResponse StaticFileResponder::text_response(HttpStatus status, bool keep_alive, bool http10,
                                                bool head_only, std::time_t now,
                                                std::uint64_t size_for_416,
                                                std::string_view location) const {
  HttpResponse r;
  r.status = status;
  r.keep_alive = keep_alive && code(status) < 500;
  std::string body = std::to_string(code(status));
  body.append(" ").append(reason_phrase(status)).append("\n");

  // "Location: " and its end of line beside the location itself.
  Head head(status, config_.server_name, now, location.size() + 12);
  if (status == HttpStatus::method_not_allowed) {
    head.add("Allow: GET, HEAD\r\n");
  }
  if (!location.empty()) {
    head.add("Location: ").add(location).add("\r\n");
  }
  if (status == HttpStatus::range_not_satisfiable) {
    head.add("Content-Range: bytes */").add(size_for_416).add("\r\n");
  }
  head.add("Content-Type: text/plain; charset=utf-8\r\nContent-Length: ")
      .add(std::uint64_t{body.size()})
      .add("\r\n");
  r.head = head.finish(r.keep_alive, http10);
  if (!head_only) {
    r.body = ByteBuffer::allocate(body.size());
    r.body.put(std::string_view(body));
    r.body.flip();
  }
  return r;
}

HttpResponse StaticFileResponder::respond_to_decode_error(HttpStatus status,
                                                          std::time_t now) const {
  return text_response(status, false, false, false, now);
}

HttpResponse StaticFileResponder::redirect_to_directory(const HttpRequest& request,
                                                        const RequestPath& path,
                                                        std::time_t now) const {
  return text_response(HttpStatus::moved_permanently, request.keep_alive(),
                       request.version() == HttpVersion::http_1_0, request.is_head(), now, 0,
                       directory_redirect_location(path, request.target()));
}

HttpResponse StaticFileResponder::respond(const HttpRequest& request, std::time_t now,
                                          OpenFileCache* cache) const {
  const bool http10 = request.version() == HttpVersion::http_1_0;
  const bool head_only = request.is_head();
  if (!request.is_get() && !head_only) {
    return text_response(HttpStatus::method_not_allowed, request.keep_alive(), http10, false, now);
  }
  auto path = decode_request_path(request.target(), config_.path);
  if (path.status != HttpStatus::ok) {
    return text_response(path.status, request.keep_alive(), http10, head_only, now);
  }
  const auto steady_now = OpenFileCache::Clock::now();
  const CachedFile* cached =
      cache != nullptr ? cache->find(root_, path.relative, steady_now) : nullptr;
  OpenResult opened;
  if (cached == nullptr) {
    opened = root_.open(path.relative);
    if (opened.status != HttpStatus::ok) {
      return text_response(opened.status, request.keep_alive(), http10, head_only, now);
    }
    if (cache != nullptr) {
      cached = cache->insert(path.relative, std::move(opened), steady_now);
    }
  }
  const bool directory_index = cached != nullptr ? cached->directory_index : opened.directory_index;
  if (directory_index && !path.trailing_slash && !path.relative.empty()) {
    return redirect_to_directory(request, path, now);
  }
  if (!directory_index && path.trailing_slash) {
    // "/file.txt/" or "/file.txt/." names a directory, and a regular file is not one.
    return text_response(HttpStatus::not_found, request.keep_alive(), http10, head_only, now);
  }
  if (cached == nullptr) {
    return respond_with_file(request, std::move(opened.file), now);
  }
  const FileMeta meta{cached->size, cached->mtime, cached->path};
  if (cached->in_memory()) {
    return plan_file(request, meta, &cached->content, FileDescriptor(), now);
  }
  std::error_code ec;
  FileDescriptor fd = cached->fd.dup(ec);
  if (!fd) {
    const bool out_of_descriptors =
        ec == std::errc::too_many_files_open || ec == std::errc::too_many_files_open_in_system;
    return text_response(
        out_of_descriptors ? HttpStatus::service_unavailable : HttpStatus::internal_server_error,
        false, http10, head_only, now);
  }
  return plan_file(request, meta, nullptr, std::move(fd), now);
}

HttpResponse StaticFileResponder::respond_with_file(const HttpRequest& request, ResolvedFile&& file,
                                                    std::time_t now) const {
  return plan_file(request, FileMeta{file.size, file.mtime, file.path}, nullptr, std::move(file.fd),
                   now);
}

HttpResponse StaticFileResponder::plan_file(const HttpRequest& request, const FileMeta& file,
                                            const ByteBuffer* content, FileDescriptor fd,
                                            std::time_t now) const {
  const bool http10 = request.version() == HttpVersion::http_1_0;
  const bool head_only = request.is_head();
  const bool keep_alive = request.keep_alive();
  // A loop serves the same few files again and again: like Date, their Last-Modified is
  // formatted again only when it changes.
  thread_local DateText modified;
  const std::string_view last_modified = modified.of(file.mtime);

  // RFC 9110 §13.1.3: If-Modified-Since is ignored when If-None-Match is present, and when its
  // date is invalid, which a date later than the server's current time is.
  if (!request.header("If-None-Match")) {
    if (auto ims = request.header("If-Modified-Since")) {
      if (auto since = parse_http_date(*ims, now); since && *since <= now && file.mtime <= *since) {
        HttpResponse r;
        r.status = HttpStatus::not_modified;
        r.keep_alive = keep_alive;
        r.head = Head(r.status, config_.server_name, now)
                     .add("Last-Modified: ")
                     .add(last_modified)
                     .add("\r\n")
                     .finish(keep_alive, http10);
        return r;
      }
    }
  }

  ByteRange range;
  if (request.is_get()) {
    if (auto value = request.header("Range")) {
      bool apply = true;
      if (auto if_range = request.header("If-Range")) {
        auto date = parse_http_date(*if_range, now);
        apply = date && *date == file.mtime;
      }
      if (apply) {
        range = parse_range(*value, file.size);
      }
    }
  }
  if (range.kind == ByteRange::Kind::unsatisfiable) {
    return text_response(HttpStatus::range_not_satisfiable, keep_alive, http10, head_only, now,
                         file.size);
  }

  HttpResponse r;
  r.keep_alive = keep_alive;
  std::uint64_t offset = 0;
  std::uint64_t count = file.size;
  if (range.kind == ByteRange::Kind::satisfiable) {
    r.status = HttpStatus::partial_content;
    offset = range.first;
    count = range.length();
  }
  Head head(r.status, config_.server_name, now);
  head.add("Content-Type: ")
      .add(content_type_for(file.path))
      .add("\r\nContent-Length: ")
      .add(count)
      .add("\r\nLast-Modified: ")
      .add(last_modified)
      .add("\r\nAccept-Ranges: bytes\r\n");
  if (r.status == HttpStatus::partial_content) {
    head.add("Content-Range: bytes ")
        .add(range.first)
        .add("-")
        .add(range.last)
        .add("/")
        .add(file.size)
        .add("\r\n");
  }
  if (!head_only && count > 0 && content != nullptr) {
    r.body = content->slice(static_cast<std::size_t>(offset), static_cast<std::size_t>(count));
  } else if (!head_only && count > 0 && count <= config_.small_body_max) {
    r.body = ByteBuffer::allocate(static_cast<std::size_t>(count));
    if (!pread_fully(fd.get(), r.body.writable_bytes(), offset)) {
      // The file shrank or failed between fstat and read: nothing has been sent yet, so the
      // promise of Content-Length can still be withdrawn.
      return text_response(HttpStatus::internal_server_error, false, http10, false, now);
    }
  } else if (!head_only && count > 0) {
    r.file = std::move(fd);
    r.file_offset = offset;
    r.file_count = count;
  }
  r.head = head.finish(keep_alive, http10);
  return r;
}

}  // namespace niox::http
