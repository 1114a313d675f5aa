// ChannelInboundQueue: hands what reaches it in a pipeline to a coroutine, one `co_await next()`
// at a time, so that a coroutine can sit behind a decoder:
//
//   auto queue = std::make_shared<ChannelInboundQueue>(16);
//   ch.pipeline().add_last("frames", std::make_shared<LengthFieldBasedFrameDecoder>(...));
//   ch.pipeline().add_last("queue", queue);
//   ...
//   while (auto frame = co_await queue->next()) {       // on the channel's loop thread
//     co_await ch.write_and_flush(std::move(*frame));
//   }                                                    // std::nullopt: the input ended
//
// Backpressure: while `capacity` messages wait, reading stops (AUTO_READ off), so the kernel's
// buffers fill and the peer is pushed back; taking messages below the capacity turns reading on
// again. The end of the input (EOF, the channel going inactive) is std::nullopt after the
// messages already queued; an exception that reaches the queue is rethrown by next() after
// them. Messages are owned by the queue until next() hands them out.
//
// Threads: next() is awaited on the channel's loop thread (co_await resume_on(channel.executor())
// first); elsewhere it throws IllegalStateException. One coroutine awaits at a time. The
// waiting coroutine is resumed by a task on the loop, not from inside the pipeline event.
#pragma once

#include <niox/transport/channel_handler.hpp>
#include <niox/transport/message.hpp>

#include <coroutine>
#include <cstddef>
#include <deque>
#include <exception>
#include <optional>

namespace niox {

class ChannelInboundQueue : public ChannelInboundHandlerAdapter {
 public:
  explicit ChannelInboundQueue(std::size_t capacity = 16);

  void handler_added(ChannelHandlerContext& ctx) override;
  void handler_removed(ChannelHandlerContext& ctx) override;
  void channel_read(ChannelHandlerContext& ctx, Message&& msg) override;
  void channel_inactive(ChannelHandlerContext& ctx) override;
  void user_event_triggered(ChannelHandlerContext& ctx, std::any event) override;
  void exception_caught(ChannelHandlerContext& ctx, std::exception_ptr cause) override;

  class NextAwaiter {
   public:
    explicit NextAwaiter(ChannelInboundQueue& q) noexcept : q_(&q) {}
    bool await_ready() const;
    void await_suspend(std::coroutine_handle<> h) noexcept { q_->waiter_ = h; }
    std::optional<Message> await_resume() { return q_->take(); }

   private:
    ChannelInboundQueue* q_;
  };
  // The next message, std::nullopt once the input has ended and the queue is empty.
  NextAwaiter next() noexcept { return NextAwaiter(*this); }

  std::size_t size() const noexcept { return messages_.size(); }
  std::size_t capacity() const noexcept { return capacity_; }

 private:
  std::optional<Message> take();
  void wake();

  std::size_t capacity_;
  ChannelHandlerContext* ctx_ = nullptr;
  std::deque<Message> messages_;
  std::exception_ptr error_;
  bool ended_ = false;
  bool paused_ = false;  // we turned AUTO_READ off
  std::coroutine_handle<> waiter_;
};

}  // namespace niox
