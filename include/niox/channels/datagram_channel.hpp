// DatagramChannel: a UDP (or Unix-domain datagram) socket, like
// java.nio.channels.DatagramChannel, with scatter/gather datagrams and truncation reported.
//
//   auto ch = DatagramChannel::open();
//   ch.bind(InetSocketAddress::loopback_v4(0));
//   if (auto got = ch.receive(buf)) { reply to got->source; got->truncated tells a lost tail }
//
// One call sends or receives exactly one datagram. A datagram larger than the buffers is
// truncated (the tail is lost, as in Java) and reported in DatagramReceived::truncated.
#pragma once

#include <niox/channels/channel.hpp>
#include <niox/channels/selectable_channel.hpp>
#include <niox/channels/socket_address.hpp>
#include <niox/channels/socket_options.hpp>

#include <cstddef>
#include <optional>

namespace niox {

struct DatagramReceived {
  std::size_t bytes = 0;          // stored into the buffers (their positions advanced by this)
  std::size_t datagram_size = 0;  // the datagram's size on the wire (> bytes when truncated)
  bool truncated = false;
  SocketAddress source;
};

class DatagramChannel final : public SelectableChannel,
                              public virtual ByteChannel,
                              public virtual ScatteringByteChannel,
                              public virtual GatheringByteChannel,
                              public SocketOptionsMixin<DatagramChannel> {
 public:
  static DatagramChannel open(ProtocolFamily family = ProtocolFamily::inet);
  // Adopts a datagram socket, owned by the channel from the call on.
  static DatagramChannel from_native(int fd) noexcept;

  DatagramChannel() = default;
  DatagramChannel(DatagramChannel&&) noexcept = default;
  DatagramChannel& operator=(DatagramChannel&&) noexcept = default;
  ~DatagramChannel() override = default;

  DatagramChannel& bind(const SocketAddress& local);
  // Only datagrams from `remote` are received afterwards; read/write become usable.
  DatagramChannel& connect(const SocketAddress& remote);
  DatagramChannel& disconnect();
  bool is_connected() const noexcept { return connected_; }

  // Receives one datagram into dst(s). nullopt when non-blocking and none is queued. A
  // connected channel may report ECONNREFUSED (an ICMP port unreachable for an earlier send);
  // the channel stays usable.
  std::optional<DatagramReceived> receive(ByteBuffer& dst);
  std::optional<DatagramReceived> receive(ByteBuffer& dst, std::error_code& ec);
  std::optional<DatagramReceived> receive(std::span<ByteBuffer> dsts);
  std::optional<DatagramReceived> receive(std::span<ByteBuffer> dsts, std::error_code& ec);

  // Sends the remaining bytes of src(s) as one datagram to `target` (one sendmsg). Returns the
  // bytes sent: all of them, or 0 when non-blocking and the socket buffer is full. A datagram
  // too large fails with EMSGSIZE.
  std::size_t send(ByteBuffer& src, const SocketAddress& target);
  std::size_t send(ByteBuffer& src, const SocketAddress& target, std::error_code& ec);
  std::size_t send(std::span<ByteBuffer> srcs, const SocketAddress& target);
  std::size_t send(std::span<ByteBuffer> srcs, const SocketAddress& target, std::error_code& ec);

  // Connected use: read returns the datagram's bytes stored (0 for an empty datagram or when
  // none is queued), write sends one datagram.
  using GatheringByteChannel::write;
  using ScatteringByteChannel::read;
  std::int64_t read(ByteBuffer& dst, std::error_code& ec) override;
  std::int64_t read(std::span<ByteBuffer> dsts, std::error_code& ec) override;
  std::int64_t write(ByteBuffer& src, std::error_code& ec) override;
  std::int64_t write(std::span<ByteBuffer> srcs, std::error_code& ec) override;

  std::optional<SocketAddress> local_address() const;
  std::optional<SocketAddress> remote_address() const;

  int valid_ops() const noexcept override;
  bool is_open() const noexcept override { return SelectableChannel::is_open(); }
  void close() noexcept override {
    connected_ = false;
    SelectableChannel::close();
  }
  int native_handle() const noexcept override { return fd_.get(); }

 private:
  explicit DatagramChannel(FileDescriptor fd) noexcept : SelectableChannel(std::move(fd)) {}
  std::optional<DatagramReceived> do_receive(std::span<ByteBuffer> dsts, std::error_code& ec);
  std::size_t do_send(std::span<ByteBuffer> srcs, const SocketAddress* target, std::error_code& ec);

  bool connected_ = false;
};

}  // namespace niox
