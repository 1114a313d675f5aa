// ChannelHandler and ChannelHandlerContext (Netty's, with snake_case names).
//
// One handler class carries both the inbound and the outbound methods; each default forwards the
// event to the next handler, so a handler overrides only what it cares about and is "inbound",
// "outbound" or both (Netty's ChannelDuplexHandler) by what it overrides. The adapters below
// exist for Netty users' muscle memory.
//
// Threads: every method runs on the channel's executor thread. The outbound calls of a
// ChannelHandlerContext may also be made from any other thread (they hop to the loop, see
// channel.hpp); the rest of the context is for the loop thread.
// Ownership: the pipeline holds each handler by shared_ptr; a handler added to several pipelines
// must itself be safe for that (Netty's @Sharable). A Message given to a method belongs to the
// handler: pass it on with std::move, take what it holds, or leave it, and whoever made it
// releases it once the event has run. It comes by rvalue reference, not by value, so the event
// moves it once, into the outbound buffer or wherever a handler keeps it, and not once per
// handler on the way: every outbound call of a context takes a Message&& too.
// Exceptions thrown from an inbound method are caught and delivered to the same handler's
// exception_caught() (Netty's behaviour; the default passes them on); thrown from
// write/close/shutdown_output they fail the promise (with the std::system_error's code, or
// Errc::handler_failed). A handler that throws from exception_caught() itself has its channel
// closed (after the exception is logged): nothing could handle it any more.
//
// Messages: a ByteBuffer handed to channel_read() belongs to the handler and is writable (the
// transport's receive buffer, or a decoder's frame over its own memory): a handler may change
// it in place and write it back, as an echo does.
#pragma once

#include <niox/transport/channel_future.hpp>
#include <niox/transport/message.hpp>

#include <any>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

namespace niox {

class Channel;
class ChannelPipeline;
class ChannelHandlerContext;

// The exception's message (what() of a std::exception), for logs and error replies:
// exception_message(cause) in exception_caught() needs no rethrow of its own.
std::string exception_message(const std::exception_ptr& cause);

class ChannelHandler {
 public:
  virtual ~ChannelHandler() = default;

  // Called after the handler entered / left a pipeline (on the executor thread).
  virtual void handler_added(ChannelHandlerContext&) {}
  virtual void handler_removed(ChannelHandlerContext&) {}

  // ---- Inbound: head -> tail -------------------------------------------------------------
  virtual void channel_active(ChannelHandlerContext& ctx);
  virtual void channel_inactive(ChannelHandlerContext& ctx);
  virtual void channel_read(ChannelHandlerContext& ctx, Message&& msg);
  virtual void channel_read_complete(ChannelHandlerContext& ctx);
  virtual void user_event_triggered(ChannelHandlerContext& ctx, std::any event);
  virtual void channel_writability_changed(ChannelHandlerContext& ctx);
  virtual void exception_caught(ChannelHandlerContext& ctx, std::exception_ptr cause);

  // ---- Outbound: tail -> head ------------------------------------------------------------
  virtual void write(ChannelHandlerContext& ctx, Message&& msg, ChannelPromise promise);
  virtual void flush(ChannelHandlerContext& ctx);
  virtual void read(ChannelHandlerContext& ctx);
  virtual void close(ChannelHandlerContext& ctx, ChannelPromise promise);
  virtual void shutdown_output(ChannelHandlerContext& ctx, ChannelPromise promise);
};

class ChannelInboundHandlerAdapter : public ChannelHandler {};
class ChannelOutboundHandlerAdapter : public ChannelHandler {};
class ChannelDuplexHandler : public ChannelHandler {};

// A handler's place in one pipeline. Valid from handler_added() until handler_removed() has
// returned and the event that was running at removal time (if any) has finished; a removed
// context still forwards events, like Netty's.
class ChannelHandlerContext {
 public:
  ChannelHandlerContext(const ChannelHandlerContext&) = delete;
  ChannelHandlerContext& operator=(const ChannelHandlerContext&) = delete;

  // Valid as long as the context is (see above).
  std::string_view name() const noexcept;
  ChannelHandler& handler() const noexcept { return *handler_; }
  ChannelPipeline& pipeline() const noexcept { return *pipeline_; }
  Channel& channel() const noexcept;
  Executor& executor() const noexcept;
  bool is_removed() const noexcept { return removed_; }

  // ---- Inbound: give the event to the next handler towards the tail ----------------------
  ChannelHandlerContext& fire_channel_active();
  ChannelHandlerContext& fire_channel_inactive();
  ChannelHandlerContext& fire_channel_read(Message&& msg);
  ChannelHandlerContext& fire_channel_read_complete();
  ChannelHandlerContext& fire_user_event_triggered(std::any event);
  ChannelHandlerContext& fire_channel_writability_changed();
  ChannelHandlerContext& fire_exception_caught(std::exception_ptr cause);

  // ---- Outbound: give the operation to the next handler towards the head -----------------
  ChannelFuture write(Message&& msg);
  void write(Message&& msg, ChannelPromise promise);
  ChannelFuture write_and_flush(Message&& msg);
  void write_and_flush(Message&& msg, ChannelPromise promise);
  ChannelHandlerContext& flush();
  ChannelHandlerContext& read();
  ChannelFuture close();
  void close(ChannelPromise promise);
  ChannelFuture shutdown_output();
  void shutdown_output(ChannelPromise promise);

  ChannelPromise new_promise() const;

  // A pipeline allocates a context and its name together, larger than the object: no sized
  // delete for it.
  static void operator delete(void* p) noexcept { ::operator delete(p); }

 private:
  friend class ChannelPipeline;
  // `embedded`: the pipeline's head or tail, which live inside it and have no name behind
  // them; every other context is made by create().
  ChannelHandlerContext(ChannelPipeline& pipeline, std::shared_ptr<ChannelHandler> handler,
                        bool embedded);
  // A context and its name in one allocation; `delete` frees both.
  static ChannelHandlerContext* create(ChannelPipeline& pipeline, std::string_view name,
                                       std::shared_ptr<ChannelHandler> handler);

  // From another thread: runs `op(ctx)` on the loop thread with this context, or `gone(channel)`
  // there if the context has left the pipeline by then. False when the loop is gone.
  template <class Op, class Gone>
  bool on_loop(Op&& op, Gone&& gone);
  // An operation completing `promise`: `op(ctx, promise, args...)` at once on the loop thread
  // (`args` forwarded, not copied), else through on_loop with `args` moved into the task
  // (`gone(channel, promise)` there instead); a dead loop fails the promise with channel_closed.
  template <class Op, class Gone, class... Args>
  void promised(ChannelPromise promise, Op&& op, Gone&& gone, Args&&... args);

  // Run this context's handler for an event, catching what it throws.
  void invoke_channel_active();
  void invoke_channel_inactive();
  void invoke_channel_read(Message&& msg);
  void invoke_channel_read_complete();
  void invoke_user_event_triggered(std::any event);
  void invoke_channel_writability_changed();
  void invoke_exception_caught(std::exception_ptr cause);
  void invoke_write(Message&& msg, ChannelPromise&& promise);
  void invoke_flush();
  void invoke_read();
  void invoke_close(ChannelPromise promise);
  void invoke_shutdown_output(ChannelPromise promise);
  void pass_exception_on(std::exception_ptr cause);

  // Every connection holds three of these (head, tail and its handler's), so they are kept
  // small: a handler's context keeps its name right behind it, in the same block (create()),
  // with no pointer to it; the pipeline's own two are "head" and "tail" (embedded_). The flags
  // share the serial's word.
  ChannelPipeline* pipeline_;
  std::shared_ptr<ChannelHandler> handler_;
  ChannelHandlerContext* prev_ = nullptr;
  ChannelHandlerContext* next_ = nullptr;
  std::uint64_t serial_ : 62;  // tells this context from a later one at the same address
  std::uint64_t removed_ : 1 = false;
  std::uint64_t embedded_ : 1 = false;  // the pipeline's head or tail: no name behind it
};

}  // namespace niox
