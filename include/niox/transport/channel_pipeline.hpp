// ChannelPipeline: the chain of handlers every event of a Channel flows through.
//
// A channel owns exactly one pipeline for life. The pipeline is a doubly linked list of
// ChannelHandlerContexts between two fixed ends: the HEAD, which is where the transport injects
// inbound events and where outbound operations finally become transport operations, and the
// TAIL, which is where inbound events nobody consumed end (logged and dropped, so a forgotten
// codec shows up in the log instead of as a silent leak).
//
//                                       I/O request via Channel or ChannelHandlerContext
//                                                            |
//   +--------------------------------------------------------+----------------+
//   |                        ChannelPipeline                 |                |
//   |                                                        v                |
//   |   +------+    +-----------+    +-----------+    +-----------+    +------+|
//   |   | HEAD |--->| decoder   |--->| business  |--->|           |--->| TAIL ||
//   |   |      |    | (inbound) |    | (duplex)  |    |           |    |      ||
//   |   |      |<---|           |<---|           |<---| encoder   |<---|      ||
//   |   +------+    +-----------+    +-----------+    | (outbound)|    +------+|
//   |      ^  |                                       +-----------+           |
//   +------+--+---------------------------------------------------------------+
//          |  v
//   +------+--------------------------------------------------------------------+
//   |  read bytes, active,   |  Channel's transport operations: OutboundBuffer   |
//   |  inactive, errors      |  write/flush (gathering write), read, close ...   |
//   +---------------------------------------------------------------------------+
//
// Inbound events (channel_active, channel_read, channel_read_complete, channel_inactive,
// user_event_triggered, channel_writability_changed, exception_caught) start at the head and
// move towards the tail: each handler passes them on with ctx.fire_*(). Outbound operations
// (write, flush, read, close, shutdown_output) move from the tail towards the head: each handler
// passes them on with ctx.write() etc. Channel::write() starts at the tail (through every
// handler); ctx.write() starts at the handler in front of ctx, so a handler's own writes skip
// the handlers behind it — the same rule as Netty, and the reason an encoder must sit closer to
// the head than the handler that writes objects.
//
// Mutation: add_*/remove/replace may be called at any time on the executor thread, also from
// inside a handler method while an event travels the pipeline. From another thread they run on
// the executor and the caller waits for them (results and exceptions come back as usual; on
// another loop's thread the wait is refused with BlockingOperationException). A removed context keeps its links,
// so an event already inside it continues to the handler that followed it; its memory is
// released when the outermost event in flight returns. Names are unique in a pipeline:
// duplicates throw IllegalArgumentException, unknown names NoSuchElementException.
#pragma once

#include <niox/buffer/buffer_exceptions.hpp>
#include <niox/transport/channel_handler.hpp>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace niox {

// Java's java.util.NoSuchElementException: a handler name or type that is not in the pipeline.
class NoSuchElementException : public std::out_of_range {
 public:
  using std::out_of_range::out_of_range;
};

class ChannelPipeline {
 public:
  explicit ChannelPipeline(Channel& channel);
  ~ChannelPipeline();
  ChannelPipeline(const ChannelPipeline&) = delete;
  ChannelPipeline& operator=(const ChannelPipeline&) = delete;

  Channel& channel() const noexcept { return *channel_; }

  // ---- Mutation (an empty name means "generate one": <index>#handler) ---------------------
  ChannelPipeline& add_first(std::string name, std::shared_ptr<ChannelHandler> handler);
  ChannelPipeline& add_last(std::string name, std::shared_ptr<ChannelHandler> handler);
  ChannelPipeline& add_last(std::shared_ptr<ChannelHandler> handler) {
    return add_last(std::string(), std::move(handler));
  }
  ChannelPipeline& add_before(std::string_view base_name, std::string name,
                              std::shared_ptr<ChannelHandler> handler);
  ChannelPipeline& add_after(std::string_view base_name, std::string name,
                             std::shared_ptr<ChannelHandler> handler);
  // Removes the named handler and returns it.
  std::shared_ptr<ChannelHandler> remove(std::string_view name);
  ChannelPipeline& remove(const ChannelHandler& handler);
  // Puts `handler` under `new_name` in the place of `old_name`; returns the old handler.
  std::shared_ptr<ChannelHandler> replace(std::string_view old_name, std::string new_name,
                                          std::shared_ptr<ChannelHandler> handler);

  // ---- Lookup -----------------------------------------------------------------------------
  std::shared_ptr<ChannelHandler> get(std::string_view name) const;
  template <class H>
  std::shared_ptr<H> get(std::string_view name) const {
    return std::dynamic_pointer_cast<H>(get(name));
  }
  // The context of a handler, or null.
  ChannelHandlerContext* context(std::string_view name) const noexcept;
  ChannelHandlerContext* context(const ChannelHandler& handler) const noexcept;
  // User handler names from head to tail.
  std::vector<std::string> names() const;
  bool empty() const noexcept { return head_ctx_.next_ == &tail_ctx_; }

  // ---- Inbound events, entering at the head -----------------------------------------------
  ChannelPipeline& fire_channel_active();
  ChannelPipeline& fire_channel_inactive();
  ChannelPipeline& fire_channel_read(Message&& msg);
  ChannelPipeline& fire_channel_read_complete();
  ChannelPipeline& fire_user_event_triggered(std::any event);
  ChannelPipeline& fire_channel_writability_changed();
  ChannelPipeline& fire_exception_caught(std::exception_ptr cause);

  // ---- Outbound operations, entering at the tail ------------------------------------------
  void write(Message&& msg, ChannelPromise promise);
  void write_and_flush(Message&& msg, ChannelPromise promise);
  ChannelPipeline& flush();
  ChannelPipeline& read();
  void close(ChannelPromise promise);
  void shutdown_output(ChannelPromise promise);

 private:
  friend class ChannelHandlerContext;
  friend class Channel;

  // Counts handler invocations in flight so removed contexts are freed only when none is.
  struct Frame {
    explicit Frame(ChannelPipeline& p) noexcept : p_(p) { ++p_.depth_; }
    ~Frame() {
      if (--p_.depth_ == 0 && p_.removed_ != 0) {
        p_.release_removed();
      }
    }
    ChannelPipeline& p_;
  };

  ChannelHandlerContext* find(std::string_view name) const noexcept;
  // `ctx` if it is still one of this pipeline's user contexts (the same one: `serial` matches).
  ChannelHandlerContext* find_live(const ChannelHandlerContext* ctx,
                                   std::uint64_t serial) const noexcept;
  ChannelHandlerContext& get_context_or_throw(std::string_view name) const;
  std::string checked_name(std::string name);
  // A new context for `handler`, linked in after `prev`; its handler_added is not called yet.
  ChannelHandlerContext* link_after(ChannelHandlerContext* prev, std::string name,
                                    std::shared_ptr<ChannelHandler> handler);
  void announce_added(ChannelHandlerContext& ctx);
  // The add_* calls: `after` finds the neighbour on the loop thread, where the pipeline cannot
  // change under it.
  template <class After>
  ChannelPipeline& add(After after, std::string name, std::shared_ptr<ChannelHandler> handler);
  // Takes ctx out of the chain and calls its handler_removed, which may throw, unless
  // `teardown`: then that is reported through the log sink.
  std::shared_ptr<ChannelHandler> unlink(ChannelHandlerContext& ctx, bool teardown = false);
  void release_removed() noexcept;
  // Removes every user handler (handler_removed called), tail first. For channel teardown.
  void destroy() noexcept;

  Channel* channel_;
  // Inside the pipeline, not beside it: every connection has both, for life (and so no
  // pointers to them either). The chain head_ctx_ ... tail_ctx_ owns the user contexts between
  // them (no vector beside it: one allocation fewer per connection). unlink() frees a context
  // after its handler_removed, or, when a handler is running, hands it over to removed_.
  ChannelHandlerContext head_ctx_;
  ChannelHandlerContext tail_ctx_;
  // The removed contexts that wait for depth 0 to be freed. Most pipelines remove one handler
  // once (a ChannelInitializer, from inside its handler_added), so that one is held as it is,
  // with no allocation; only when more wait at once are they moved to a vector. The low bit
  // tells which (both are at least 8-aligned): 0 none, a ChannelHandlerContext*, or a
  // std::vector<ChannelHandlerContext*>* | 1. One word either way: every connection has it.
  std::uintptr_t removed_ = 0;
  void hold_removed(std::unique_ptr<ChannelHandlerContext> ctx);
  unsigned depth_ = 0;
  unsigned generated_names_ = 0;
};

}  // namespace niox
