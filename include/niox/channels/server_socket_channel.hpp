// ServerSocketChannel: a listening stream socket (TCP or Unix-domain), like
// java.nio.channels.ServerSocketChannel.
//
//   auto server = ServerSocketChannel::open();
//   server.set_option(StandardSocketOptions::so_reuseaddr, true);
//   server.bind(InetSocketAddress::loopback_v4(0), 128);
//   SocketChannel client = *server.accept();           // blocking: waits for one
#pragma once

#include <niox/channels/selectable_channel.hpp>
#include <niox/channels/socket_address.hpp>
#include <niox/channels/socket_channel.hpp>
#include <niox/channels/socket_options.hpp>

#include <optional>

namespace niox {

class ServerSocketChannel final : public SelectableChannel,
                                  public SocketOptionsMixin<ServerSocketChannel> {
 public:
  static ServerSocketChannel open(ProtocolFamily family = ProtocolFamily::inet);
  // Adopts a listening (or unbound) stream socket, owned by the channel from the call on.
  static ServerSocketChannel from_native(int fd) noexcept;

  ServerSocketChannel() = default;
  ServerSocketChannel(ServerSocketChannel&&) noexcept = default;
  ServerSocketChannel& operator=(ServerSocketChannel&&) noexcept = default;
  ~ServerSocketChannel() override = default;

  // Binds and listens. backlog <= 0 means SOMAXCONN. Port 0 picks a free port (see
  // local_address()).
  ServerSocketChannel& bind(const SocketAddress& local, int backlog = 0);

  // The next connection (a blocking SocketChannel, O_CLOEXEC), or nullopt when the channel is
  // non-blocking and none is pending. Errors such as EMFILE/ENFILE throw std::system_error (or
  // set ec) and leave the connection queued; they do not close this channel. Connections that
  // died while queued (ECONNABORTED) are skipped.
  std::optional<SocketChannel> accept();
  std::optional<SocketChannel> accept(std::error_code& ec);

  std::optional<SocketAddress> local_address() const;

  int valid_ops() const noexcept override;

 private:
  explicit ServerSocketChannel(FileDescriptor fd) noexcept : SelectableChannel(std::move(fd)) {}
};

}  // namespace niox
