#include <niox/transport/channel_future.hpp>

#include <condition_variable>

namespace niox {

const ChannelFuture& ChannelFuture::sync(std::error_code& ec) const {
  ec.clear();
  if (!state_) {
    return *this;
  }
  // Inside a running loop it is refused even when the outcome is already known, so that a
  // wait that only happened to work cannot hide in a handler.
  if (detail::on_loop_thread()) {
    throw BlockingOperationException(
        "niox: ChannelFuture::sync() on an event loop thread would block the loop; add a "
        "listener instead");
  }
  {
    std::lock_guard held(state_->lock);
    if (state_->done) {
      ec = state_->cause;
      return *this;
    }
  }
  if (state_->link->in_event_loop()) {
    throw BlockingOperationException(
        "niox: ChannelFuture::sync() on the thread that must complete the operation would "
        "wait forever; add a listener instead");
  }
  struct Waiter {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    std::error_code cause;
  };
  auto w = std::make_shared<Waiter>();
  ChannelFuture(*this).add_listener([w](const std::error_code& cause) {
    std::lock_guard lock(w->mutex);
    w->done = true;
    w->cause = cause;
    w->cv.notify_all();
  });
  std::unique_lock lock(w->mutex);
  w->cv.wait(lock, [&] { return w->done; });
  ec = w->cause;
  return *this;
}

const ChannelFuture& ChannelFuture::sync() const {
  std::error_code ec;
  sync(ec);
  if (ec) {
    throw std::system_error(ec);
  }
  return *this;
}

}  // namespace niox
