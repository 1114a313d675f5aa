// Private: what every asynchronous channel holds, a descriptor and the loop that closes it.
// Closing goes through the loop (EventLoop::close), which aborts what is pending on the
// descriptor first; from another thread the close is handed to the loop, and once the loop is
// gone (nothing of it can be pending any more) the descriptor simply closes.
#pragma once

#include <niox/base/file_descriptor.hpp>
#include <niox/loop/event_loop.hpp>
#include <niox/loop/executor.hpp>

#include <memory>

namespace niox::detail {

class LoopDescriptor {
 public:
  LoopDescriptor(EventLoop& loop, FileDescriptor fd) noexcept
      : loop_(&loop), link_(loop.link()), fd_(std::move(fd)) {}
  LoopDescriptor(LoopDescriptor&&) noexcept = default;
  LoopDescriptor& operator=(LoopDescriptor&& other) noexcept {
    if (this != &other) {
      close_soon();
      loop_ = other.loop_;
      link_ = std::move(other.link_);
      fd_ = std::move(other.fd_);
    }
    return *this;
  }
  ~LoopDescriptor() { close_soon(); }

  EventLoop& loop() const noexcept { return *loop_; }
  int get() const noexcept { return fd_.get(); }
  bool valid() const noexcept { return fd_.valid(); }
  // Loop thread only: aborts what is pending, closes.
  void close() {
    if (fd_.valid()) loop_->close(std::move(fd_));
  }

 private:
  void close_soon() noexcept;

  EventLoop* loop_;
  std::shared_ptr<ExecutorLink> link_;  // null once moved from
  FileDescriptor fd_;
};

}  // namespace niox::detail
