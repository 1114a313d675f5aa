#include <niox/channels/server_socket_channel.hpp>
#include <niox/channels/socket_channel.hpp>

#include <niox/channels/selector.hpp>

#include "channels/fd_io.hpp"
#include "channels/socket.hpp"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

namespace niox {

// ---- SocketChannel ------------------------------------------------------------------------

SocketChannel::SocketChannel(FileDescriptor fd, State state) noexcept
    : SelectableChannel(std::move(fd)), state_(state) {}

SocketChannel::SocketChannel(SocketChannel&& other) noexcept
    : NioChannel(other), SelectableChannel(std::move(other)), state_(other.state_) {
  other.state_ = State::unconnected;
}

SocketChannel& SocketChannel::operator=(SocketChannel&& other) noexcept {
  if (this != &other) {
    SelectableChannel::operator=(std::move(other));
    state_ = other.state_;
    other.state_ = State::unconnected;
  }
  return *this;
}

using detail::Socket;

SocketChannel SocketChannel::open(ProtocolFamily family) {
  return SocketChannel(Socket::open(detail::family_domain(family), SOCK_STREAM),
                       State::unconnected);
}

SocketChannel SocketChannel::open(const SocketAddress& remote) {
  SocketChannel ch(Socket::open(remote.family(), SOCK_STREAM), State::unconnected);
  ch.connect(remote);
  return ch;
}

SocketChannel SocketChannel::from_native(int fd) noexcept {
  State state = Socket(fd).has_peer() ? State::connected : State::unconnected;
  return SocketChannel(FileDescriptor(fd), state);
}

void SocketChannel::close() noexcept {
  state_ = State::unconnected;
  SelectableChannel::close();
}

SocketChannel& SocketChannel::bind(const SocketAddress& local) {
  Socket(fd_.get()).bind_or_throw(local);
  return *this;
}

bool SocketChannel::connect(const SocketAddress& remote) {
  std::error_code ec;
  bool done = connect(remote, ec);
  if (ec) {
    throw std::system_error(ec, "connect " + remote.to_string());
  }
  return done;
}

bool SocketChannel::connect(const SocketAddress& remote, std::error_code& ec) {
  ec.clear();
  if (state_ == State::connected) {
    throw AlreadyConnectedException();
  }
  if (state_ == State::pending) {
    throw ConnectionPendingException();
  }
  std::error_code done = Socket(fd_.get()).connect(remote);
  if (!done) {
    state_ = State::connected;
    return true;
  }
  int e = done.value();
  if (e == EINPROGRESS || e == EINTR) {
    // EINTR: the kernel goes on connecting in the background, exactly as after EINPROGRESS.
    state_ = State::pending;
    return blocking_ ? finish_connect(ec) : false;
  }
  ec = detail::errno_code(e);
  if (e != EBADF) {
    close();  // Java closes a channel whose connection failed
  }
  return false;
}

bool SocketChannel::finish_connect() {
  std::error_code ec;
  bool done = finish_connect(ec);
  if (ec) {
    throw std::system_error(ec, "finish_connect");
  }
  return done;
}

bool SocketChannel::finish_connect(std::error_code& ec) {
  ec.clear();
  if (state_ == State::connected) {
    return true;
  }
  if (state_ != State::pending) {
    throw NoConnectionPendingException();
  }
  pollfd p{fd_.get(), POLLOUT, 0};
  int rc;
  do {
    rc = ::poll(&p, 1, blocking_ ? -1 : 0);
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) {
    ec = detail::errno_code();
    return false;
  }
  if (rc == 0) {
    return false;
  }
  if (auto err = Socket(fd_.get()).pending_error()) {
    ec = err;
    close();
    return false;
  }
  state_ = State::connected;
  return true;
}

// An unconnected socket has nothing to shut down: not an error (Java's behaviour).
SocketChannel& SocketChannel::shutdown_input() {
  if (auto ec = Socket(fd_.get()).shutdown(SHUT_RD); ec && ec != std::errc::not_connected) {
    throw std::system_error(ec, "shutdown_input");
  }
  return *this;
}

SocketChannel& SocketChannel::shutdown_output() {
  if (auto ec = Socket(fd_.get()).shutdown(SHUT_WR); ec && ec != std::errc::not_connected) {
    throw std::system_error(ec, "shutdown_output");
  }
  return *this;
}

std::optional<SocketAddress> SocketChannel::local_address() const {
  return Socket(fd_.get()).local_address();
}

std::optional<SocketAddress> SocketChannel::remote_address() const {
  return Socket(fd_.get()).remote_address();
}

std::int64_t SocketChannel::read(ByteBuffer& dst, std::error_code& ec) {
  return detail::read_into(fd_.get(), dst, -1, ec);
}

std::int64_t SocketChannel::read(std::span<ByteBuffer> dsts, std::error_code& ec) {
  return detail::scatter_read(fd_.get(), dsts, -1, ec);
}

std::int64_t SocketChannel::write(ByteBuffer& src, std::error_code& ec) {
  return detail::write_from(fd_.get(), detail::FdKind::socket, src, -1, blocking_, ec);
}

std::int64_t SocketChannel::write(std::span<ByteBuffer> srcs, std::error_code& ec) {
  return detail::gather_write(fd_.get(), detail::FdKind::socket, srcs, -1, blocking_, ec);
}

int SocketChannel::valid_ops() const noexcept {
  return SelectionKey::OP_READ | SelectionKey::OP_WRITE | SelectionKey::OP_CONNECT;
}

int SocketChannel::translate_ready_ops(std::uint32_t events, int interest) const noexcept {
  int ready = SelectableChannel::translate_ready_ops(events, interest);
  // Writable means "connected" while a connection is pending, "room to write" afterwards.
  if (state_ == State::pending) {
    ready &= ~SelectionKey::OP_WRITE;
  } else {
    ready &= ~SelectionKey::OP_CONNECT;
  }
  return ready;
}

// ---- ServerSocketChannel ------------------------------------------------------------------

ServerSocketChannel ServerSocketChannel::open(ProtocolFamily family) {
  return ServerSocketChannel(Socket::open(detail::family_domain(family), SOCK_STREAM));
}

ServerSocketChannel ServerSocketChannel::from_native(int fd) noexcept {
  return ServerSocketChannel(FileDescriptor(fd));
}

ServerSocketChannel& ServerSocketChannel::bind(const SocketAddress& local, int backlog) {
  Socket(fd_.get()).bind_or_throw(local);
  if (auto ec = Socket(fd_.get()).listen(backlog <= 0 ? SOMAXCONN : backlog)) {
    throw std::system_error(ec, "listen");
  }
  return *this;
}

std::optional<SocketChannel> ServerSocketChannel::accept() {
  std::error_code ec;
  auto ch = accept(ec);
  if (ec) {
    throw std::system_error(ec, "accept");
  }
  return ch;
}

std::optional<SocketChannel> ServerSocketChannel::accept(std::error_code& ec) {
  FileDescriptor fd = Socket(fd_.get()).accept(ec);
  if (!fd) {
    return std::nullopt;
  }
  return SocketChannel(std::move(fd), SocketChannel::State::connected);
}

std::optional<SocketAddress> ServerSocketChannel::local_address() const {
  return Socket(fd_.get()).local_address();
}

int ServerSocketChannel::valid_ops() const noexcept { return SelectionKey::OP_ACCEPT; }

}  // namespace niox
