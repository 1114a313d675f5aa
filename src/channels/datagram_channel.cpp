#include <niox/channels/datagram_channel.hpp>

#include <niox/buffer/gather.hpp>
#include <niox/channels/selector.hpp>

#include "channels/fd_io.hpp"
#include "channels/socket.hpp"

#include <array>

#include <sys/socket.h>

namespace niox {

using detail::Socket;

DatagramChannel DatagramChannel::open(ProtocolFamily family) {
  return DatagramChannel(Socket::open(detail::family_domain(family), SOCK_DGRAM));
}

DatagramChannel DatagramChannel::from_native(int fd) noexcept {
  bool connected = Socket(fd).has_peer();
  DatagramChannel ch{FileDescriptor(fd)};
  ch.connected_ = connected;
  return ch;
}

DatagramChannel& DatagramChannel::bind(const SocketAddress& local) {
  Socket(fd_.get()).bind_or_throw(local);
  return *this;
}

DatagramChannel& DatagramChannel::connect(const SocketAddress& remote) {
  if (auto ec = Socket(fd_.get()).connect(remote)) {
    throw std::system_error(ec, "connect " + remote.to_string());
  }
  connected_ = true;
  return *this;
}

DatagramChannel& DatagramChannel::disconnect() {
  auto ec = Socket(fd_.get()).disconnect();
  if (ec && ec.value() != EAFNOSUPPORT) {
    throw std::system_error(ec, "disconnect");
  }
  connected_ = false;
  return *this;
}

std::optional<DatagramReceived> DatagramChannel::do_receive(std::span<ByteBuffer> dsts,
                                                            std::error_code& ec) {
  ec.clear();
  std::array<iovec, max_iovecs_per_call> iov;
  std::size_t n_iov = scatter_iovecs(dsts, iov);
  std::size_t room = 0;
  for (std::size_t i = 0; i < n_iov; ++i) {
    room += iov[i].iov_len;
  }
  sockaddr_storage ss{};
  msghdr msg{};
  msg.msg_name = &ss;
  msg.msg_namelen = sizeof ss;
  msg.msg_iov = iov.data();
  msg.msg_iovlen = n_iov;
  ssize_t n;
  do {
    // MSG_TRUNC: the result is the datagram's real size even when it did not fit.
    n = ::recvmsg(fd_.get(), &msg, MSG_TRUNC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (!detail::would_block(errno)) {
      ec = detail::errno_code();
    }
    return std::nullopt;
  }
  DatagramReceived r;
  r.datagram_size = static_cast<std::size_t>(n);
  r.bytes = std::min(r.datagram_size, room);
  r.truncated = (msg.msg_flags & MSG_TRUNC) != 0 || r.datagram_size > room;
  if (msg.msg_namelen > 0 && ss.ss_family != AF_UNSPEC) {
    r.source = SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), msg.msg_namelen);
  }
  advance(dsts, r.bytes);
  return r;
}

std::size_t DatagramChannel::do_send(std::span<ByteBuffer> srcs, const SocketAddress* target,
                                     std::error_code& ec) {
  ec.clear();
  std::array<iovec, max_iovecs_per_call> iov;
  std::size_t n_iov = gather_iovecs(srcs, iov);
  std::size_t total = 0;
  for (std::size_t i = 0; i < n_iov; ++i) {
    total += iov[i].iov_len;
  }
  if (total != total_remaining(srcs)) {
    // More pieces than one sendmsg takes: a datagram cannot be split.
    ec = std::make_error_code(std::errc::message_size);
    return 0;
  }
  sockaddr_storage ss;
  msghdr msg{};
  if (target != nullptr) {
    msg.msg_name = &ss;
    msg.msg_namelen = target->to_native(ss);
  }
  msg.msg_iov = iov.data();
  msg.msg_iovlen = n_iov;
  ssize_t n;
  do {
    n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (!detail::would_block(errno)) {
      ec = detail::errno_code();
    }
    return 0;
  }
  advance(srcs, static_cast<std::size_t>(n));
  return static_cast<std::size_t>(n);
}

std::optional<DatagramReceived> DatagramChannel::receive(ByteBuffer& dst) {
  return receive(std::span<ByteBuffer>(&dst, 1));
}
std::optional<DatagramReceived> DatagramChannel::receive(ByteBuffer& dst, std::error_code& ec) {
  return do_receive(std::span<ByteBuffer>(&dst, 1), ec);
}
std::optional<DatagramReceived> DatagramChannel::receive(std::span<ByteBuffer> dsts) {
  std::error_code ec;
  auto r = do_receive(dsts, ec);
  if (ec) {
    throw std::system_error(ec, "receive");
  }
  return r;
}
std::optional<DatagramReceived> DatagramChannel::receive(std::span<ByteBuffer> dsts,
                                                         std::error_code& ec) {
  return do_receive(dsts, ec);
}

std::size_t DatagramChannel::send(ByteBuffer& src, const SocketAddress& target) {
  return send(std::span<ByteBuffer>(&src, 1), target);
}
std::size_t DatagramChannel::send(ByteBuffer& src, const SocketAddress& target,
                                  std::error_code& ec) {
  return do_send(std::span<ByteBuffer>(&src, 1), &target, ec);
}
std::size_t DatagramChannel::send(std::span<ByteBuffer> srcs, const SocketAddress& target) {
  std::error_code ec;
  auto n = do_send(srcs, &target, ec);
  if (ec) {
    throw std::system_error(ec, "send to " + target.to_string());
  }
  return n;
}
std::size_t DatagramChannel::send(std::span<ByteBuffer> srcs, const SocketAddress& target,
                                  std::error_code& ec) {
  return do_send(srcs, &target, ec);
}

std::int64_t DatagramChannel::read(ByteBuffer& dst, std::error_code& ec) {
  return read(std::span<ByteBuffer>(&dst, 1), ec);
}
std::int64_t DatagramChannel::read(std::span<ByteBuffer> dsts, std::error_code& ec) {
  auto r = do_receive(dsts, ec);
  return r ? static_cast<std::int64_t>(r->bytes) : 0;
}
std::int64_t DatagramChannel::write(ByteBuffer& src, std::error_code& ec) {
  return write(std::span<ByteBuffer>(&src, 1), ec);
}
std::int64_t DatagramChannel::write(std::span<ByteBuffer> srcs, std::error_code& ec) {
  return static_cast<std::int64_t>(do_send(srcs, nullptr, ec));
}

std::optional<SocketAddress> DatagramChannel::local_address() const {
  return Socket(fd_.get()).local_address();
}
std::optional<SocketAddress> DatagramChannel::remote_address() const {
  return Socket(fd_.get()).remote_address();
}

int DatagramChannel::valid_ops() const noexcept {
  return SelectionKey::OP_READ | SelectionKey::OP_WRITE;
}

}  // namespace niox
