#include <niox/transport/channel.hpp>
#include <niox/transport/idle_state_handler.hpp>

#include <algorithm>

namespace niox {

IdleStateHandler::IdleStateHandler(Duration reader_idle_time, Duration writer_idle_time,
                                   Duration all_idle_time)
    : reader_idle_(std::max(reader_idle_time, Duration::zero())),
      writer_idle_(std::max(writer_idle_time, Duration::zero())),
      all_idle_(std::max(all_idle_time, Duration::zero())) {}

IdleStateHandler::~IdleStateHandler() { destroy(); }

void IdleStateHandler::handler_added(ChannelHandlerContext& ctx) {
  if (ctx.channel().is_active()) {
    initialize(ctx);
  }
}

void IdleStateHandler::handler_removed(ChannelHandlerContext&) { destroy(); }

void IdleStateHandler::channel_active(ChannelHandlerContext& ctx) {
  initialize(ctx);
  ctx.fire_channel_active();
}

void IdleStateHandler::channel_inactive(ChannelHandlerContext& ctx) {
  destroy();
  ctx.fire_channel_inactive();
}

void IdleStateHandler::channel_read(ChannelHandlerContext& ctx, Message msg) {
  if (reader_idle_ > Duration::zero() || all_idle_ > Duration::zero()) {
    reading_ = true;
    first_reader_idle_ = true;
    shared_->first_all_idle = true;
  }
  ctx.fire_channel_read(std::move(msg));
}

void IdleStateHandler::channel_read_complete(ChannelHandlerContext& ctx) {
  if (reading_) {
    last_read_ = ctx.executor().now();
    reading_ = false;
  }
  ctx.fire_channel_read_complete();
}

void IdleStateHandler::write(ChannelHandlerContext& ctx, Message msg, ChannelPromise promise) {
  if (writer_idle_ == Duration::zero() && all_idle_ == Duration::zero()) {
    ctx.write(std::move(msg), std::move(promise));
    return;
  }
  if (!promise.valid()) {
    promise = ctx.new_promise();  // a void promise has no completion to observe
  }
  // The listener may outlive this handler: it holds only the shared timestamps.
  promise.future().add_listener(
      [shared = shared_, executor = &ctx.executor()](const std::error_code&) {
        shared->last_write = executor->now();
        shared->first_writer_idle = true;
        shared->first_all_idle = true;
      });
  ctx.write(std::move(msg), std::move(promise));
}

ScheduledFuture IdleStateHandler::schedule(ChannelHandlerContext& ctx, Duration delay,
                                           void (IdleStateHandler::*task)(ChannelHandlerContext&)) {
  // Timers are cancelled in destroy(), which runs before ctx or this handler go away.
  return ctx.executor().schedule(delay, [this, c = &ctx, task] { (this->*task)(*c); });
}

void IdleStateHandler::initialize(ChannelHandlerContext& ctx) {
  if (state_ != 0) {
    return;  // initialized already, or destroyed before (no restart, like Netty)
  }
  state_ = 1;
  auto now = ctx.executor().now();
  last_read_ = now;
  shared_->last_write = now;
  if (reader_idle_ > Duration::zero()) {
    reader_timer_ = schedule(ctx, reader_idle_, &IdleStateHandler::reader_timeout);
  }
  if (writer_idle_ > Duration::zero()) {
    writer_timer_ = schedule(ctx, writer_idle_, &IdleStateHandler::writer_timeout);
  }
  if (all_idle_ > Duration::zero()) {
    all_timer_ = schedule(ctx, all_idle_, &IdleStateHandler::all_timeout);
  }
}

void IdleStateHandler::destroy() noexcept {
  state_ = 2;
  reader_timer_.cancel();
  writer_timer_.cancel();
  all_timer_.cancel();
}

void IdleStateHandler::reader_timeout(ChannelHandlerContext& ctx) {
  if (state_ != 1) {
    return;
  }
  Duration next = reader_idle_;
  if (!reading_) {
    next -= ctx.executor().now() - last_read_;
  }
  fire_or_wait(ctx, next, reader_idle_, reader_timer_, &IdleStateHandler::reader_timeout,
               IdleState::reader_idle, first_reader_idle_);
}

void IdleStateHandler::writer_timeout(ChannelHandlerContext& ctx) {
  if (state_ != 1) {
    return;
  }
  Duration next = writer_idle_ - (ctx.executor().now() - shared_->last_write);
  fire_or_wait(ctx, next, writer_idle_, writer_timer_, &IdleStateHandler::writer_timeout,
               IdleState::writer_idle, shared_->first_writer_idle);
}

void IdleStateHandler::all_timeout(ChannelHandlerContext& ctx) {
  if (state_ != 1) {
    return;
  }
  Duration next = all_idle_;
  if (!reading_) {
    next -= ctx.executor().now() - std::max(last_read_, shared_->last_write);
  }
  fire_or_wait(ctx, next, all_idle_, all_timer_, &IdleStateHandler::all_timeout,
               IdleState::all_idle, shared_->first_all_idle);
}

void IdleStateHandler::fire_or_wait(ChannelHandlerContext& ctx, Duration left, Duration period,
                                    ScheduledFuture& timer,
                                    void (IdleStateHandler::*timeout)(ChannelHandlerContext&),
                                    IdleState state, bool& first) {
  if (left <= Duration::zero()) {
    timer = schedule(ctx, period, timeout);
    bool was_first = first;
    first = false;
    channel_idle(ctx, IdleStateEvent{state, was_first});
  } else {
    timer = schedule(ctx, left, timeout);
  }
}

void IdleStateHandler::channel_idle(ChannelHandlerContext& ctx, IdleStateEvent event) {
  ctx.fire_user_event_triggered(event);
}

void ReadTimeoutHandler::channel_idle(ChannelHandlerContext& ctx, IdleStateEvent event) {
  if (event.state != IdleState::reader_idle || closed_) {
    return;
  }
  closed_ = true;
  ctx.fire_exception_caught(std::make_exception_ptr(ReadTimeoutException()));
  ctx.close();
}

}  // namespace niox
