#include <niox/transport/channel.hpp>
#include <niox/transport/channel_pipeline.hpp>
#include <niox/transport/transport_error.hpp>

#include "transport/log.hpp"
#include "transport/run_on_loop.hpp"

#include <algorithm>
#include <utility>

namespace niox {

namespace detail {

// The head: inbound events pass through, outbound operations become the channel's transport
// operations.
class HeadHandler final : public ChannelHandler {
 public:
  void write(ChannelHandlerContext& ctx, Message&& msg, ChannelPromise promise) override {
    ctx.channel().unsafe_write(std::move(msg), std::move(promise));
  }
  void flush(ChannelHandlerContext& ctx) override { ctx.channel().unsafe_flush(); }
  void read(ChannelHandlerContext& ctx) override { ctx.channel().unsafe_read(); }
  void close(ChannelHandlerContext& ctx, ChannelPromise promise) override {
    ctx.channel().unsafe_close(std::move(promise));
  }
  void shutdown_output(ChannelHandlerContext& ctx, ChannelPromise promise) override {
    ctx.channel().unsafe_shutdown_output(std::move(promise));
  }
};

// The tail: what reaches it was not consumed by any handler; the channel decides (log and drop
// for a socket, collect for EmbeddedChannel).
class TailHandler final : public ChannelHandler {
 public:
  void channel_active(ChannelHandlerContext&) override {}
  void channel_inactive(ChannelHandlerContext&) override {}
  void channel_read_complete(ChannelHandlerContext&) override {}
  void channel_writability_changed(ChannelHandlerContext&) override {}
  void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
    ctx.channel().on_unhandled_inbound_message(std::move(msg));
  }
  void user_event_triggered(ChannelHandlerContext& ctx, std::any event) override {
    ctx.channel().on_unhandled_user_event(std::move(event));
  }
  void exception_caught(ChannelHandlerContext& ctx, std::exception_ptr cause) override {
    ctx.channel().on_unhandled_inbound_exception(std::move(cause));
  }
};

}  // namespace detail

namespace {
// The head and tail handlers keep no state: every pipeline shares one of each, owned by no
// control block (an aliasing shared_ptr without an owner), so a channel allocates neither.
template <class H>
std::shared_ptr<ChannelHandler> shared_stateless() {
  static H handler;
  return std::shared_ptr<ChannelHandler>(std::shared_ptr<void>(), &handler);
}
}  // namespace

ChannelPipeline::ChannelPipeline(Channel& channel)
    : channel_(&channel),
      head_ctx_(*this, shared_stateless<detail::HeadHandler>(), /*embedded=*/true),
      tail_ctx_(*this, shared_stateless<detail::TailHandler>(), /*embedded=*/true) {
  head_ctx_.next_ = &tail_ctx_;
  tail_ctx_.prev_ = &head_ctx_;
}

ChannelPipeline::~ChannelPipeline() { destroy(); }

void ChannelPipeline::destroy() noexcept {
  while (tail_ctx_.prev_ != &head_ctx_) {
    unlink(*tail_ctx_.prev_, /*teardown=*/true);
  }
  if (depth_ == 0) {
    release_removed();
  }
}

ChannelHandlerContext* ChannelPipeline::find(std::string_view name) const noexcept {
  for (auto* c = head_ctx_.next_; c != &tail_ctx_; c = c->next_) {
    if (c->name() == name) {
      return c;
    }
  }
  return nullptr;
}

ChannelHandlerContext* ChannelPipeline::find_live(const ChannelHandlerContext* ctx,
                                                  std::uint64_t serial) const noexcept {
  for (auto* c = head_ctx_.next_; c != &tail_ctx_; c = c->next_) {
    if (c == ctx && c->serial_ == serial) {
      return c;
    }
  }
  return nullptr;
}

ChannelHandlerContext& ChannelPipeline::get_context_or_throw(std::string_view name) const {
  auto* c = find(name);
  if (c == nullptr) {
    throw NoSuchElementException("no handler named '" + std::string(name) + "' in the pipeline");
  }
  return *c;
}

std::string ChannelPipeline::checked_name(std::string name) {
  if (name.empty()) {
    do {
      name = std::to_string(generated_names_++) + "#handler";
    } while (find(name) != nullptr);
    return name;
  }
  if (name == "head" || name == "tail" || find(name) != nullptr) {
    throw IllegalArgumentException("duplicate handler name: '" + name + "'");
  }
  return name;
}

ChannelHandlerContext* ChannelPipeline::link_after(ChannelHandlerContext* prev, std::string name,
                                                   std::shared_ptr<ChannelHandler> handler) {
  // Owned by the chain from here until unlink() hands it to removed_.
  auto* ctx = ChannelHandlerContext::create(*this, name, std::move(handler));
  ctx->prev_ = prev;
  ctx->next_ = prev->next_;
  prev->next_->prev_ = ctx;
  prev->next_ = ctx;
  return ctx;
}

void ChannelPipeline::announce_added(ChannelHandlerContext& ctx) {
  Frame frame(*this);
  try {
    ctx.handler_->handler_added(ctx);
  } catch (...) {
    // Netty removes a handler whose handler_added failed; the caller learns why.
    auto error = std::current_exception();
    try {
      unlink(ctx);
    } catch (...) {
    }
    std::rethrow_exception(error);
  }
}

template <class After>
ChannelPipeline& ChannelPipeline::add(After after, std::string name,
                                      std::shared_ptr<ChannelHandler> h) {
  if (detail::must_hop(*channel_)) {
    detail::run_on_loop_and_wait(*channel_, [&] { add(after, std::move(name), std::move(h)); });
    return *this;
  }
  if (!h) {
    throw IllegalArgumentException("null handler");
  }
  auto* prev = after();
  name = checked_name(std::move(name));
  announce_added(*link_after(prev, std::move(name), std::move(h)));
  return *this;
}

ChannelPipeline& ChannelPipeline::add_first(std::string name, std::shared_ptr<ChannelHandler> h) {
  return add([this] { return &head_ctx_; }, std::move(name), std::move(h));
}

ChannelPipeline& ChannelPipeline::add_last(std::string name, std::shared_ptr<ChannelHandler> h) {
  return add([this] { return tail_ctx_.prev_; }, std::move(name), std::move(h));
}

ChannelPipeline& ChannelPipeline::add_before(std::string_view base_name, std::string name,
                                             std::shared_ptr<ChannelHandler> h) {
  return add([this, base_name] { return get_context_or_throw(base_name).prev_; }, std::move(name),
             std::move(h));
}

ChannelPipeline& ChannelPipeline::add_after(std::string_view base_name, std::string name,
                                            std::shared_ptr<ChannelHandler> h) {
  return add([this, base_name] { return &get_context_or_throw(base_name); }, std::move(name),
             std::move(h));
}

std::shared_ptr<ChannelHandler> ChannelPipeline::unlink(ChannelHandlerContext& ctx, bool teardown) {
  // Neighbours skip ctx from now on; ctx keeps its own links so an event inside it goes on.
  ctx.prev_->next_ = ctx.next_;
  ctx.next_->prev_ = ctx.prev_;
  ctx.removed_ = true;
  std::unique_ptr<ChannelHandlerContext> owned(&ctx);
  auto handler = ctx.handler_;
  if (depth_ > 0) {
    // An event may be inside ctx: it goes when the last handler running returns.
    hold_removed(std::move(owned));
  }
  // Otherwise no handler of this pipeline is running, so no event is inside ctx: owned frees it
  // on return, once its handler_removed has run (a channel's teardown needs no removed_).
  Frame frame(*this);  // destroyed before owned: what handler_removed removes goes first
  try {
    handler->handler_removed(ctx);
  } catch (...) {
    if (!teardown) throw;
    // Reported here, while ctx (and so its name) still exists.
    log(LogLevel::warn, "handler_removed of '{}' threw during teardown: {}", ctx.name(),
        detail::describe(std::current_exception()));
  }
  return handler;
}

void ChannelPipeline::hold_removed(std::unique_ptr<ChannelHandlerContext> ctx) {
  using Many = std::vector<ChannelHandlerContext*>;
  if (removed_ == 0) {
    removed_ = reinterpret_cast<std::uintptr_t>(ctx.release());
    return;
  }
  try {
    Many* many;
    if ((removed_ & 1) != 0) {
      many = reinterpret_cast<Many*>(removed_ & ~std::uintptr_t{1});
    } else {
      auto made = std::make_unique<Many>();
      made->reserve(4);
      made->push_back(reinterpret_cast<ChannelHandlerContext*>(removed_));
      many = made.release();
      removed_ = reinterpret_cast<std::uintptr_t>(many) | 1;
    }
    many->push_back(ctx.get());
    (void)ctx.release();
  } catch (...) {
    // Out of memory: it cannot be freed now either; it stays allocated for good rather than
    // be freed under that event.
    (void)ctx.release();
  }
}

void ChannelPipeline::release_removed() noexcept {
  const std::uintptr_t held = std::exchange(removed_, 0);
  if ((held & 1) == 0) {
    delete reinterpret_cast<ChannelHandlerContext*>(held);  // null: nothing
    return;
  }
  std::unique_ptr<std::vector<ChannelHandlerContext*>> many(
      reinterpret_cast<std::vector<ChannelHandlerContext*>*>(held & ~std::uintptr_t{1}));
  for (ChannelHandlerContext* ctx : *many) delete ctx;
}

std::shared_ptr<ChannelHandler> ChannelPipeline::remove(std::string_view name) {
  if (detail::must_hop(*channel_)) {
    std::shared_ptr<ChannelHandler> removed;
    detail::run_on_loop_and_wait(*channel_, [&] { removed = remove(name); });
    return removed;
  }
  return unlink(get_context_or_throw(name));
}

ChannelPipeline& ChannelPipeline::remove(const ChannelHandler& handler) {
  if (detail::must_hop(*channel_)) {
    detail::run_on_loop_and_wait(*channel_, [&] { remove(handler); });
    return *this;
  }
  auto* ctx = context(handler);
  if (ctx == nullptr) {
    throw NoSuchElementException("handler is not in the pipeline");
  }
  unlink(*ctx);
  return *this;
}

std::shared_ptr<ChannelHandler> ChannelPipeline::replace(std::string_view old_name,
                                                         std::string new_name,
                                                         std::shared_ptr<ChannelHandler> h) {
  if (detail::must_hop(*channel_)) {
    std::shared_ptr<ChannelHandler> old;
    detail::run_on_loop_and_wait(
        *channel_, [&] { old = replace(old_name, std::move(new_name), std::move(h)); });
    return old;
  }
  if (!h) {
    throw IllegalArgumentException("null handler");
  }
  auto& old = get_context_or_throw(old_name);
  if (new_name != old.name()) {
    new_name = checked_name(std::move(new_name));
  }
  // Like Netty: the new handler is linked in and added before the old one is removed, so no
  // event can slip past both.
  auto* fresh = link_after(&old, std::move(new_name), std::move(h));
  Frame frame(*this);
  auto old_handler = unlink(old);
  announce_added(*fresh);
  return old_handler;
}

std::shared_ptr<ChannelHandler> ChannelPipeline::get(std::string_view name) const {
  auto* c = find(name);
  return c ? c->handler_ : nullptr;
}

ChannelHandlerContext* ChannelPipeline::context(std::string_view name) const noexcept {
  return find(name);
}

ChannelHandlerContext* ChannelPipeline::context(const ChannelHandler& handler) const noexcept {
  for (auto* c = head_ctx_.next_; c != &tail_ctx_; c = c->next_) {
    if (c->handler_.get() == &handler) {
      return c;
    }
  }
  return nullptr;
}

std::vector<std::string> ChannelPipeline::names() const {
  std::vector<std::string> out;
  for (auto* c = head_ctx_.next_; c != &tail_ctx_; c = c->next_) {
    out.emplace_back(c->name());
  }
  return out;
}

// Inbound events start after the head, whose handler only passes them on (as outbound
// operations start before the tail): a virtual call and a frame less for every read.
ChannelPipeline& ChannelPipeline::fire_channel_active() {
  head_ctx_.fire_channel_active();
  return *this;
}
ChannelPipeline& ChannelPipeline::fire_channel_inactive() {
  head_ctx_.fire_channel_inactive();
  return *this;
}
ChannelPipeline& ChannelPipeline::fire_channel_read(Message&& msg) {
  head_ctx_.fire_channel_read(std::move(msg));
  return *this;
}
ChannelPipeline& ChannelPipeline::fire_channel_read_complete() {
  head_ctx_.fire_channel_read_complete();
  return *this;
}
ChannelPipeline& ChannelPipeline::fire_user_event_triggered(std::any event) {
  head_ctx_.fire_user_event_triggered(std::move(event));
  return *this;
}
ChannelPipeline& ChannelPipeline::fire_channel_writability_changed() {
  head_ctx_.fire_channel_writability_changed();
  return *this;
}
ChannelPipeline& ChannelPipeline::fire_exception_caught(std::exception_ptr cause) {
  head_ctx_.fire_exception_caught(std::move(cause));
  return *this;
}

void ChannelPipeline::write(Message&& msg, ChannelPromise promise) {
  tail_ctx_.write(std::move(msg), std::move(promise));
}
void ChannelPipeline::write_and_flush(Message&& msg, ChannelPromise promise) {
  tail_ctx_.write_and_flush(std::move(msg), std::move(promise));
}
ChannelPipeline& ChannelPipeline::flush() {
  tail_ctx_.flush();
  return *this;
}
ChannelPipeline& ChannelPipeline::read() {
  tail_ctx_.read();
  return *this;
}
void ChannelPipeline::close(ChannelPromise promise) { tail_ctx_.close(std::move(promise)); }
void ChannelPipeline::shutdown_output(ChannelPromise promise) {
  tail_ctx_.shutdown_output(std::move(promise));
}

}  // namespace niox
