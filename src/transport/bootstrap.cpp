#include <niox/transport/bootstrap.hpp>
#include <niox/transport/transport_error.hpp>

#include "transport/log.hpp"

#include <stdexcept>

namespace niox {

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
      : options_(std::move(options)), child_handler_(std::move(child_handler)) {}

  void channel_read(ChannelHandlerContext& ctx, Message msg) override {
    auto* p = msg.get_if<std::shared_ptr<LoopSocketChannel>>();
    if (p == nullptr) {
      ctx.fire_channel_read(std::move(msg));
      return;
    }
    std::shared_ptr<LoopSocketChannel> child = *p;
    child->event_loop().execute([child, options = options_, handler = child_handler_] {
      try {
        child->apply_options(options);
        child->pipeline().add_last(handler);
      } catch (...) {
        log(LogLevel::warn, "channel {}: setting up an accepted channel failed: {}", child->id(),
            detail::describe(std::current_exception()));
        child->close();
        return;
      }
      if (child->is_open()) {
        child->start_accepted();
      }
    });
  }

  void exception_caught(ChannelHandlerContext& ctx, std::exception_ptr cause) override {
    // Accept errors (EMFILE...) are transient: log, keep the listener open.
    log(LogLevel::warn, "channel {}: accept failed: {}", ctx.channel().id(),
        detail::describe(cause));
  }

 private:
  ChannelOptions options_;
  std::shared_ptr<ChannelHandler> child_handler_;
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

BootstrapFuture ServerBootstrap::bind(const SocketAddress& local) const {
  if (boss_ == nullptr || worker_ == nullptr) {
    throw std::logic_error("ServerBootstrap::bind: no group set");
  }
  if (!child_handler_) {
    throw std::logic_error("ServerBootstrap::bind: no child handler set");
  }
  EventLoop& loop = boss_->next();
  EventLoopGroup* worker = worker_;
  auto server =
      LoopServerSocketChannel::create(loop, [worker]() -> EventLoop& { return worker->next(); });
  ChannelPromise promise = server->new_promise();
  loop.execute([server, local, promise, options = options_, child_options = child_options_,
                handler = handler_, child_handler = child_handler_]() mutable {
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
  return BootstrapFuture(promise.future(), server);
}

}  // namespace niox
