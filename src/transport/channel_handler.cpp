#include <niox/transport/channel.hpp>
#include <niox/transport/channel_handler.hpp>
#include <niox/transport/channel_pipeline.hpp>
#include <niox/transport/transport_error.hpp>

#include "transport/log.hpp"

namespace niox {

namespace detail {
std::string describe(const std::exception_ptr& e) {
  if (!e) {
    return "(no exception)";
  }
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "(unknown exception)";
  }
}

namespace {
std::error_code code_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::system_error& ex) {
    return ex.code();
  } catch (...) {
    return transport::Errc::handler_failed;
  }
}
}  // namespace
}  // namespace detail

// ---- ChannelHandler defaults: forward -----------------------------------------------------

void ChannelHandler::channel_active(ChannelHandlerContext& ctx) { ctx.fire_channel_active(); }
void ChannelHandler::channel_inactive(ChannelHandlerContext& ctx) { ctx.fire_channel_inactive(); }
void ChannelHandler::channel_read(ChannelHandlerContext& ctx, Message msg) {
  ctx.fire_channel_read(std::move(msg));
}
void ChannelHandler::channel_read_complete(ChannelHandlerContext& ctx) {
  ctx.fire_channel_read_complete();
}
void ChannelHandler::user_event_triggered(ChannelHandlerContext& ctx, std::any event) {
  ctx.fire_user_event_triggered(std::move(event));
}
void ChannelHandler::channel_writability_changed(ChannelHandlerContext& ctx) {
  ctx.fire_channel_writability_changed();
}
void ChannelHandler::exception_caught(ChannelHandlerContext& ctx, std::exception_ptr cause) {
  ctx.fire_exception_caught(std::move(cause));
}
void ChannelHandler::write(ChannelHandlerContext& ctx, Message msg, ChannelPromise promise) {
  ctx.write(std::move(msg), std::move(promise));
}
void ChannelHandler::flush(ChannelHandlerContext& ctx) { ctx.flush(); }
void ChannelHandler::read(ChannelHandlerContext& ctx) { ctx.read(); }
void ChannelHandler::close(ChannelHandlerContext& ctx, ChannelPromise promise) {
  ctx.close(std::move(promise));
}
void ChannelHandler::shutdown_output(ChannelHandlerContext& ctx, ChannelPromise promise) {
  ctx.shutdown_output(std::move(promise));
}

// ---- ChannelHandlerContext ----------------------------------------------------------------

Channel& ChannelHandlerContext::channel() const noexcept { return pipeline_->channel(); }
Executor& ChannelHandlerContext::executor() const noexcept { return channel().executor(); }
ChannelPromise ChannelHandlerContext::new_promise() const { return channel().new_promise(); }

ChannelHandlerContext& ChannelHandlerContext::fire_channel_active() {
  next_->invoke_channel_active();
  return *this;
}
ChannelHandlerContext& ChannelHandlerContext::fire_channel_inactive() {
  next_->invoke_channel_inactive();
  return *this;
}
ChannelHandlerContext& ChannelHandlerContext::fire_channel_read(Message msg) {
  next_->invoke_channel_read(std::move(msg));
  return *this;
}
ChannelHandlerContext& ChannelHandlerContext::fire_channel_read_complete() {
  next_->invoke_channel_read_complete();
  return *this;
}
ChannelHandlerContext& ChannelHandlerContext::fire_user_event_triggered(std::any event) {
  next_->invoke_user_event_triggered(std::move(event));
  return *this;
}
ChannelHandlerContext& ChannelHandlerContext::fire_channel_writability_changed() {
  next_->invoke_channel_writability_changed();
  return *this;
}
ChannelHandlerContext& ChannelHandlerContext::fire_exception_caught(std::exception_ptr cause) {
  next_->invoke_exception_caught(std::move(cause));
  return *this;
}

ChannelFuture ChannelHandlerContext::write(Message msg) {
  auto p = new_promise();
  write(std::move(msg), p);
  return p.future();
}
void ChannelHandlerContext::write(Message msg, ChannelPromise promise) {
  prev_->invoke_write(std::move(msg), std::move(promise));
}
ChannelFuture ChannelHandlerContext::write_and_flush(Message msg) {
  auto p = new_promise();
  write_and_flush(std::move(msg), p);
  return p.future();
}
void ChannelHandlerContext::write_and_flush(Message msg, ChannelPromise promise) {
  // Keep prev_ now, and keep it alive: the write may remove handlers.
  ChannelPipeline::Frame frame(*pipeline_);
  auto* target = prev_;
  target->invoke_write(std::move(msg), std::move(promise));
  target->invoke_flush();
}
ChannelHandlerContext& ChannelHandlerContext::flush() {
  prev_->invoke_flush();
  return *this;
}
ChannelHandlerContext& ChannelHandlerContext::read() {
  prev_->invoke_read();
  return *this;
}
ChannelFuture ChannelHandlerContext::close() {
  auto p = new_promise();
  close(p);
  return p.future();
}
void ChannelHandlerContext::close(ChannelPromise promise) {
  prev_->invoke_close(std::move(promise));
}
ChannelFuture ChannelHandlerContext::shutdown_output() {
  auto p = new_promise();
  shutdown_output(p);
  return p.future();
}
void ChannelHandlerContext::shutdown_output(ChannelPromise promise) {
  prev_->invoke_shutdown_output(std::move(promise));
}

// Invocations: a throwing inbound handler's exception goes to its own exception_caught; a
// throwing outbound handler fails the promise. The Frame keeps removed contexts alive until
// the outermost call returns.

#define NIOX_INVOKE_INBOUND(call)                \
  ChannelPipeline::Frame frame(*pipeline_);      \
  try {                                          \
    call;                                        \
  } catch (...) {                                \
    pass_exception_on(std::current_exception()); \
  }

void ChannelHandlerContext::pass_exception_on(std::exception_ptr cause) {
  // Netty: the throwing handler's own exception_caught sees it first.
  invoke_exception_caught(std::move(cause));
}

void ChannelHandlerContext::invoke_channel_active() {
  NIOX_INVOKE_INBOUND(handler_->channel_active(*this))
}
void ChannelHandlerContext::invoke_channel_inactive() {
  NIOX_INVOKE_INBOUND(handler_->channel_inactive(*this))
}
void ChannelHandlerContext::invoke_channel_read(Message msg) {
  NIOX_INVOKE_INBOUND(handler_->channel_read(*this, std::move(msg)))
}
void ChannelHandlerContext::invoke_channel_read_complete() {
  NIOX_INVOKE_INBOUND(handler_->channel_read_complete(*this))
}
void ChannelHandlerContext::invoke_user_event_triggered(std::any event) {
  NIOX_INVOKE_INBOUND(handler_->user_event_triggered(*this, std::move(event)))
}
void ChannelHandlerContext::invoke_channel_writability_changed() {
  NIOX_INVOKE_INBOUND(handler_->channel_writability_changed(*this))
}
#undef NIOX_INVOKE_INBOUND

void ChannelHandlerContext::invoke_exception_caught(std::exception_ptr cause) {
  ChannelPipeline::Frame frame(*pipeline_);
  try {
    handler_->exception_caught(*this, cause);
  } catch (...) {
    // Netty logs and drops here too: feeding it back could loop forever.
    detail::log_warn("handler '{}' threw from exception_caught: {} (while handling: {})", name_,
                     detail::describe(std::current_exception()), detail::describe(cause));
  }
}

void ChannelHandlerContext::invoke_write(Message msg, ChannelPromise promise) {
  ChannelPipeline::Frame frame(*pipeline_);
  try {
    handler_->write(*this, std::move(msg), promise);
  } catch (...) {
    promise.try_failure(detail::code_of(std::current_exception()));
  }
}
void ChannelHandlerContext::invoke_flush() {
  ChannelPipeline::Frame frame(*pipeline_);
  try {
    handler_->flush(*this);
  } catch (...) {
    pipeline_->fire_exception_caught(std::current_exception());
  }
}
void ChannelHandlerContext::invoke_read() {
  ChannelPipeline::Frame frame(*pipeline_);
  try {
    handler_->read(*this);
  } catch (...) {
    pipeline_->fire_exception_caught(std::current_exception());
  }
}
void ChannelHandlerContext::invoke_close(ChannelPromise promise) {
  ChannelPipeline::Frame frame(*pipeline_);
  try {
    handler_->close(*this, promise);
  } catch (...) {
    promise.try_failure(detail::code_of(std::current_exception()));
  }
}
void ChannelHandlerContext::invoke_shutdown_output(ChannelPromise promise) {
  ChannelPipeline::Frame frame(*pipeline_);
  try {
    handler_->shutdown_output(*this, promise);
  } catch (...) {
    promise.try_failure(detail::code_of(std::current_exception()));
  }
}

}  // namespace niox
