// niox-echo-server: every byte received goes back through a pipeline. See --help.
#include "echo_server.hpp"

#include "backpressure_handler.hpp"
#include "command_line.hpp"

#include <niox/loop/event_loop_group.hpp>
#include <niox/transport/bootstrap.hpp>
#include <niox/transport/ssl_handler.hpp>

#include <any>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace niox;

// Echoes each buffer (stateless: one serves every connection); BackpressureHandler stops
// reading while the peer does not take the echo. The channel allows half-closure: when the peer
// shuts its output down (EOF), everything it sent is still queued here or in flight, so the
// connection is closed once all of it has left (the FIN goes with the last echoed bytes).
class EchoHandler final : public BackpressureHandler {
 public:
  // Nobody waits for an echo's write: the void promise (a default ChannelPromise) costs nothing,
  // where ctx.write(msg) would make a future for each read.
  void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
    ctx.write(std::move(msg), ChannelPromise());
  }
  void user_event_triggered(ChannelHandlerContext& ctx, std::any event) override {
    if (std::any_cast<ChannelInputShutdownEvent>(&event) == nullptr) {
      ctx.fire_user_event_triggered(std::move(event));
      return;
    }
    ctx.channel().close_after_flush();
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = echo::parse_args(args);
  if (auto status = examples::answer_help_or_error(parsed, "niox-echo-server", echo::usage())) {
    return *status;
  }
  std::string error;
  auto tls = examples::server_tls_context(*parsed.options, {}, error);
  if (!tls) {
    std::cerr << "niox-echo-server: " << error << "\n";
    return 1;
  }
  examples::ServerProgram p;
  p.program = "niox-echo-server";
  p.options = *parsed.options;
  p.allow_unix = true;
  // EchoHandler keeps no state, so every connection, on every loop, shares one (Netty's
  // @Sharable): a connection holds only its context for it.
  p.configure = [ssl = *tls, echo = std::make_shared<EchoHandler>()](ServerBootstrap& b,
                                                                     EventLoopGroup&) {
    b.child_option(channel_option::tcp_nodelay, true)
        .child_option(channel_option::allow_half_closure, true)
        .child_handler(std::make_shared<ChannelInitializer>([ssl, echo](Channel& ch) {
          if (ssl.is_valid()) {
            ch.pipeline().add_last("ssl", std::make_shared<SslHandler>(ssl.new_engine()));
          }
          ch.pipeline().add_last("echo", echo);
        }));
  };
  p.banner = [](const SocketAddress& bound, EventLoopGroup& workers) {
    return "listening on " + bound.to_string() + " (backend " +
           std::string(to_string(workers.loop(0).backend())) + ", " +
           std::to_string(workers.size()) + " worker threads)";
  };
  return examples::run_server(p);
}
