// kv_server: an in-memory key-value store over the kv example's header/body protocol.
//   kv_server [--port P] [--bind ADDR] [--threads N] [--backend auto|io_uring|epoll]
#include "command_line.hpp"
#include "kv_server.hpp"
#include "server_program.hpp"

#include <niox/transport/bootstrap.hpp>

#include <iostream>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace niox;

examples::ServerOptions defaults() {
  examples::ServerOptions o;
  o.port = 7070;
  o.bind = "127.0.0.1";
  return o;
}

std::string usage() {
  return "usage: kv_server [--port P] [--bind ADDR] [--threads N] [--backend auto|io_uring|epoll]\n"
         "\n"
         "An in-memory key-value store: 16-byte header + body per message, pipelined.\n"
         "\n" +
         examples::server_options_usage(defaults(), 16) +
         "  --help        this text\n"
         "Stops on SIGINT or SIGTERM. Exit status: 0 after a signal, 1 cannot start, 2 usage error.\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  examples::ServerOptions o = defaults();
  examples::OptionReader reader(args);
  std::string error;
  while (reader.next()) {
    if (reader.is_help()) {
      std::cout << usage();
      return 0;
    }
    if (!examples::is_server_option(reader.name())) {
      error = reader.unknown();
    } else if (auto value = reader.value(error)) {
      examples::parse_server_option(reader.name(), *value, o, error);
    }
    if (!error.empty()) {
      std::cerr << "kv_server: " << error << "\n\n" << usage();
      return 2;
    }
  }
  kv::KvStore store;
  examples::ServerProgram p;
  p.program = "kv_server";
  p.options = o;
  p.own_acceptor = false;  // the workers accept too
  p.configure = [&store](ServerBootstrap& b, EventLoopGroup&) {
    b.child_option(channel_option::tcp_nodelay, true)
        .child_handler(std::make_shared<ChannelInitializer>(
            [&store](Channel& ch) { kv::init_server_pipeline(ch, store); }));
  };
  p.banner = [](const SocketAddress& bound, EventLoopGroup&) {
    return "kv_server listening on " + bound.to_string();
  };
  return examples::run_server(p);
}
