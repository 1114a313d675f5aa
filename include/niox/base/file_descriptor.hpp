// niox::FileDescriptor — the one owner of a file descriptor in niox (Seastar's file_desc).
//
// Who owns the number.  A FileDescriptor is the sole owner of one open descriptor, or of none
// (-1, "invalid"). It closes the descriptor when it is destroyed, reset() or close()d, and
// never otherwise. get() lends the number: whoever receives it must not close it and must not
// use it after the owner let go of it. release() hands the number back to the caller, who then
// owns it as a plain int. Sharing goes through std::shared_ptr<FileDescriptor> (a FileChannel
// and its FileLocks, the copies of a FileRegion): the shared object is still the one owner.
//
// Move.  Moving transfers ownership; the moved-from object is invalid (-1) and may be reused.
// Move assignment closes what the target owned first. There is no copy: dup() makes a second,
// independent descriptor (F_DUPFD_CLOEXEC) of the same open file.
//
// Close errors.  close() returns the error close(2) reported (EIO, ENOSPC on some network file
// systems: data written earlier may be lost) and leaves the object invalid in every case:
// Linux frees the number before it reports anything, also for EINTR, so the call is never
// retried — a retry could close a number another thread has just been given. The destructor
// and reset() close the same way and drop the error; call close() where it matters.
//
// The loop rule.  A descriptor that has been used with an EventLoop (any read, write, accept,
// poll ... on it) must be closed through that loop, EventLoop::close(FileDescriptor), which
// takes it over, aborts what is still pending on it and only then closes it. Closed any other
// way, a completion still in flight for the old descriptor could be delivered after the kernel
// handed the same number to a new one. The file of a transfer is the exception: a transfer_to
// belongs to its output descriptor, a transfer_from to its socket. EventLoop::release(const
// FileDescriptor&) makes the loop forget a descriptor that stays open (given to another
// library, for instance).
#pragma once

#include <filesystem>
#include <system_error>
#include <utility>

#include <sys/types.h>

namespace niox {

class FileDescriptor {
 public:
  // Owns nothing.
  FileDescriptor() noexcept = default;
  // Takes ownership of `fd` (-1 or any negative value: owns nothing). The descriptor should be
  // O_CLOEXEC. Owned until this object (or the one it is moved to) closes or releases it.
  explicit FileDescriptor(int fd) noexcept : fd_(fd < 0 ? -1 : fd) {}

  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  // Closes what this object owned, then takes over `other`'s descriptor.
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  // Closes the descriptor if one is owned; a close error is dropped.
  ~FileDescriptor() { reset(); }

  // open(2) with O_CLOEXEC added to `flags`; the result owns the new descriptor. Throws
  // std::system_error (or sets ec and returns an invalid descriptor).
  static FileDescriptor open(const std::filesystem::path& path, int flags, mode_t mode = 0);
  static FileDescriptor open(const std::filesystem::path& path, int flags, mode_t mode,
                             std::error_code& ec) noexcept;

  // The number, still owned by this object (-1 when invalid).
  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }

  // Gives the number to the caller, who owns it from now on; this object becomes invalid.
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }
  // Closes the owned descriptor (dropping a close error) and takes ownership of `fd` instead.
  // Inline: an empty one (a completion's, a moved-from one) is dropped without a call.
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) close_quietly(fd_);
    fd_ = fd < 0 ? -1 : fd;
  }
  // Closes the owned descriptor and returns close(2)'s error; the object is invalid afterwards
  // whatever the result. EBADF when nothing was owned.
  std::error_code close() noexcept;
  // The throwing form: std::system_error with close(2)'s error; nothing owned is not an error.
  void close_or_throw();

  // A new descriptor for the same open file description (F_DUPFD_CLOEXEC), owned by the result;
  // this one is unchanged. Throws std::system_error, or sets ec and returns an invalid one.
  FileDescriptor dup() const;
  FileDescriptor dup(std::error_code& ec) const noexcept;

 private:
  // close(2), its error dropped and never retried (see the header).
  static void close_quietly(int fd) noexcept;

  int fd_ = -1;
};

}  // namespace niox
