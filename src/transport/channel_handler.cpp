#include <niox/transport/channel.hpp>
#include <niox/transport/channel_handler.hpp>
#include <niox/transport/channel_pipeline.hpp>
#include <niox/transport/transport_error.hpp>

#include "transport/log.hpp"

#include <atomic>
#include <cstring>

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

std::string exception_message(const std::exception_ptr& cause) { return detail::describe(cause); }

// ---- ChannelHandler defaults: forward -----------------------------------------------------

void ChannelHandler::channel_active(ChannelHandlerContext& ctx) { ctx.fire_channel_active(); }
void ChannelHandler::channel_inactive(ChannelHandlerContext& ctx) { ctx.fire_channel_inactive(); }
void ChannelHandler::channel_read(ChannelHandlerContext& ctx, Message&& msg) {
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
void ChannelHandler::write(ChannelHandlerContext& ctx, Message&& msg, ChannelPromise promise) {
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

namespace {
std::atomic<std::uint64_t> next_context_serial{1};
}  // namespace

ChannelHandlerContext::ChannelHandlerContext(ChannelPipeline& pipeline,
                                             std::shared_ptr<ChannelHandler> handler, bool embedded)
    : pipeline_(&pipeline),
      handler_(std::move(handler)),
      serial_(next_context_serial.fetch_add(1, std::memory_order_relaxed)),
      embedded_(embedded) {}

std::string_view ChannelHandlerContext::name() const noexcept {
  if (embedded_) {
    return prev_ == nullptr ? "head" : "tail";  // the head has nothing before it, ever
  }
  return reinterpret_cast<const char*>(this + 1);
}

ChannelHandlerContext* ChannelHandlerContext::create(ChannelPipeline& pipeline,
                                                     std::string_view name,
                                                     std::shared_ptr<ChannelHandler> handler) {
  void* mem = ::operator new(sizeof(ChannelHandlerContext) + name.size() + 1);
  char* chars = static_cast<char*>(mem) + sizeof(ChannelHandlerContext);
  std::memcpy(chars, name.data(), name.size());
  chars[name.size()] = '\0';
  // Nothing below throws: the shared_ptr is moved in.
  return ::new (mem) ChannelHandlerContext(pipeline, std::move(handler), /*embedded=*/false);
}

template <class Op, class Gone>
bool ChannelHandlerContext::on_loop(Op&& op, Gone&& gone) {
  Channel& ch = channel();
  // The task holds the channel (and so the pipeline); the context is looked up again on the
  // loop, since it may have been removed and freed in between.
  Runnable task([self = ch.shared_from_this(), ctx = this, serial = serial_,
                 o = std::forward<Op>(op), g = std::forward<Gone>(gone)]() mutable {
    if (auto* c = self->pipeline().find_live(ctx, serial)) {
      o(*c);
    } else {
      g(*self);
    }
  });
  return ch.link_->execute(task);
}

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
ChannelHandlerContext& ChannelHandlerContext::fire_channel_read(Message&& msg) {
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

// Off the loop thread each outbound call hops there (on_loop); a context removed meanwhile
// fails a write with handler_removed and starts the other operations at the tail; a dead loop
// fails them with channel_closed.

template <class Op, class Gone, class... Args>
void ChannelHandlerContext::promised(ChannelPromise promise, Op&& op, Gone&& gone, Args&&... args) {
  if (channel().in_event_loop()) {
    op(*this, std::move(promise), std::forward<Args>(args)...);
    return;
  }
  if (!on_loop([o = std::forward<Op>(op), p = promise, ... a = std::forward<Args>(args)](
                   ChannelHandlerContext& c) mutable { o(c, std::move(p), std::move(a)...); },
               [g = std::forward<Gone>(gone), p = promise](Channel& ch) mutable {
                 g(ch, std::move(p));
               })) {
    promise.try_failure(transport::Errc::channel_closed);
  }
}

namespace {

void fail_removed(Channel&, ChannelPromise p) { p.try_failure(transport::Errc::handler_removed); }

}  // namespace

ChannelFuture ChannelHandlerContext::write(Message&& msg) {
  ChannelPromise p = new_promise();
  ChannelFuture f = p.future();
  write(std::move(msg), std::move(p));
  return f;
}
void ChannelHandlerContext::write(Message&& msg, ChannelPromise promise) {
  promised(
      std::move(promise),
      [](ChannelHandlerContext& c, ChannelPromise p, Message&& m) {
        c.prev_->invoke_write(std::move(m), std::move(p));
      },
      fail_removed, std::move(msg));
}
ChannelFuture ChannelHandlerContext::write_and_flush(Message&& msg) {
  ChannelPromise p = new_promise();
  ChannelFuture f = p.future();
  write_and_flush(std::move(msg), std::move(p));
  return f;
}
void ChannelHandlerContext::write_and_flush(Message&& msg, ChannelPromise promise) {
  promised(
      std::move(promise),
      [](ChannelHandlerContext& c, ChannelPromise p, Message&& m) {
        // Keep prev_ now, and keep it alive: the write may remove handlers.
        ChannelPipeline::Frame frame(*c.pipeline_);
        auto* target = c.prev_;
        target->invoke_write(std::move(m), std::move(p));
        target->invoke_flush();
      },
      fail_removed, std::move(msg));
}
ChannelHandlerContext& ChannelHandlerContext::flush() {
  if (channel().in_event_loop()) {
    prev_->invoke_flush();
  } else {
    on_loop([](ChannelHandlerContext& c) { c.prev_->invoke_flush(); },
            [](Channel& ch) { ch.pipeline().flush(); });
  }
  return *this;
}
ChannelHandlerContext& ChannelHandlerContext::read() {
  if (channel().in_event_loop()) {
    prev_->invoke_read();
  } else {
    on_loop([](ChannelHandlerContext& c) { c.prev_->invoke_read(); },
            [](Channel& ch) { ch.pipeline().read(); });
  }
  return *this;
}
ChannelFuture ChannelHandlerContext::close() {
  ChannelPromise p = new_promise();
  ChannelFuture f = p.future();
  close(std::move(p));
  return f;
}
void ChannelHandlerContext::close(ChannelPromise promise) {
  promised(
      std::move(promise),
      [](ChannelHandlerContext& c, ChannelPromise p) { c.prev_->invoke_close(std::move(p)); },
      [](Channel& ch, ChannelPromise p) { ch.pipeline().close(std::move(p)); });
}
ChannelFuture ChannelHandlerContext::shutdown_output() {
  ChannelPromise p = new_promise();
  ChannelFuture f = p.future();
  shutdown_output(std::move(p));
  return f;
}
void ChannelHandlerContext::shutdown_output(ChannelPromise promise) {
  promised(
      std::move(promise),
      [](ChannelHandlerContext& c, ChannelPromise p) {
        c.prev_->invoke_shutdown_output(std::move(p));
      },
      [](Channel& ch, ChannelPromise p) { ch.pipeline().shutdown_output(std::move(p)); });
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
void ChannelHandlerContext::invoke_channel_read(Message&& msg) {
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
    // Feeding it back could loop forever, and leaving the channel open would leave a
    // connection nothing handles any more: log it and close.
    log(LogLevel::warn,
        "channel {}: handler '{}' threw from exception_caught: {} (while handling: "
        "{}); closing the channel",
        channel().id(), name(), detail::describe(std::current_exception()),
        detail::describe(cause));
    channel().close_for_transport();
  }
}

void ChannelHandlerContext::invoke_write(Message&& msg, ChannelPromise&& promise) {
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
