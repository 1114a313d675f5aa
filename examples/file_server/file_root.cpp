#include "file_root.hpp"

#include <cerrno>
#include <string>

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace niox::http {
namespace {

constexpr int file_flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;

FileDescriptor sys_openat2(int dirfd, const char* path, open_how* how) noexcept {
  return FileDescriptor(static_cast<int>(::syscall(SYS_openat2, dirfd, path, how, sizeof(*how))));
}

// The new descriptor, or an invalid one and the errno in `err`.
FileDescriptor retry_openat(int dirfd, const char* name, int flags, int& err) noexcept {
  int fd;
  do {
    fd = ::openat(dirfd, name, flags);
  } while (fd < 0 && errno == EINTR);
  err = fd < 0 ? errno : 0;
  return FileDescriptor(fd);
}

HttpStatus status_for_errno(int err) noexcept {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
    case ENAMETOOLONG: return HttpStatus::not_found;
    case EXDEV:  // RESOLVE_BENEATH: the path leaves the root
    case ELOOP:  // a symlink the walk refuses, a magic link, or a symlink loop
    case EACCES:
    case EPERM:
    case ENXIO:  // a socket or a FIFO without a writer
      return HttpStatus::forbidden;
    case EMFILE:
    case ENFILE:
    case ENOMEM: return HttpStatus::service_unavailable;
    default: return HttpStatus::internal_server_error;
  }
}

FileIdentity identity_from(const struct stat& st) noexcept {
  FileIdentity id;
  id.dev = static_cast<std::uint64_t>(st.st_dev);
  id.ino = static_cast<std::uint64_t>(st.st_ino);
  id.size = static_cast<std::uint64_t>(st.st_size);
  id.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  id.ctime_ns = static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return id;
}

}  // namespace

bool FileRoot::identity_of(const std::string& relative, FileIdentity& out) const noexcept {
  struct stat st {};
  // The walk follows no symlink; neither does its check of the last component.
  const int flags = resolver_ == Resolver::walk ? AT_SYMLINK_NOFOLLOW : 0;
  if (relative.empty() || ::fstatat(root_.get(), relative.c_str(), &st, flags) != 0) {
    return false;
  }
  out = identity_from(st);
  return true;
}

FileRoot::FileRoot(const std::string& directory, Resolver resolver) : resolver_(resolver) {
  std::error_code ec;
  *this = FileRoot(directory, resolver, ec);
  if (ec) {
    throw std::system_error(ec, "cannot open the served root " + directory);
  }
}

FileRoot::FileRoot(const std::string& directory, Resolver resolver, std::error_code& ec) noexcept
    : resolver_(resolver) {
  ec.clear();
  FileDescriptor root = FileDescriptor::open(directory, O_PATH | O_DIRECTORY, 0, ec);
  if (ec) {
    return;
  }
  // An O_PATH descriptor needs no permission at all; serving needs search (to resolve names
  // below) and read (to list nothing, but a directory we may not read is not one we serve).
  // Opening "." for reading checks both now, instead of answering 403 to every request.
  if (!FileDescriptor(::openat(root.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC))) {
    ec.assign(errno, std::system_category());
    return;
  }
  root_ = std::move(root);
  if (resolver_ == Resolver::auto_detect) {
    open_how how{};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    if (sys_openat2(root_.get(), ".", &how)) {
      resolver_ = Resolver::openat2;
    } else {
      // ENOSYS: kernel older than 5.6; EPERM: a seccomp filter that does not know the call.
      resolver_ = (errno == ENOSYS || errno == EPERM) ? Resolver::walk : Resolver::openat2;
    }
  }
}

FileDescriptor FileRoot::open_path(const std::string& relative, int& err) const {
  return resolver_ == Resolver::walk ? open_walk(relative, err) : open_openat2(relative, err);
}

FileDescriptor FileRoot::open_openat2(const std::string& relative, int& err) const {
  open_how how{};
  how.flags = file_flags;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  const char* path = relative.empty() ? "." : relative.c_str();
  FileDescriptor fd;
  do {
    fd = sys_openat2(root_.get(), path, &how);
  } while (!fd && (errno == EINTR || errno == EAGAIN));
  err = fd ? 0 : errno;
  return fd;
}

FileDescriptor FileRoot::open_walk(const std::string& relative, int& err) const {
  if (relative.empty()) {
    return retry_openat(root_.get(), ".", file_flags, err);
  }
  FileDescriptor dir;  // the directory reached so far; the root itself while empty
  std::string_view rest = relative;
  while (true) {
    auto slash = rest.find('/');
    std::string name(rest.substr(0, slash));
    if (name.empty() || name == "." || name == "..") {
      err = EXDEV;  // decode_request_path never produces these; refuse rather than trust
      return FileDescriptor();
    }
    const int at = dir ? dir.get() : root_.get();
    const bool last = slash == std::string_view::npos;
    FileDescriptor fd =
        last ? retry_openat(at, name.c_str(), file_flags | O_NOFOLLOW, err)
             : retry_openat(at, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, err);
    if (err == ENOTDIR || err == ELOOP) {
      // O_NOFOLLOW already refused to follow; this only picks the status to report.
      struct stat st {};
      if (::fstatat(at, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
        err = ELOOP;
      }
    }
    if (!fd || last) {
      return fd;
    }
    dir = std::move(fd);
    rest.remove_prefix(slash + 1);
  }
}

OpenResult FileRoot::open(std::string_view relative) const {
  OpenResult result;
  if (relative.find('\0') != std::string_view::npos) {
    result.status = HttpStatus::not_found;  // no file name holds a NUL; c_str() would cut it
    return result;
  }
  std::string path(relative);
  for (int attempt = 0;; ++attempt) {
    int err = 0;
    FileDescriptor file = open_path(path, err);
    if (!file) {
      result.status = status_for_errno(err);
      return result;
    }
    struct stat st {};
    if (::fstat(file.get(), &st) != 0) {
      result.status = status_for_errno(errno);
      return result;
    }
    if (S_ISDIR(st.st_mode)) {
      if (attempt > 0) {
        result.status = HttpStatus::not_found;  // "index.html" is itself a directory
        return result;
      }
      path = path.empty() ? "index.html" : path + "/index.html";
      continue;
    }
    if (!S_ISREG(st.st_mode)) {
      result.status = HttpStatus::forbidden;
      return result;
    }
    result.file.fd = std::move(file);
    result.file.size = static_cast<std::uint64_t>(st.st_size);
    result.file.mtime = st.st_mtim.tv_sec;
    result.file.path = std::move(path);
    result.file.identity = identity_from(st);
    result.directory_index = attempt > 0;
    return result;
  }
}

}  // namespace niox::http
