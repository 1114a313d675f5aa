#include <niox/base/file_descriptor.hpp>

#include <cerrno>
#include <string>

#include <fcntl.h>
#include <unistd.h>

namespace niox {

FileDescriptor FileDescriptor::open(const std::filesystem::path& path, int flags, mode_t mode,
                                    std::error_code& ec) noexcept {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) {
    ec.assign(errno, std::system_category());
    return FileDescriptor();
  }
  ec.clear();
  return FileDescriptor(fd);
}

FileDescriptor FileDescriptor::open(const std::filesystem::path& path, int flags, mode_t mode) {
  std::error_code ec;
  FileDescriptor fd = open(path, flags, mode, ec);
  if (ec) throw std::system_error(ec, "open " + path.string());
  return fd;
}

void FileDescriptor::close_quietly(int fd) noexcept {
  // Not retried on EINTR: Linux has released the number by then (see the header).
  ::close(fd);
}

std::error_code FileDescriptor::close() noexcept {
  if (fd_ < 0) return std::make_error_code(std::errc::bad_file_descriptor);
  int fd = std::exchange(fd_, -1);
  // Linux frees the descriptor even when close reports an error (EINTR included): never retry.
  if (::close(fd) != 0) return {errno, std::system_category()};
  return {};
}

void FileDescriptor::close_or_throw() {
  if (fd_ < 0) return;
  if (auto ec = close()) throw std::system_error(ec, "close");
}

FileDescriptor FileDescriptor::dup(std::error_code& ec) const noexcept {
  int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    ec.assign(errno, std::system_category());
    return FileDescriptor();
  }
  ec.clear();
  return FileDescriptor(fd);
}

FileDescriptor FileDescriptor::dup() const {
  std::error_code ec;
  FileDescriptor fd = dup(ec);
  if (ec) throw std::system_error(ec, "dup");
  return fd;
}

}  // namespace niox
