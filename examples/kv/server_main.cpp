// kv_server: an in-memory key-value store over the kv example's header/body protocol. See --help.
#include "kv_server.hpp"
#include "command_line.hpp"
#include "server_program.hpp"

#include <niox/transport/bootstrap.hpp>
#include <niox/transport/ssl_handler.hpp>

#include <chrono>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

int main(int argc, char** argv) {
  using namespace niox;
  std::vector<std::string_view> args(argv + 1, argv + argc);
  auto parsed = kv::parse_server_args(args);
  if (auto status = examples::answer_help_or_error(parsed, "kv_server", kv::server_usage())) {
    return *status;
  }
  const auto& o = *parsed.options;
  kv::KvServerConfig config;
  config.idle_timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(o.idle_timeout_seconds));
  std::string error;
  auto tls = examples::server_tls_context(o, {}, error);
  if (!tls) {
    std::cerr << "kv_server: " << error << "\n";
    return 1;
  }
  kv::KvStore store;
  examples::ServerProgram p;
  p.program = "kv_server";
  p.options = o;
  p.own_acceptor = false;  // the workers accept too
  p.configure = [&store, config, ssl = *tls](ServerBootstrap& b, EventLoopGroup&) {
    b.child_option(channel_option::tcp_nodelay, true)
        .child_handler(std::make_shared<ChannelInitializer>([&store, config, ssl](Channel& ch) {
          if (ssl.is_valid()) {
            ch.pipeline().add_last("ssl", std::make_shared<SslHandler>(ssl.new_engine()));
          }
          kv::init_server_pipeline(ch, store, config);
        }));
  };
  p.banner = [](const SocketAddress& bound, EventLoopGroup&) {
    return "kv_server listening on " + bound.to_string();
  };
  return examples::run_server(p);
}
