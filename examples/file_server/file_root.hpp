// FileRoot — the served directory, and the only way the server opens files in it.
//
// Every open is relative to a descriptor of the root taken once at start-up, so renaming or
// replacing the root path later changes nothing, and resolution can never start anywhere else.
//
//   Kernel-enforced (Linux >= 5.6): openat2(root_fd, path, { O_RDONLY | O_CLOEXEC | O_NOCTTY |
//   O_NONBLOCK, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS }). RESOLVE_BENEATH makes the kernel refuse
//   (EXDEV) any resolution step, ".." or symlink, absolute or relative, that leaves the root, so
//   symlinks that stay inside the root work and those leading out fail atomically, without a
//   check-then-open race. /proc magic links are refused too.
//
//   Fallback when openat2 is missing (ENOSYS, or refused by a seccomp filter with EPERM): a walk
//   from the root, one openat(O_NOFOLLOW) per component. It cannot tell an inside symlink from
//   an outside one without racing, so it follows none: every symlink is 403.
//
// O_NONBLOCK keeps a FIFO planted in the root from blocking the open; only regular files are
// served (anything else is 403). Directories resolve to their index.html, else 404 (no listings).
// (Whether "/dir" should first be redirected to "/dir/" is the responder's decision.)
//
// Errors map to statuses without revealing why: missing or not-a-directory is 404; leaving the
// root, a symlink the walk refuses, a permission denied or a special file is 403; running out of
// descriptors (EMFILE/ENFILE) is 503; anything else is 500.
#pragma once

#include "http_status.hpp"

#include <niox/base/file_descriptor.hpp>

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <system_error>

namespace niox::http {

// What tells one version of a file from another: a file replaced (another inode), or changed in
// place (size, modification or status-change time), compares unequal. A change that keeps the
// size within one tick of the file system's clock is the one it cannot see.
struct FileIdentity {
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;  // changes with permissions and links too
  friend bool operator==(const FileIdentity&, const FileIdentity&) = default;
};

// A regular file opened for reading, and what a response needs to know about it.
struct ResolvedFile {
  FileDescriptor fd;
  std::uint64_t size = 0;
  std::time_t mtime = 0;  // seconds; HTTP-dates have no finer resolution
  std::string path;       // relative path actually opened ("docs/index.html"), for Content-Type
  FileIdentity identity;  // of what fd names, when it was opened
};

struct OpenResult {
  HttpStatus status = HttpStatus::ok;  // ok, or 403/404/500/503
  ResolvedFile file;                   // valid when status is ok
  bool directory_index = false;        // the path named a directory; file is its index.html
};

class FileRoot {
 public:
  enum class Resolver : std::uint8_t { auto_detect, openat2, walk };

  // Opens `directory` (O_PATH | O_DIRECTORY | O_CLOEXEC) and checks that it may be read and
  // searched. Throws std::system_error if it cannot (ENOENT, ENOTDIR, EACCES...).
  // `resolver` forces one strategy (tests use walk to cover the fallback).
  explicit FileRoot(const std::string& directory, Resolver resolver = Resolver::auto_detect);
  FileRoot(const std::string& directory, Resolver resolver, std::error_code& ec) noexcept;

  // Opens `relative` (as produced by decode_request_path: "" or plain names joined by '/').
  // A directory is replaced by its "index.html". Thread-safe: many loops may share one root.
  OpenResult open(std::string_view relative) const;

  // The identity of what `relative` (a path ResolvedFile::path held) names now, without opening
  // it: one stat relative to the root. False if it cannot be stat'ed (gone, ...). Only for
  // comparing with the identity of a file this root opened: it checks nothing else.
  bool identity_of(const std::string& relative, FileIdentity& out) const noexcept;

  // The strategy in use; auto_detect settles on openat2 or walk at construction.
  Resolver resolver() const noexcept { return resolver_; }
  int fd() const noexcept { return root_.get(); }

 private:
  // Opens one path: the descriptor, or an invalid one and the errno in `err`.
  FileDescriptor open_path(const std::string& relative, int& err) const;
  FileDescriptor open_openat2(const std::string& relative, int& err) const;
  FileDescriptor open_walk(const std::string& relative, int& err) const;

  FileDescriptor root_;
  Resolver resolver_;
};

}  // namespace niox::http
