// niox-echo-server: every byte received goes back through a pipeline. See --help.
#include "echo_server.hpp"

#include <niox/loop/event_loop_group.hpp>
#include <niox/transport/bootstrap.hpp>

#include <csignal>
#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <thread>

#include <pthread.h>

namespace {

using namespace niox;

// Echoes each buffer; stops reading while the peer does not take the echo (writability), so a
// client that only sends cannot make the server queue without bound.
class EchoHandler final : public ChannelHandler {
 public:
  void channel_read(ChannelHandlerContext& ctx, Message msg) override { ctx.write(std::move(msg)); }
  void channel_read_complete(ChannelHandlerContext& ctx) override {
    ctx.flush();
    if (!ctx.channel().is_writable()) {
      ctx.channel().config().set_auto_read(false);
    }
  }
  void channel_writability_changed(ChannelHandlerContext& ctx) override {
    if (ctx.channel().is_writable()) {
      ctx.channel().config().set_auto_read(true);
    }
    ctx.fire_channel_writability_changed();
  }
  void exception_caught(ChannelHandlerContext& ctx, std::exception_ptr) override { ctx.close(); }
};

SocketAddress address_of(const echo::EchoServerOptions& o) {
  if (o.bind.rfind("unix:", 0) == 0) {
    return UnixDomainSocketAddress(o.bind.substr(5));
  }
  if (!o.bind.empty() && o.bind[0] == '/') {
    return UnixDomainSocketAddress(o.bind);
  }
  return InetSocketAddress(o.bind, o.port);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = echo::parse_args(args);
  if (parsed.help) {
    std::cout << echo::usage();
    return 0;
  }
  if (!parsed.options) {
    std::cerr << "niox-echo-server: " << parsed.error << "\n\n" << echo::usage();
    return 2;
  }
  const auto& o = *parsed.options;
  if (o.backend != BackendKind::automatic && !EventLoop::backend_available(o.backend)) {
    std::cerr << "niox-echo-server: the " << to_string(o.backend)
              << " backend is not available on this machine\n";
    return 1;
  }
  SocketAddress where;
  try {
    where = address_of(o);
  } catch (const std::exception& e) {
    std::cerr << "niox-echo-server: bad --bind address '" << o.bind << "': " << e.what() << "\n";
    return 2;
  }

  // Signals are taken by sigwait below; block them before any loop thread exists.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  try {
    EventLoopGroup::Options boss_options;
    boss_options.threads = 1;
    boss_options.loop.backend = o.backend;
    EventLoopGroup::Options worker_options;
    worker_options.threads = o.threads;
    worker_options.loop.backend = o.backend;
    EventLoopGroup boss(boss_options);
    EventLoopGroup workers(worker_options);

    ServerBootstrap b;
    b.group(boss, workers)
        .option(channel_option::so_backlog, 1024)
        .child_option(channel_option::tcp_nodelay, true)
        .child_handler(std::make_shared<ChannelInitializer>([](Channel& ch) {
          ch.pipeline().add_last("echo", std::make_shared<EchoHandler>());
        }));
    auto bound = b.bind(where);
    if (auto ec = bound.await()) {
      std::cerr << "niox-echo-server: cannot listen on " << where.to_string() << ": "
                << ec.message() << "\n";
      return 1;
    }
    auto server = std::static_pointer_cast<LoopServerSocketChannel>(bound.channel());
    std::cout << "listening on " << server->local_address()->to_string() << " (backend "
              << to_string(workers.loop(0).backend()) << ", " << workers.size()
              << " worker threads)" << std::endl;

    int sig = 0;
    sigwait(&stop_signals, &sig);
    await_future(server->close());
    workers.shutdown_gracefully();
    boss.shutdown_gracefully();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "niox-echo-server: " << e.what() << "\n";
    return 1;
  }
}
