#include <niox/transport/channel.hpp>
#include <niox/transport/channel_inbound_queue.hpp>

#include <niox/buffer/buffer_exceptions.hpp>
#include <niox/loop/executor.hpp>

#include <utility>

namespace niox {

ChannelInboundQueue::ChannelInboundQueue(std::size_t capacity) : capacity_(capacity) {
  if (capacity == 0) {
    throw IllegalArgumentException("ChannelInboundQueue: the capacity must be positive");
  }
}

void ChannelInboundQueue::handler_added(ChannelHandlerContext& ctx) { ctx_ = &ctx; }

void ChannelInboundQueue::handler_removed(ChannelHandlerContext&) {
  ctx_ = nullptr;
  ended_ = true;
  wake();
}

void ChannelInboundQueue::channel_read(ChannelHandlerContext& ctx, Message&& msg) {
  messages_.push_back(std::move(msg));
  if (messages_.size() >= capacity_ && !paused_ && ctx.channel().config().is_auto_read()) {
    paused_ = true;
    ctx.channel().config().set_auto_read(false);
  }
  wake();
}

void ChannelInboundQueue::channel_inactive(ChannelHandlerContext& ctx) {
  ended_ = true;
  wake();
  ctx.fire_channel_inactive();
}

void ChannelInboundQueue::user_event_triggered(ChannelHandlerContext& ctx, std::any event) {
  if (std::any_cast<ChannelInputShutdownEvent>(&event) != nullptr) {
    ended_ = true;
    wake();
  }
  ctx.fire_user_event_triggered(std::move(event));
}

void ChannelInboundQueue::exception_caught(ChannelHandlerContext&, std::exception_ptr cause) {
  if (!error_) {
    error_ = std::move(cause);
  }
  wake();
}

void ChannelInboundQueue::wake() {
  if (!waiter_ || ctx_ == nullptr) {
    if (waiter_ && ctx_ == nullptr) {
      // Removed from the pipeline: resume here, nothing else will.
      std::exchange(waiter_, {}).resume();
    }
    return;
  }
  // Later, from the loop: not inside the pipeline event that brought the message.
  ctx_->executor().execute([h = std::exchange(waiter_, {})] { h.resume(); });
}

bool ChannelInboundQueue::NextAwaiter::await_ready() const {
  if (q_->ctx_ != nullptr && !q_->ctx_->channel().in_event_loop()) {
    throw IllegalStateException(
        "niox: ChannelInboundQueue::next() off the channel's loop thread; co_await "
        "resume_on(channel.executor()) first");
  }
  return !q_->messages_.empty() || q_->ended_ || q_->error_ != nullptr;
}

std::optional<Message> ChannelInboundQueue::take() {
  if (!messages_.empty()) {
    Message m = std::move(messages_.front());
    messages_.pop_front();
    if (paused_ && messages_.size() < capacity_ && ctx_ != nullptr) {
      paused_ = false;
      ctx_->channel().config().set_auto_read(true);
    }
    return m;
  }
  if (error_) {
    std::rethrow_exception(std::exchange(error_, nullptr));
  }
  return std::nullopt;
}

}  // namespace niox
