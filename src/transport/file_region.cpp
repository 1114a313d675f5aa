#include <niox/transport/file_region.hpp>
#include <niox/transport/transport_error.hpp>

#include <cerrno>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace niox {

FileHandle::~FileHandle() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

std::shared_ptr<FileHandle> FileHandle::open(const std::string& path, std::error_code& ec) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    ec.assign(errno, std::system_category());
    return nullptr;
  }
  ec.clear();
  return std::make_shared<FileHandle>(fd);
}

std::shared_ptr<FileHandle> FileHandle::open(const std::string& path) {
  std::error_code ec;
  auto f = open(path, ec);
  if (ec) {
    throw std::system_error(ec, "open " + path);
  }
  return f;
}

std::error_code FileRegion::check_file_length() const noexcept {
  struct stat st {};
  if (::fstat(fd(), &st) != 0) {
    return {errno, std::system_category()};
  }
  auto size = static_cast<std::uint64_t>(st.st_size);
  if (position_ > size || count_ > size - position_) {
    return transport::Errc::file_region_truncated;
  }
  return {};
}

}  // namespace niox
