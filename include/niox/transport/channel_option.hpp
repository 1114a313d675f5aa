// Channel options for the loop-backed socket transport (Netty's ChannelOption).
//
//   ServerBootstrap b;
//   b.option(channel_option::so_backlog, 1024)
//    .child_option(channel_option::tcp_nodelay, true)
//    .child_option(channel_option::write_buffer_water_mark, WriteBufferWaterMark{32 << 10, 64 << 10});
//
// The socket options are Netty's names for rows of the one option table, StandardSocketOptions
// (channels/socket_options.hpp; any of its rows may be set here too). They are applied when the
// socket is created (or accepted), each only where its row applies: on a Unix-domain socket
// TCP_NODELAY, TCP_NOTSENT_LOWAT, SO_REUSEADDR, SO_REUSEPORT and SO_KEEPALIVE are skipped. A
// ServerBootstrap sets the child options TCP_NODELAY, TCP_NOTSENT_LOWAT and SO_KEEPALIVE on its
// listening socket instead, which passes them on to every connection it accepts: no system
// call per connection (a child's value wins over the same option() of the listener). The other
// options (a ChannelOption<T>) name one field of ChannelOptions. Unset options keep the
// kernel's or the channel's default.
#pragma once

#include <niox/channels/socket_options.hpp>
#include <niox/transport/outbound_buffer.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <optional>
#include <system_error>
#include <utility>

namespace niox {

class Channel;
template <class T>
struct ChannelOption;

struct ChannelOptions {
  // The socket options set (row, value), in the order first set: one slot per row of the table.
  std::array<std::pair<const SocketOptionInfo*, int>, 16> socket_options{};
  // listen() backlog of a server socket (default SOMAXCONN).
  std::optional<int> so_backlog;
  std::optional<bool> auto_read;
  std::optional<WriteBufferWaterMark> write_buffer_water_mark;
  // Pending bytes above which a write fails with Errc::outbound_buffer_full.
  std::optional<std::size_t> write_buffer_hard_limit;
  std::optional<std::chrono::milliseconds> connect_timeout;
  std::optional<bool> allow_half_closure;
  // ServerBootstrap only: one SO_REUSEPORT listener per worker loop instead of one boss loop
  // handing connections out (see bootstrap.hpp).
  std::optional<bool> listener_per_loop;
  // Flushes of at least this many bytes are sent zero-copy (0: never); see
  // channel_option::write_zero_copy_threshold.
  std::optional<std::size_t> write_zero_copy_threshold;

  template <class T, class V>
  void set(const SocketOption<T>& option, V&& value) {
    set_socket_option(option, static_cast<int>(T(std::forward<V>(value))));
  }
  template <class T, class V>
  void set(ChannelOption<T> option, V&& value) {
    this->*(option.field) = T(std::forward<V>(value));
  }
  // A row set again keeps its place and takes the new value.
  void set_socket_option(const SocketOptionInfo& option, int value);
  // Options set in `other` override ours.
  void merge(const ChannelOptions& other);

  // setsockopt for the socket options (family: AF_INET, AF_INET6 or AF_UNIX); the first error,
  // the others still tried. fd stays the caller's.
  std::error_code apply_to_socket(int fd, int family) const noexcept;
  // The ChannelConfig fields. Throws IllegalArgumentException for an inverted water mark.
  void apply_to_config(Channel& channel) const;
};

template <class T>
struct ChannelOption {
  std::optional<T> ChannelOptions::*field;
};

namespace channel_option {
// TCP_NOTSENT_LOWAT (Netty's EpollChannelOption.TCP_NOTSENT_LOWAT): small values leave a bulk
// sender's data in its outbound buffer or file until the peer's window opens, so it leaves
// from the channel's own loop instead of waiting in the kernel for the peer's acknowledgements
// to send it (which on loopback means on the receiver's core). TCP sockets only.
inline constexpr const SocketOption<int>& tcp_notsent_lowat =
    StandardSocketOptions::tcp_notsent_lowat;
inline constexpr const SocketOption<bool>& tcp_nodelay = StandardSocketOptions::tcp_nodelay;
inline constexpr const SocketOption<bool>& so_reuseaddr = StandardSocketOptions::so_reuseaddr;
// SO_REUSEPORT: several sockets may listen on one port and the kernel spreads connections
// over them. listener_per_loop sets it on its listeners itself.
inline constexpr const SocketOption<bool>& so_reuseport = StandardSocketOptions::so_reuseport;
inline constexpr const SocketOption<bool>& so_keepalive = StandardSocketOptions::so_keepalive;
inline constexpr const SocketOption<int>& so_sndbuf = StandardSocketOptions::so_sndbuf;
inline constexpr const SocketOption<int>& so_rcvbuf = StandardSocketOptions::so_rcvbuf;
// Seconds of SO_LINGER; 0 makes close() abortive (RST instead of FIN).
inline constexpr const SocketOption<int>& so_linger = StandardSocketOptions::so_linger;
inline constexpr ChannelOption<int> so_backlog{&ChannelOptions::so_backlog};
inline constexpr ChannelOption<bool> auto_read{&ChannelOptions::auto_read};
inline constexpr ChannelOption<WriteBufferWaterMark> write_buffer_water_mark{
    &ChannelOptions::write_buffer_water_mark};
inline constexpr ChannelOption<std::size_t> write_buffer_hard_limit{
    &ChannelOptions::write_buffer_hard_limit};
inline constexpr ChannelOption<std::chrono::milliseconds> connect_timeout{
    &ChannelOptions::connect_timeout};
inline constexpr ChannelOption<bool> allow_half_closure{&ChannelOptions::allow_half_closure};
// A ServerBootstrap option: each worker loop gets its own listening socket on the bound port
// (SO_REUSEPORT), accepts there and keeps what it accepts; the boss group is not used.
inline constexpr ChannelOption<bool> listener_per_loop{&ChannelOptions::listener_per_loop};
// A gathering write of at least this many bytes goes out zero-copy (WriteFlags::zero_copy: the
// kernel sends from the outbound buffer's pages, and the write completes, its messages
// released, once it let go of them). 0, the default, never. io_uring only: epoll and the
// readiness fallback send plainly. It pays for large buffers on a real network device; on
// loopback the kernel copies anyway.
inline constexpr ChannelOption<std::size_t> write_zero_copy_threshold{
    &ChannelOptions::write_zero_copy_threshold};
}  // namespace channel_option

}  // namespace niox
