// kv_server: an in-memory key-value store over the kv example's header/body protocol.
//   kv_server [--port P] [--bind ADDR] [--threads N] [--backend auto|io_uring|epoll]
#include "kv_server.hpp"

#include <niox/transport/bootstrap.hpp>

#include <charconv>
#include <csignal>
#include <iostream>
#include <string>

#include <pthread.h>

namespace {

const char* usage =
    "usage: kv_server [--port P] [--bind ADDR] [--threads N] [--backend auto|io_uring|epoll]\n"
    "\n"
    "An in-memory key-value store: 16-byte header + body per message, pipelined.\n"
    "  --port P      TCP port (default 7070; 0 picks a free one, printed at start-up)\n"
    "  --bind ADDR   IPv4 or IPv6 address (default 127.0.0.1)\n"
    "  --threads N   event loops (default: one per CPU)\n"
    "  --backend B   auto, io_uring or epoll (default auto)\n"
    "Stops on SIGINT or SIGTERM. Exit status: 0 after a signal, 1 cannot start, 2 usage error.\n";

bool number(const std::string& s, unsigned long max, unsigned long& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && out <= max;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace niox;
  unsigned long port = 7070;
  unsigned long threads = 0;
  std::string bind = "127.0.0.1";
  BackendKind backend = BackendKind::automatic;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << usage;
      return 0;
    }
    if (i + 1 >= argc) {
      std::cerr << "kv_server: " << (a.rfind("--", 0) == 0 ? a + " needs a value" : "unexpected '" + a + "'")
                << "\n\n" << usage;
      return 2;
    }
    std::string v = argv[++i];
    bool ok = true;
    if (a == "--port") {
      ok = number(v, 65535, port);
    } else if (a == "--threads") {
      ok = number(v, 1024, threads);
    } else if (a == "--bind") {
      bind = v;
    } else if (a == "--backend") {
      if (v == "io_uring") backend = BackendKind::io_uring;
      else if (v == "epoll") backend = BackendKind::epoll;
      else ok = v == "auto";
    } else {
      ok = false;
    }
    if (!ok) {
      std::cerr << "kv_server: bad option " << a << " " << v << "\n\n" << usage;
      return 2;
    }
  }
  if (backend != BackendKind::automatic && !EventLoop::backend_available(backend)) {
    std::cerr << "kv_server: the " << to_string(backend) << " backend is not available\n";
    return 1;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  try {
    EventLoopGroup::Options go;
    go.threads = threads;
    go.loop.backend = backend;
    EventLoopGroup group(go);
    kv::KvStore store;
    ServerBootstrap b;
    b.group(group)
        .child_option(channel_option::tcp_nodelay, true)
        .child_handler(std::make_shared<ChannelInitializer>(
            [&store](Channel& ch) { kv::init_server_pipeline(ch, store); }));
    auto bound = b.bind(InetSocketAddress(bind, static_cast<std::uint16_t>(port)));
    if (auto ec = bound.await()) {
      std::cerr << "kv_server: cannot listen on " << bind << ":" << port << ": " << ec.message() << "\n";
      return 1;
    }
    auto server = std::static_pointer_cast<LoopServerSocketChannel>(bound.channel());
    std::cout << "kv_server listening on " << server->local_address()->to_string() << std::endl;
    int sig = 0;
    sigwait(&stop, &sig);
    await_future(server->close());
    group.shutdown_gracefully();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "kv_server: " << e.what() << "\n";
    return 1;
  }
}
