// SocketChannel: a stream socket (TCP over IPv4/IPv6, or Unix-domain), blocking or not, like
// java.nio.channels.SocketChannel.
//
//   auto ch = SocketChannel::open(InetSocketAddress::loopback_v4(port));   // blocking connect
//   ch.set_option(StandardSocketOptions::tcp_nodelay, true);
//   std::array<ByteBuffer, 2> msg{header, body};
//   ch.write(msg);                                                         // one writev
//
// Writes never raise SIGPIPE: a write to a reset or closed peer fails with EPIPE/ECONNRESET.
// Differences from Java: open() without a family makes an IPv4 socket (not an IPv6 dual-stack
// one); open(remote) picks the family from the address.
#pragma once

#include <niox/channels/channel.hpp>
#include <niox/channels/selectable_channel.hpp>
#include <niox/channels/socket_address.hpp>
#include <niox/channels/socket_options.hpp>

#include <optional>

namespace niox {

class ServerSocketChannel;

class SocketChannel final : public SelectableChannel,
                            public virtual ByteChannel,
                            public virtual ScatteringByteChannel,
                            public virtual GatheringByteChannel,
                            public SocketOptionsMixin<SocketChannel> {
 public:
  // An unconnected socket of `family` (SOCK_CLOEXEC, blocking). Throws std::system_error.
  static SocketChannel open(ProtocolFamily family = ProtocolFamily::inet);
  // Opens a socket for remote's family and connects it (blocking).
  static SocketChannel open(const SocketAddress& remote);
  // Adopts a connected or unconnected stream socket, owned by the channel from the call on;
  // its blocking mode is read from the fd.
  static SocketChannel from_native(int fd) noexcept;

  // A closed channel (every operation fails with EBADF).
  SocketChannel() = default;
  // The moved-from channel is closed and owns nothing.
  SocketChannel(SocketChannel&&) noexcept;
  SocketChannel& operator=(SocketChannel&&) noexcept;
  ~SocketChannel() override = default;

  SocketChannel& bind(const SocketAddress& local);

  // Blocking: connects and returns true (throws on failure, closing the channel like Java).
  // Non-blocking: returns true if connected at once, false if the connection is pending
  // (finish it with finish_connect() once OP_CONNECT is selected).
  bool connect(const SocketAddress& remote);
  bool connect(const SocketAddress& remote, std::error_code& ec);
  // True once connected. Blocking: waits. Non-blocking: false while still pending. A failed
  // connection throws (or sets ec) and closes the channel. Throws NoConnectionPendingException
  // when no connect() was started.
  bool finish_connect();
  bool finish_connect(std::error_code& ec);
  bool is_connected() const noexcept { return state_ == State::connected; }
  bool is_connection_pending() const noexcept { return state_ == State::pending; }

  // Half-close: reads then return -1 / the peer sees end of stream.
  SocketChannel& shutdown_input();
  SocketChannel& shutdown_output();

  std::optional<SocketAddress> local_address() const;
  std::optional<SocketAddress> remote_address() const;

  using GatheringByteChannel::write;
  using ScatteringByteChannel::read;
  std::int64_t read(ByteBuffer& dst, std::error_code& ec) override;
  std::int64_t read(std::span<ByteBuffer> dsts, std::error_code& ec) override;
  std::int64_t write(ByteBuffer& src, std::error_code& ec) override;
  std::int64_t write(std::span<ByteBuffer> srcs, std::error_code& ec) override;

  int valid_ops() const noexcept override;
  int translate_ready_ops(std::uint32_t events, int interest) const noexcept override;

  bool is_open() const noexcept override { return SelectableChannel::is_open(); }
  void close() noexcept override;
  int native_handle() const noexcept override { return fd_.get(); }

 private:
  friend class ServerSocketChannel;
  enum class State { unconnected, pending, connected };
  SocketChannel(FileDescriptor fd, State state) noexcept;

  State state_ = State::unconnected;
};

}  // namespace niox
