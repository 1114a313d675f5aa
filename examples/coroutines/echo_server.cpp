// niox-coroutine-echo-server: every byte received goes back, one coroutine per connection.
//
//   niox-coroutine-echo-server [--port P] [--bind ADDR] [--threads N] [--backend B]
//
// The whole server is echo() and serve() below. Stops on SIGINT or SIGTERM: the signal stops
// the serving task's std::stop_token, which cancels the pending accept and, through the
// TaskGroup, every connection's pending read; serve() returns once they have all ended.
#include "command_line.hpp"
#include "server_program.hpp"

#include <niox/async/asynchronous_socket_channel.hpp>
#include <niox/async/spawn.hpp>
#include <niox/async/when_any.hpp>
#include <niox/base/log.hpp>
#include <niox/loop/event_loop_group.hpp>

#include <csignal>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sys/socket.h>

using namespace niox;
using namespace std::chrono_literals;

namespace {

// Errors end the connection quietly: a reset peer is normal, and a stop request (the error is
// then operation_aborted) ends it too.
Task<void> echo(AsynchronousSocketChannel ch) {
  std::error_code ec;
  ch.set_option(StandardSocketOptions::tcp_nodelay, true, ec);  // fails harmlessly on Unix
  for (;;) {
    // The loop takes a buffer when bytes arrive, so an idle connection holds none. Up to 64 KiB,
    // as niox's callback echo and the Asio peers read: a smaller limit makes a receive per
    // message out of what one receive takes when messages queue up.
    ByteBuffer buf = co_await ch.receive(64 * 1024, ec);
    if (ec || !buf.has_remaining()) break;  // empty: end of stream
    co_await ch.write(buf, ec);
    if (ec) break;
  }
}

Task<void> serve(AsynchronousServerSocketChannel& server, EventLoopGroup& loops) {
  TaskGroup connections;  // joined below: shutdown waits for every connection
  std::stop_token stop = co_await current_stop_token();
  while (!stop.stop_requested()) {
    std::error_code ec;
    AsynchronousSocketChannel ch = co_await server.accept(loops.next(), ec);
    if (!ec) {
      connections.spawn(echo(std::move(ch)));
    } else if (ec != operation_aborted()) {
      // Out of descriptors, say: the connection stays queued; try again shortly.
      log(LogLevel::warn, "niox-coroutine-echo-server: accept: {}", ec.message());
      co_await sleep_for(server.loop(), 10ms);
    }
  }
  connections.request_stop();
  co_await connections.join();
}

examples::ServerOptions defaults() {
  examples::ServerOptions o;
  o.port = 7007;  // niox-echo-server's
  return o;
}

std::string usage() {
  return "usage: niox-coroutine-echo-server [--port P] [--bind ADDR] [--threads N] "
         "[--backend auto|io_uring|epoll]\n"
         "\n"
         "Echoes every byte it receives: one coroutine per connection, on niox's asynchronous\n"
         "channels.\n"
         "\n" +
         examples::server_options_usage(defaults(), 17, /*allow_unix=*/true) +
         "  --help         this text\n"
         "\n"
         "Prints 'listening on ADDRESS' once bound; stops on SIGINT or SIGTERM.\n"
         "Exit status: 0 after a signal, 1 when the server cannot start, 2 on a usage error.\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  examples::ServerOptions o = defaults();
  std::string error;
  examples::OptionReader reader(args);
  while (reader.next() && error.empty()) {
    if (reader.is_help()) {
      std::cout << usage();
      return 0;
    }
    if (!examples::is_server_option(reader.name())) {
      error = reader.unknown();
      break;
    }
    auto value = reader.value(error);
    if (value) examples::parse_server_option(reader.name(), *value, o, error);
  }
  if (!error.empty()) {
    std::cerr << "niox-coroutine-echo-server: " << error << "\n\n" << usage();
    return 2;
  }
  SocketAddress where;
  try {
    where = examples::listen_address(o, /*allow_unix=*/true);
  } catch (const std::exception& e) {
    std::cerr << "niox-coroutine-echo-server: --bind: " << e.what() << "\n";
    return 2;
  }

  // Before any loop thread exists, so that every thread inherits the mask.
  const examples::StopSignals stop_signals;

  try {
    EventLoopGroup::Options g;
    g.threads = o.threads;
    g.loop.backend = o.backend;
    EventLoopGroup loops(g);
    EventLoop& acceptor = loops.loop(0);
    auto server = AsynchronousServerSocketChannel::open(
        acceptor, where.family() == AF_UNIX    ? ProtocolFamily::unix_domain
                  : where.family() == AF_INET6 ? ProtocolFamily::inet6
                                               : ProtocolFamily::inet);
    try {
      server.bind(where, 1024);
    } catch (const std::system_error& e) {
      std::cerr << "niox-coroutine-echo-server: cannot listen on " << where.to_string() << ": "
                << e.code().message() << "\n";
      return 1;
    }
    const examples::BoundSocketFile socket_file(where);
    auto local = server.local_address();
    std::cout << "listening on " << (local ? *local : where).to_string() << " (backend "
              << to_string(acceptor.backend()) << ", " << loops.size() << " threads)" << std::endl;

    std::stop_source stop;
    std::thread signals([&] {
      stop_signals.wait();
      stop.request_stop();
    });
    std::exception_ptr failed;
    try {
      sync_wait(with_stop_token(stop.get_token(), serve(server, loops)));
    } catch (...) {
      failed = std::current_exception();
    }
    if (!stop.stop_requested()) pthread_kill(signals.native_handle(), SIGTERM);  // ends sigwait
    signals.join();
    // The server socket closes on its loop before the loops stop.
    sync_wait([](AsynchronousServerSocketChannel& s) -> Task<void> {
      co_await resume_on(s.loop());
      s.close();
    }(server));
    loops.shutdown_gracefully();
    if (failed) std::rethrow_exception(failed);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "niox-coroutine-echo-server: " << e.what() << "\n";
    return 1;
  }
}
