// UniqueFd — sole owner of a file descriptor, closed on destruction, movable (the example
// programs' descriptor owner: the channels layer's FileChannel carries a whole Java API and the
// transport's FileHandle is shared and immovable, neither fits a plain owned descriptor).
#pragma once

#include <unistd.h>

#include <utility>

namespace niox::examples {

class UniqueFd {
 public:
  UniqueFd() noexcept = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset(std::exchange(o.fd_, -1));
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }
  // Gives up ownership without closing.
  int release() noexcept { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) {
      ::close(fd_);  // Linux always frees the descriptor, even on EINTR: never retry
    }
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace niox::examples
