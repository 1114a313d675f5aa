#include "static_file_responder.hpp"

#include "http_fields.hpp"

#include <niox/buffer/buffer_pool.hpp>

#include <cerrno>

#include <fcntl.h>

#include <fmt/format.h>
#include <unistd.h>

namespace niox::http {
namespace {

// From the loop thread's pool: a response head is written and released within the request
// (ByteBuffer::allocate would be a zeroed heap block, which glibc's calloc takes past its
// per-thread cache).
ByteBuffer to_buffer(const fmt::memory_buffer& text) {
  auto buf = BufferPool::for_this_thread().allocate(text.size());
  buf.put(std::string_view(text.data(), text.size()));
  buf.flip();
  return buf;
}

// The status line and the fields every response has.
void begin_head(fmt::memory_buffer& out, HttpStatus status, std::string_view server,
                std::time_t now) {
  char date[http_date_length];
  fmt::format_to(std::back_inserter(out), "HTTP/1.1 {} {}\r\nServer: {}\r\nDate: {}\r\n",
                 code(status), reason_phrase(status), server, format_http_date(now, date));
}

void end_head(fmt::memory_buffer& out, bool keep_alive, bool http10) {
  if (!keep_alive) {
    out.append(std::string_view("Connection: close\r\n"));
  } else if (http10) {
    out.append(std::string_view("Connection: keep-alive\r\n"));
  }
  out.append(std::string_view("\r\n"));
}

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
  auto text = fmt::format("{} {}\n", code(status), reason_phrase(status));
  fmt::memory_buffer head;
  begin_head(head, status, config_.server_name, now);
  if (status == HttpStatus::method_not_allowed) {
    head.append(std::string_view("Allow: GET, HEAD\r\n"));
  }
  if (!location.empty()) {
    fmt::format_to(std::back_inserter(head), "Location: {}\r\n", location);
  }
  if (status == HttpStatus::range_not_satisfiable) {
    fmt::format_to(std::back_inserter(head), "Content-Range: bytes */{}\r\n", size_for_416);
  }
  fmt::format_to(std::back_inserter(head),
                 "Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n", text.size());
  end_head(head, r.keep_alive, http10);
  r.head = to_buffer(head);
  if (!head_only) {
    r.body = ByteBuffer::allocate(text.size());
    r.body.put(std::string_view(text));
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
  char last_modified[http_date_length];
  format_http_date(file.mtime, last_modified);

  // RFC 9110 §13.1.3: If-Modified-Since is ignored when If-None-Match is present, and when its
  // date is invalid, which a date later than the server's current time is.
  if (!request.header("If-None-Match")) {
    if (auto ims = request.header("If-Modified-Since")) {
      if (auto since = parse_http_date(*ims, now); since && *since <= now && file.mtime <= *since) {
        HttpResponse r;
        r.status = HttpStatus::not_modified;
        r.keep_alive = keep_alive;
        fmt::memory_buffer head;
        begin_head(head, r.status, config_.server_name, now);
        fmt::format_to(std::back_inserter(head), "Last-Modified: {}\r\n",
                       std::string_view(last_modified, http_date_length));
        end_head(head, keep_alive, http10);
        r.head = to_buffer(head);
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
  fmt::memory_buffer head;
  if (range.kind == ByteRange::Kind::satisfiable) {
    r.status = HttpStatus::partial_content;
    offset = range.first;
    count = range.length();
  }
  begin_head(head, r.status, config_.server_name, now);
  fmt::format_to(std::back_inserter(head),
                 "Content-Type: {}\r\nContent-Length: {}\r\nLast-Modified: {}\r\n"
                 "Accept-Ranges: bytes\r\n",
                 content_type_for(file.path), count,
                 std::string_view(last_modified, http_date_length));
  if (r.status == HttpStatus::partial_content) {
    fmt::format_to(std::back_inserter(head), "Content-Range: bytes {}-{}/{}\r\n", range.first,
                   range.last, file.size);
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
  end_head(head, keep_alive, http10);
  r.head = to_buffer(head);
  return r;
}

}  // namespace niox::http
