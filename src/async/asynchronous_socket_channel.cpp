#include <niox/async/asynchronous_socket_channel.hpp>

#include "channels/fd_io.hpp"
#include "channels/socket.hpp"

#include <sys/socket.h>

namespace niox {

namespace {

using detail::Socket;

FileDescriptor open_stream(ProtocolFamily family) {
  return Socket::open(detail::family_domain(family), SOCK_STREAM, true);
}

void check(std::error_code ec, const char* what) {
  if (ec) throw std::system_error(ec, what);
}

}  // namespace

AsynchronousSocketChannel AsynchronousSocketChannel::open(EventLoop& loop, ProtocolFamily family) {
  return AsynchronousSocketChannel(loop, open_stream(family));
}

AsynchronousSocketChannel AsynchronousSocketChannel::adopt(EventLoop& loop, FileDescriptor fd) {
  std::error_code ec;
  detail::set_nonblocking(fd.get(), true, ec);
  check(ec, "adopt");
  return AsynchronousSocketChannel(loop, std::move(fd));
}

const std::shared_ptr<detail::ReceiveStream>& AsynchronousSocketChannel::receive_stream() {
  if (!rx_) {
    rx_ = std::allocate_shared<detail::ReceiveStream>(
        detail::CachedObjectAllocator<detail::ReceiveStream>(), fd_.loop());
  }
  return rx_;
}

AsynchronousSocketChannel& AsynchronousSocketChannel::bind(const SocketAddress& local) {
  Socket(fd_.get()).bind_or_throw(local);
  return *this;
}

AsynchronousSocketChannel& AsynchronousSocketChannel::shutdown_input() {
  check(Socket(fd_.get()).shutdown(SHUT_RD), "shutdown_input");
  return *this;
}

AsynchronousSocketChannel& AsynchronousSocketChannel::shutdown_output() {
  check(Socket(fd_.get()).shutdown(SHUT_WR), "shutdown_output");
  return *this;
}

std::optional<SocketAddress> AsynchronousSocketChannel::local_address() const {
  return Socket(fd_.get()).local_address();
}

std::optional<SocketAddress> AsynchronousSocketChannel::remote_address() const {
  return Socket(fd_.get()).remote_address();
}

AsynchronousServerSocketChannel AsynchronousServerSocketChannel::open(EventLoop& loop,
                                                                      ProtocolFamily family) {
  AsynchronousServerSocketChannel server(loop, open_stream(family));
  if (family != ProtocolFamily::unix_domain) {
    server.set_option(StandardSocketOptions::so_reuseaddr, true);
  }
  return server;
}

AsynchronousServerSocketChannel& AsynchronousServerSocketChannel::bind(const SocketAddress& local,
                                                                       int backlog) {
  Socket s(fd_.get());
  s.bind_or_throw(local);
  check(s.listen(backlog > 0 ? backlog : SOMAXCONN), "listen");
  return *this;
}

std::optional<SocketAddress> AsynchronousServerSocketChannel::local_address() const {
  return Socket(fd_.get()).local_address();
}

}  // namespace niox
