#include <niox/async/asynchronous_file_channel.hpp>

#include <sys/stat.h>

namespace niox {

AsynchronousFileChannel AsynchronousFileChannel::open(EventLoop& loop,
                                                      const std::filesystem::path& path,
                                                      OpenOption options, mode_t mode) {
  return AsynchronousFileChannel(loop,
                                 FileDescriptor(FileChannel::open(path, options, mode).release()));
}

std::uint64_t AsynchronousFileChannel::size() const {
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) throw std::system_error(errno, std::generic_category(), "size");
  return static_cast<std::uint64_t>(st.st_size);
}

}  // namespace niox
