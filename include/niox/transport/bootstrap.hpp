// Bootstrap and ServerBootstrap: set up loop-backed socket channels (Netty's shape).
//
//   EventLoopGroup boss(1), workers(4);
//   ServerBootstrap sb;
//   sb.group(boss, workers)
//     .option(channel_option::so_backlog, 1024)
//     .child_option(channel_option::tcp_nodelay, true)
//     .child_handler(std::make_shared<ChannelInitializer>([](Channel& ch) {
//       ch.pipeline().add_last("echo", std::make_shared<EchoHandler>());
//     }));
//   BootstrapFuture bound = sb.bind(InetSocketAddress::loopback_v4(0));
//   bound.sync();   // waits; throws BlockingOperationException on a loop thread
//
// One listener per worker loop (nginx's `reuseport`, what Netty's epoll transport users build by
// hand): with option(channel_option::listener_per_loop, true), bind() opens one SO_REUSEPORT
// listening socket on every worker loop, all on the same port; the kernel spreads the
// connections over them and each loop keeps what it accepts, so no boss loop hands them out
// (the boss group is not used). IP addresses only.
//
// A bootstrap may be reused and copied. Channels may outlive their groups (their operations
// then fail with channel_closed, see channel.hpp).
// handler()/child_handler() instances are added to every channel created, so they must be
// shareable between pipelines — a ChannelInitializer is (it only runs its function).
#pragma once

#include <niox/channels/socket_address.hpp>
#include <niox/loop/event_loop_group.hpp>
#include <niox/transport/channel.hpp>
#include <niox/transport/channel_handler.hpp>
#include <niox/transport/channel_option.hpp>
#include <niox/transport/loop_socket_channel.hpp>

#include <functional>
#include <memory>
#include <system_error>

namespace niox {

class ChannelInitializer;
namespace detail {
void initialize(const ChannelInitializer& initializer, Channel& channel);
}  // namespace detail

// Runs `init(channel)` when added to a pipeline (on the channel's loop), then removes itself:
// the usual way to give every accepted channel its own handlers. As a ServerBootstrap's child
// handler it is never added: each accepted channel gets `init(channel)` straight away, which
// is all the adding and removing would do.
class ChannelInitializer : public ChannelHandler {
 public:
  using InitFunction = std::function<void(Channel&)>;
  explicit ChannelInitializer(InitFunction init) : init_(std::move(init)) {}
  void handler_added(ChannelHandlerContext& ctx) override;

 private:
  friend void detail::initialize(const ChannelInitializer&, Channel&);
  InitFunction init_;
};

// The outcome of bind()/connect() and the channel it created (null when no channel could be
// created, e.g. socket() failed).
class BootstrapFuture : public ChannelFuture {
 public:
  BootstrapFuture() = default;
  BootstrapFuture(ChannelFuture future, std::shared_ptr<Channel> channel)
      : ChannelFuture(std::move(future)), channel_(std::move(channel)) {}
  const std::shared_ptr<Channel>& channel() const noexcept { return channel_; }
  // ChannelFuture::sync(), returning this future (`bind(...).sync().channel()`).
  BootstrapFuture& sync() {
    ChannelFuture::sync();
    return *this;
  }
  BootstrapFuture& sync(std::error_code& ec) {
    ChannelFuture::sync(ec);
    return *this;
  }

 private:
  std::shared_ptr<Channel> channel_;
};

class Bootstrap {
 public:
  Bootstrap& group(EventLoopGroup& group) noexcept {
    group_ = &group;
    return *this;
  }
  template <class Option, class V>
  Bootstrap& option(const Option& opt, V&& value) {
    options_.set(opt, std::forward<V>(value));
    return *this;
  }
  Bootstrap& handler(std::shared_ptr<ChannelHandler> h) {
    handler_ = std::move(h);
    return *this;
  }
  const ChannelOptions& options() const noexcept { return options_; }

  // Opens a socket on the group's next loop, sets it up (options, then handler in the
  // pipeline) and connects it. Throws std::logic_error without a group.
  BootstrapFuture connect(const SocketAddress& remote) const;

 private:
  EventLoopGroup* group_ = nullptr;
  ChannelOptions options_;
  std::shared_ptr<ChannelHandler> handler_;
};

class ServerBootstrap {
 public:
  // Accepts on boss.next(); each connection goes to worker.next() for life.
  ServerBootstrap& group(EventLoopGroup& boss, EventLoopGroup& worker) noexcept {
    boss_ = &boss;
    worker_ = &worker;
    return *this;
  }
  ServerBootstrap& group(EventLoopGroup& both) noexcept { return group(both, both); }
  template <class Option, class V>
  ServerBootstrap& option(const Option& opt, V&& value) {
    options_.set(opt, std::forward<V>(value));
    return *this;
  }
  template <class Option, class V>
  ServerBootstrap& child_option(const Option& opt, V&& value) {
    child_options_.set(opt, std::forward<V>(value));
    return *this;
  }
  // For the listening channel's pipeline (sees accepted channels as they arrive).
  ServerBootstrap& handler(std::shared_ptr<ChannelHandler> h) {
    handler_ = std::move(h);
    return *this;
  }
  ServerBootstrap& child_handler(std::shared_ptr<ChannelHandler> h) {
    child_handler_ = std::move(h);
    return *this;
  }
  const ChannelOptions& options() const noexcept { return options_; }
  const ChannelOptions& child_options() const noexcept { return child_options_; }

  // Binds and listens. The channel is a LoopServerSocketChannel (channel()->local_address()
  // tells the port once done). Throws std::logic_error without a group or a child handler.
  //
  // With listener_per_loop the channel is the first worker loop's listener: it binds first (so
  // port 0 picks the port the others then share), the future completes once every listener
  // listens or fails with the first error (every listener then closed), and closing that
  // channel closes the others (each through its own loop, after the first's close completed).
  // Every listener runs the handler() given here in its own pipeline.
  BootstrapFuture bind(const SocketAddress& local) const;

 private:
  BootstrapFuture bind_per_loop(const SocketAddress& local) const;

  EventLoopGroup* boss_ = nullptr;
  EventLoopGroup* worker_ = nullptr;
  ChannelOptions options_;
  ChannelOptions child_options_;
  std::shared_ptr<ChannelHandler> handler_;
  std::shared_ptr<ChannelHandler> child_handler_;
};

}  // namespace niox
