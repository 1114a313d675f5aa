#include <niox/transport/bootstrap.hpp>
#include <niox/transport/transport_error.hpp>

#include "transport/log.hpp"

#include <atomic>
#include <stdexcept>
#include <typeinfo>
#include <vector>

#include <sys/socket.h>

namespace niox {

namespace detail {
void initialize(const ChannelInitializer& initializer, Channel& channel) {
  initializer.init_(channel);
}
}  // namespace detail

void ChannelInitializer::handler_added(ChannelHandlerContext& ctx) {
  auto& pipeline = ctx.pipeline();
  try {
    init_(ctx.channel());
  } catch (...) {
    log(LogLevel::warn, "channel {}: the channel initializer threw: {}", ctx.channel().id(),
        detail::describe(std::current_exception()));
    pipeline.remove(*this);
    ctx.channel().close();
    return;
  }
  pipeline.remove(*this);
}

namespace {

// Sits last in a server channel's pipeline and sets up each accepted channel on its own loop
// (Netty's ServerBootstrapAcceptor).
class ServerBootstrapAcceptor final : public ChannelInboundHandlerAdapter {
 public:
  ServerBootstrapAcceptor(ChannelOptions options, std::shared_ptr<ChannelHandler> child_handler)
      : setup_(std::make_shared<const ChildSetup>(std::move(options), std::move(child_handler))) {}

  void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
    auto* p = msg.get_if<std::shared_ptr<LoopSocketChannel>>();
    if (p == nullptr) {
      ctx.fire_channel_read(std::move(msg));
      return;
    }
    std::shared_ptr<LoopSocketChannel> child = *p;
    // A child of this very loop is set up right here, as Netty registers a channel of its own
    // loop: handing it over through execute() would cost a queued task per connection and
    // leave it unreadable until the next turn.
    if (child->event_loop().in_event_loop()) {
      setup_->apply(child);
      return;
    }
    // The task holds the set-up, not a copy of it: the options are some 400 bytes.
    child->event_loop().execute([child, setup = setup_] { setup->apply(child); });
  }

  void exception_caught(ChannelHandlerContext& ctx, std::exception_ptr cause) override {
    // Accept errors (EMFILE...) are transient: log, keep the listener open.
    log(LogLevel::warn, "channel {}: accept failed: {}", ctx.channel().id(),
        detail::describe(cause));
  }

 private:
  // What every accepted channel gets; fixed when the server channel is made.
  struct ChildSetup {
    ChildSetup(ChannelOptions o, std::shared_ptr<ChannelHandler> h)
        : options(std::move(o)),
          handler(std::move(h)),
          // A plain ChannelInitializer is never added: each channel gets its function straight
          // away, which is all adding and removing it would do.
          initializer(handler && typeid(*handler) == typeid(ChannelInitializer)
                          ? static_cast<const ChannelInitializer*>(handler.get())
                          : nullptr) {}

    void apply(const std::shared_ptr<LoopSocketChannel>& child) const {
      try {
        child->apply_options(options);
        if (initializer != nullptr) {
          detail::initialize(*initializer, *child);
        } else {
          child->pipeline().add_last(handler);
        }
      } catch (...) {
        log(LogLevel::warn, "channel {}: setting up an accepted channel failed: {}", child->id(),
            detail::describe(std::current_exception()));
        child->close();
        return;
      }
      if (child->is_open()) {
        child->start_accepted();
      }
    }

    ChannelOptions options;
    std::shared_ptr<ChannelHandler> handler;
    const ChannelInitializer* initializer;  // handler's, when it is a plain ChannelInitializer
  };

  std::shared_ptr<const ChildSetup> setup_;
};

}  // namespace

BootstrapFuture Bootstrap::connect(const SocketAddress& remote) const {
  if (group_ == nullptr) {
    throw std::logic_error("Bootstrap::connect: no group set");
  }
  EventLoop& loop = group_->next();
  std::shared_ptr<LoopSocketChannel> ch;
  try {
    ch = LoopSocketChannel::open(loop, remote.family());
  } catch (const std::system_error& e) {
    ChannelPromise failed(loop);
    failed.try_failure(e.code());
    return BootstrapFuture(failed.future(), nullptr);
  }
  ChannelPromise promise = ch->new_promise();
  loop.execute([ch, remote, promise, options = options_, handler = handler_]() mutable {
    try {
      ch->apply_options(options);
      if (handler) {
        ch->pipeline().add_last(handler);
      }
    } catch (const std::system_error& e) {
      promise.try_failure(e.code());
      ch->close();
      return;
    } catch (...) {
      promise.try_failure(transport::Errc::handler_failed);
      ch->close();
      return;
    }
    ch->connect(remote, promise);
  });
  return BootstrapFuture(promise.future(), ch);
}

namespace {

// Options Linux copies from a listening socket into each socket it accepts (they live in the
// socket the kernel clones for the connection). A child's value of one of these is set once,
// on the listener, instead of with a system call per connection; the rest stay per child.
bool passed_on_by_listener(const SocketOptionInfo* row) noexcept {
  return row == &StandardSocketOptions::tcp_nodelay ||
         row == &StandardSocketOptions::tcp_notsent_lowat ||
         row == &StandardSocketOptions::so_keepalive;
}

// Moves the child socket options a listener passes on from `child` into `listener` (where a
// child's value wins over the listener's own).
void give_listener_what_it_passes_on(ChannelOptions& listener, ChannelOptions& child) {
  const auto rows = child.socket_options;
  child.socket_options = {};
  for (const auto& [row, value] : rows) {
    if (row == nullptr) break;
    if (passed_on_by_listener(row))
      listener.set_socket_option(*row, value);
    else
      child.set_socket_option(*row, value);
  }
}

// Sets up `server`'s pipeline and binds it, on its loop; `promise` says how.
void listen_on(const std::shared_ptr<LoopServerSocketChannel>& server, EventLoop& loop,
               const SocketAddress& local, ChannelOptions options, ChannelOptions child_options,
               std::shared_ptr<ChannelHandler> handler,
               std::shared_ptr<ChannelHandler> child_handler, ChannelPromise promise) {
  give_listener_what_it_passes_on(options, child_options);
  loop.execute([server, local, promise, options = std::move(options),
                child_options = std::move(child_options), handler = std::move(handler),
                child_handler = std::move(child_handler)]() mutable {
    try {
      if (handler) {
        server->pipeline().add_last(handler);
      }
      server->pipeline().add_last(
          "acceptor", std::make_shared<ServerBootstrapAcceptor>(child_options, child_handler));
    } catch (...) {
      promise.try_failure(transport::Errc::handler_failed);
      server->close();
      return;
    }
    server->bind(local, options, promise);
  });
}

}  // namespace

BootstrapFuture ServerBootstrap::bind(const SocketAddress& local) const {
  if (boss_ == nullptr || worker_ == nullptr) {
    throw std::logic_error("ServerBootstrap::bind: no group set");
  }
  if (!child_handler_) {
    throw std::logic_error("ServerBootstrap::bind: no child handler set");
  }
  if (options_.listener_per_loop.value_or(false)) {
    return bind_per_loop(local);
  }
  EventLoop& loop = boss_->next();
  EventLoopGroup* worker = worker_;
  auto server =
      LoopServerSocketChannel::create(loop, [worker]() -> EventLoop& { return worker->next(); });
  ChannelPromise promise = server->new_promise();
  listen_on(server, loop, local, options_, child_options_, handler_, child_handler_, promise);
  return BootstrapFuture(promise.future(), server);
}

BootstrapFuture ServerBootstrap::bind_per_loop(const SocketAddress& local) const {
  using Listeners = std::vector<std::shared_ptr<LoopServerSocketChannel>>;
  Listeners listeners;
  for (std::size_t i = 0; i < worker_->size(); ++i) {
    // No chooser: a listener's connections stay on its loop.
    listeners.push_back(LoopServerSocketChannel::create(worker_->loop(i), {}));
  }
  std::shared_ptr<LoopServerSocketChannel> first = listeners.front();
  ChannelPromise all = first->new_promise();
  if (local.family() == AF_UNIX) {
    all.try_failure(std::make_error_code(std::errc::address_family_not_supported));
    return BootstrapFuture(all.future(), first);
  }
  ChannelOptions options = options_;
  options.set(channel_option::so_reuseport, true);

  // The others close when the first does. Only they are captured: the first's own close
  // promise holding the first would keep it alive for ever.
  Listeners others(listeners.begin() + 1, listeners.end());
  first->close_future().add_listener([others](const std::error_code&) {
    for (const auto& l : others) {
      l->close();
    }
  });

  // A failed bind fails only once every listener is closed: whoever learns of the failure
  // finds none of them open (a listener already bound on another loop closes there).
  auto failing = std::make_shared<std::atomic<bool>>(false);
  auto fail = [listeners, all, failing](const std::error_code& ec) {
    if (failing->exchange(true)) {
      return;
    }
    auto left = std::make_shared<std::atomic<std::size_t>>(listeners.size());
    for (const auto& l : listeners) {
      l->close().add_listener([left, all, ec](const std::error_code&) mutable {
        if (left->fetch_sub(1) == 1) {
          all.try_failure(ec);
        }
      });
    }
  };
  ChannelPromise first_bound = first->new_promise();
  first_bound.future().add_listener([=, this_options = options, child_options = child_options_,
                                     handler = handler_, child_handler = child_handler_](
                                        const std::error_code& ec) mutable {
    if (ec) {
      fail(ec);
      return;
    }
    if (others.empty()) {
      all.try_success();
      return;
    }
    // Port 0 was resolved by the first listener: the others take the same one.
    const SocketAddress bound = *first->local_address();
    auto left = std::make_shared<std::atomic<std::size_t>>(others.size());
    for (const auto& l : others) {
      ChannelPromise p = l->new_promise();
      p.future().add_listener([left, all, fail](const std::error_code& ec) mutable {
        if (ec) {
          fail(ec);
        } else if (left->fetch_sub(1) == 1) {
          all.try_success();
        }
      });
      listen_on(l, l->event_loop(), bound, this_options, child_options, handler, child_handler, p);
    }
  });
  listen_on(first, first->event_loop(), local, options, child_options_, handler_, child_handler_,
            first_bound);
  return BootstrapFuture(all.future(), first);
}

}  // namespace niox
