#include <niox/transport/file_region.hpp>
#include <niox/transport/transport_error.hpp>

#include <cerrno>

#include <sys/stat.h>

namespace niox {

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
