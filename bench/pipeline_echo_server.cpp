// The echo server of the transport layer, for bench/run: a ServerBootstrap whose child
// pipeline holds one echo handler (write each received buffer back, flush once per read batch).
// Accepts and connections share one EventLoopGroup, one thread by default, to compare with
// niox_loop_echo_server (raw loop API) and the single-threaded peers.
//
//   niox_pipeline_echo_server --port 7000 [--threads 1] [--backend io_uring|epoll|auto]
//
// Stops on SIGINT/SIGTERM.
#include <niox/loop/event_loop_group.hpp>
#include <niox/transport/bootstrap.hpp>

#include "backend_arg.hpp"

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include <fmt/format.h>
#include <pthread.h>

namespace {

class EchoHandler final : public niox::ChannelHandler {
 public:
  void channel_read(niox::ChannelHandlerContext& ctx, niox::Message&& msg) override {
    ctx.write(std::move(msg), niox::ChannelPromise());  // nobody waits: the void promise
  }
  void channel_read_complete(niox::ChannelHandlerContext& ctx) override { ctx.flush(); }
  void exception_caught(niox::ChannelHandlerContext& ctx, std::exception_ptr) override {
    ctx.close();
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::uint16_t port = 7000;
  std::size_t threads = 1;
  niox::BackendKind backend = niox::BackendKind::automatic;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string_view k = argv[i], v = argv[i + 1];
    if (k == "--port") {
      port = static_cast<std::uint16_t>(std::atoi(argv[i + 1]));
    } else if (k == "--threads") {
      threads = std::strtoul(argv[i + 1], nullptr, 10);
    } else if (k == "--backend") {
      backend = backend_arg(v);
    } else {
      fmt::print(stderr, "usage: {} [--port N] [--threads N] [--backend io_uring|epoll|auto]\n",
                 argv[0]);
      return 2;
    }
  }
  if ((argc - 1) % 2 != 0) {
    fmt::print(stderr, "usage: {} [--port N] [--threads N] [--backend io_uring|epoll|auto]\n",
               argv[0]);
    return 2;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  try {
    niox::EventLoopGroup::Options go;
    go.threads = threads == 0 ? 1 : threads;
    go.loop.backend = backend;
    niox::EventLoopGroup group(go);
    niox::ServerBootstrap b;
    b.group(group)
        .option(niox::channel_option::so_backlog, 1024)
        .child_option(niox::channel_option::tcp_nodelay, true)
        .child_handler(std::make_shared<niox::ChannelInitializer>([](niox::Channel& ch) {
          ch.pipeline().add_last("echo", std::make_shared<EchoHandler>());
        }));
    auto bound = b.bind(niox::InetSocketAddress("127.0.0.1", port));
    std::error_code ec;
    if (bound.sync(ec); ec) {
      fmt::print(stderr, "niox_pipeline_echo_server: cannot listen on port {}: {}\n", port,
                 ec.message());
      return 1;
    }
    fmt::print(stderr, "niox_pipeline_echo_server: port {} backend {} threads {}\n", port,
               group.loop(0).backend(), group.size());
    int sig = 0;
    sigwait(&stop, &sig);
    bound.channel()->close().sync(ec);
    group.shutdown_gracefully();
  } catch (const std::exception& e) {
    fmt::print(stderr, "niox_pipeline_echo_server: {}\n", e.what());
    return 1;
  }
  return 0;
}
