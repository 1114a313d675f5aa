#include <niox/channels/file_channel.hpp>

#include <niox/buffer/gather.hpp>

#include "channels/fd_io.hpp"

#include <algorithm>
#include <climits>
#include <limits>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace niox {

namespace {
off_t to_off(std::uint64_t v) {
  if (v > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max())) {
    throw IllegalArgumentException("position beyond the largest file offset");
  }
  return static_cast<off_t>(v);
}

[[noreturn]] void throw_errno(const char* what) {
  throw std::system_error(detail::errno_code(), what);
}

// The throwing form of an error_code overload: runs io(ec) and throws what it reports.
template <class Io>
std::int64_t or_throw(const char* what, Io&& io) {
  std::error_code ec;
  auto n = io(ec);
  return detail::throw_if(n, ec, what);
}
}  // namespace

// ---- FileLock -----------------------------------------------------------------------------

FileLock::FileLock(FileLock&& other) noexcept
    : fd_(std::move(other.fd_)),
      position_(other.position_),
      size_(other.size_),
      shared_(other.shared_) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::move(other.fd_);
    position_ = other.position_;
    size_ = other.size_;
    shared_ = other.shared_;
  }
  return *this;
}

FileLock::~FileLock() { release(); }

bool FileLock::is_valid() const noexcept { return fd_ && fd_->valid(); }

namespace {
flock make_flock(short type, std::uint64_t position, std::uint64_t size) {
  flock fl{};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(position);
  // 0 means "to the end of the file, however it grows".
  fl.l_len = size > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max()) - position
                 ? 0
                 : static_cast<off_t>(size);
  fl.l_pid = 0;  // required for OFD locks
  return fl;
}
}  // namespace

void FileLock::release() noexcept {
  if (is_valid()) {
    flock fl = make_flock(F_UNLCK, position_, size_);
    ::fcntl(fd_->get(), F_OFD_SETLK, &fl);
  }
  fd_.reset();
}

// ---- FileChannel: life ---------------------------------------------------------------------

FileChannel::FileChannel(int fd, bool readable, bool writable, bool append) noexcept
    : fd_(std::make_shared<FileDescriptor>(fd)),
      readable_(readable),
      writable_(writable),
      append_(append) {}

FileChannel::FileChannel(FileChannel&& other) noexcept
    : NioChannel(other),
      fd_(std::move(other.fd_)),
      readable_(other.readable_),
      writable_(other.writable_),
      append_(other.append_) {}

FileChannel& FileChannel::operator=(FileChannel&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::move(other.fd_);
    readable_ = other.readable_;
    writable_ = other.writable_;
    append_ = other.append_;
  }
  return *this;
}

FileChannel::~FileChannel() { close(); }

void FileChannel::close() noexcept {
  if (fd_) {
    fd_->reset();  // the FileLocks sharing it see it closed
    fd_.reset();
  }
}

int FileChannel::release() noexcept {
  int fd = fd_ ? fd_->release() : -1;
  fd_.reset();
  return fd;
}

FileChannel FileChannel::open(const std::filesystem::path& path, OpenOption options, mode_t mode) {
  std::error_code ec;
  FileChannel ch = open(path, options, mode, ec);
  if (ec) {
    throw std::system_error(ec, "open " + path.string());
  }
  return ch;
}

FileChannel FileChannel::open(const std::filesystem::path& path, OpenOption options, mode_t mode,
                              std::error_code& ec) {
  ec.clear();
  const bool append = has_option(options, OpenOption::append);
  if (append && has_option(options, OpenOption::read)) {
    throw IllegalArgumentException("READ + APPEND not allowed");
  }
  if (append && has_option(options, OpenOption::truncate_existing)) {
    throw IllegalArgumentException("APPEND + TRUNCATE_EXISTING not allowed");
  }
  const bool writable = append || has_option(options, OpenOption::write);
  const bool readable = has_option(options, OpenOption::read) || !writable;
  int flags = O_CLOEXEC | (readable && writable ? O_RDWR : writable ? O_WRONLY : O_RDONLY);
  if (writable) {
    if (has_option(options, OpenOption::create_new)) {
      flags |= O_CREAT | O_EXCL;
    } else if (has_option(options, OpenOption::create)) {
      flags |= O_CREAT;
    }
    if (has_option(options, OpenOption::truncate_existing)) {
      flags |= O_TRUNC;
    }
  }
  if (append) flags |= O_APPEND;
  if (has_option(options, OpenOption::sync)) flags |= O_SYNC;
  if (has_option(options, OpenOption::dsync)) flags |= O_DSYNC;
  if (has_option(options, OpenOption::direct)) flags |= O_DIRECT;
  int fd;
  do {
    fd = ::open(path.c_str(), flags, mode);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    ec = detail::errno_code();
    return {};
  }
  return FileChannel(fd, readable, writable, append);
}

FileChannel FileChannel::from_native(int fd) noexcept {
  int fl = ::fcntl(fd, F_GETFL);
  int acc = fl < 0 ? O_RDONLY : (fl & O_ACCMODE);
  return FileChannel(fd, acc != O_WRONLY, acc != O_RDONLY, fl >= 0 && (fl & O_APPEND) != 0);
}

// ---- FileChannel: I/O ----------------------------------------------------------------------

std::int64_t FileChannel::read(ByteBuffer& dst, std::error_code& ec) {
  return read(std::span<ByteBuffer>(&dst, 1), ec);
}

std::int64_t FileChannel::read(std::span<ByteBuffer> dsts, std::error_code& ec) {
  if (is_open() && !readable_) throw NonReadableChannelException();
  return detail::scatter_read(fd(), dsts, -1, ec);
}

std::int64_t FileChannel::write(ByteBuffer& src, std::error_code& ec) {
  return write(std::span<ByteBuffer>(&src, 1), ec);
}

std::int64_t FileChannel::write(std::span<ByteBuffer> srcs, std::error_code& ec) {
  if (is_open() && !writable_) throw NonWritableChannelException();
  return detail::gather_write(fd(), detail::FdKind::file, srcs, -1, true, ec);
}

std::int64_t FileChannel::read(ByteBuffer& dst, std::uint64_t position) {
  return or_throw("pread", [&](std::error_code& ec) { return read(dst, position, ec); });
}
std::int64_t FileChannel::read(ByteBuffer& dst, std::uint64_t position, std::error_code& ec) {
  return read(std::span<ByteBuffer>(&dst, 1), position, ec);
}
std::int64_t FileChannel::read(std::span<ByteBuffer> dsts, std::uint64_t position) {
  return or_throw("preadv", [&](std::error_code& ec) { return read(dsts, position, ec); });
}
std::int64_t FileChannel::read(std::span<ByteBuffer> dsts, std::uint64_t position,
                               std::error_code& ec) {
  if (is_open() && !readable_) throw NonReadableChannelException();
  return detail::scatter_read(fd(), dsts, to_off(position), ec);
}

std::int64_t FileChannel::write(ByteBuffer& src, std::uint64_t position) {
  return or_throw("pwrite", [&](std::error_code& ec) { return write(src, position, ec); });
}
std::int64_t FileChannel::write(ByteBuffer& src, std::uint64_t position, std::error_code& ec) {
  return write(std::span<ByteBuffer>(&src, 1), position, ec);
}
std::int64_t FileChannel::write(std::span<ByteBuffer> srcs, std::uint64_t position) {
  return or_throw("pwritev", [&](std::error_code& ec) { return write(srcs, position, ec); });
}
std::int64_t FileChannel::write(std::span<ByteBuffer> srcs, std::uint64_t position,
                                std::error_code& ec) {
  if (is_open() && !writable_) throw NonWritableChannelException();
  return detail::gather_write(fd(), detail::FdKind::file, srcs, to_off(position), true, ec);
}

std::uint64_t FileChannel::position() const {
  off_t p = ::lseek(fd(), 0, append_ ? SEEK_END : SEEK_CUR);
  if (p < 0) throw_errno("lseek");
  return static_cast<std::uint64_t>(p);
}

FileChannel& FileChannel::position(std::uint64_t new_position) {
  if (::lseek(fd(), to_off(new_position), SEEK_SET) < 0) throw_errno("lseek");
  return *this;
}

std::uint64_t FileChannel::size() const {
  struct stat st;
  if (::fstat(fd(), &st) < 0) throw_errno("fstat");
  return static_cast<std::uint64_t>(st.st_size);
}

FileChannel& FileChannel::truncate(std::uint64_t new_size) {
  if (is_open() && !writable_) throw NonWritableChannelException();
  if (new_size < size()) {
    int rc;
    do {
      rc = ::ftruncate(fd(), to_off(new_size));
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) throw_errno("ftruncate");
  }
  if (!append_ && position() > new_size) {
    position(new_size);
  }
  return *this;
}

void FileChannel::force(bool metadata) {
  int rc;
  do {
    rc = metadata ? ::fsync(fd()) : ::fdatasync(fd());
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) throw_errno(metadata ? "fsync" : "fdatasync");
}

// ---- Mapping -------------------------------------------------------------------------------

ByteBuffer FileChannel::map(MapMode mode, std::uint64_t position, std::uint64_t size) {
  if (!is_open()) {
    throw std::system_error(std::make_error_code(std::errc::bad_file_descriptor), "map");
  }
  if (!readable_) throw NonReadableChannelException();
  if (mode == MapMode::read_write && !writable_) throw NonWritableChannelException();
  if (size > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max()) - position) {
    throw IllegalArgumentException("position + size overflows");
  }
  if (size == 0) {
    return ByteBuffer::allocate(0);
  }
  if (mode == MapMode::read_write && position + size > this->size()) {
    if (::ftruncate(fd(), to_off(position + size)) < 0) throw_errno("ftruncate");
  }
  static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t start = position & ~(page - 1);
  const std::size_t delta = static_cast<std::size_t>(position - start);
  const std::size_t length = static_cast<std::size_t>(size) + delta;
  int prot = mode == MapMode::read_only ? PROT_READ : PROT_READ | PROT_WRITE;
  int flags = mode == MapMode::private_copy ? MAP_PRIVATE : MAP_SHARED;
  void* addr = ::mmap(nullptr, length, prot, flags, fd(), to_off(start));
  if (addr == MAP_FAILED) throw_errno("mmap");
  std::shared_ptr<void> owner(addr, [length](void* p) { ::munmap(p, length); });
  auto* base = static_cast<std::byte*>(addr) + delta;
  ByteBuffer b = ByteBuffer::wrap_shared(std::span<std::byte>(base, static_cast<std::size_t>(size)),
                                         std::move(owner));
  return mode == MapMode::read_only ? b.as_read_only_buffer() : b;
}

// ---- Locking -------------------------------------------------------------------------------

FileLock FileChannel::lock(std::uint64_t position, std::uint64_t size, bool shared) {
  if (is_open() && shared && !readable_) throw NonReadableChannelException();
  if (is_open() && !shared && !writable_) throw NonWritableChannelException();
  flock fl = make_flock(shared ? F_RDLCK : F_WRLCK, position, size);
  int rc;
  do {
    rc = ::fcntl(fd(), F_OFD_SETLKW, &fl);
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) throw_errno("lock");
  return FileLock(fd_, position, size, shared);
}

std::optional<FileLock> FileChannel::try_lock(std::uint64_t position, std::uint64_t size,
                                              bool shared) {
  if (is_open() && shared && !readable_) throw NonReadableChannelException();
  if (is_open() && !shared && !writable_) throw NonWritableChannelException();
  flock fl = make_flock(shared ? F_RDLCK : F_WRLCK, position, size);
  if (::fcntl(fd(), F_OFD_SETLK, &fl) < 0) {
    if (errno == EAGAIN || errno == EACCES) {
      return std::nullopt;
    }
    throw_errno("try_lock");
  }
  return FileLock(fd_, position, size, shared);
}

}  // namespace niox
