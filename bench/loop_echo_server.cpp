// A minimal echo server on the raw EventLoop API: one loop, one thread, multishot accept, one
// reused buffer per connection (read some, write it all back, read again). Allocation-free once
// warm. Prints the loop's counters to stderr on SIGINT/SIGTERM.
//
//   niox_loop_echo_server --port 7000 [--backend io_uring|epoll|auto] [--buffer 65536]
#include <niox/buffer/byte_buffer.hpp>
#include <niox/loop/event_loop.hpp>

#include "backend_arg.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

struct Server {
  niox::EventLoop& loop;
  std::size_t buffer_size;
  std::size_t connections = 0;
  // The accepted connections, indexed by descriptor number (grown, never shrunk: no allocation
  // once warm); the handlers borrow the numbers.
  std::vector<niox::FileDescriptor> owned;

  void adopt(niox::FileDescriptor fd) {
    int n = fd.get();
    if (static_cast<std::size_t>(n) >= owned.size()) owned.resize(n + 1);
    owned[n] = std::move(fd);
    ++connections;
  }

  void echo(int fd, niox::ByteBuffer buf) {
    buf.clear();
    loop.read(fd, std::move(buf),
              [this, fd](std::error_code ec, std::size_t n, niox::ByteBuffer b) {
                if (ec || n == 0) return drop(fd);
                b.flip();
                loop.write(fd, std::move(b),
                           [this, fd](std::error_code wec, std::size_t, niox::ByteBuffer wb) {
                             if (wec) return drop(fd);
                             echo(fd, std::move(wb));
                           });
              });
  }
  void drop(int fd) {
    loop.close(std::move(owned[fd]));
    --connections;
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::uint16_t port = 7000;
  std::size_t buffer = 64 * 1024;
  niox::EventLoop::Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string_view k = argv[i], v = argv[i + 1];
    if (k == "--port")
      port = static_cast<std::uint16_t>(std::atoi(argv[i + 1]));
    else if (k == "--buffer")
      buffer = std::strtoul(argv[i + 1], nullptr, 10);
    else if (k == "--backend") {
      options.backend = backend_arg(v);
    } else {
      fmt::print(stderr, "usage: {} [--port N] [--backend io_uring|epoll|auto] [--buffer bytes]\n",
                 argv[0]);
      return 2;
    }
  }

  niox::EventLoop loop(options);
  niox::FileDescriptor listener(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  const int lfd = listener.get();
  int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(lfd, 1024) != 0) {
    fmt::print(stderr, "listen on 127.0.0.1:{}: {}\n", port, std::strerror(errno));
    return 1;
  }

  Server server{loop, buffer};
  loop.accept_multishot(lfd, [&](std::error_code ec, niox::FileDescriptor fd) {
    if (ec) {
      if (ec != std::errc::operation_canceled) fmt::print(stderr, "accept: {}\n", ec.message());
      return;
    }
    const int n = fd.get();
    ::setsockopt(n, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    server.adopt(std::move(fd));
    server.echo(n, niox::ByteBuffer::allocate(server.buffer_size));
  });

  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  niox::FileDescriptor signals(::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
  loop.poll(signals.get(), POLLIN, [&](std::error_code, int) { loop.stop(); });

  fmt::print("niox echo server on 127.0.0.1:{} backend={}\n", port, loop.backend());
  std::fflush(stdout);
  loop.run();
  fmt::print(stderr, "{}\n", loop.counters());
  for (auto& fd : server.owned) {
    if (fd) loop.close(std::move(fd));
  }
  loop.close(std::move(listener));
  loop.close(std::move(signals));
  return 0;
}
