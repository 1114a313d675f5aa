// Channel options for the loop-backed socket transport (Netty's ChannelOption).
//
//   ServerBootstrap b;
//   b.option(channel_option::so_backlog, 1024)
//    .child_option(channel_option::tcp_nodelay, true)
//    .child_option(channel_option::write_buffer_water_mark, WriteBufferWaterMark{32 << 10, 64 << 10});
//
// A ChannelOption<T> names one field of ChannelOptions; unset fields keep the kernel's or the
// channel's default. Socket-level options are applied when the socket is created (or accepted);
// socket options that do not apply to the address family (TCP_NODELAY, TCP_NOTSENT_LOWAT and
// SO_KEEPALIVE on a Unix-domain socket) are skipped.
#pragma once

#include <niox/transport/outbound_buffer.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <system_error>

namespace niox {

class Channel;

struct ChannelOptions {
  std::optional<bool> tcp_nodelay;
  std::optional<bool> so_reuseaddr;
  std::optional<bool> so_keepalive;
  std::optional<int> so_sndbuf;
  std::optional<int> so_rcvbuf;
  // TCP_NOTSENT_LOWAT: bytes not yet sent that the kernel keeps for the socket before it stops
  // taking more (Netty's EpollChannelOption.TCP_NOTSENT_LOWAT). Small values leave a bulk
  // sender's data in its outbound buffer or file until the peer's window opens, so it leaves
  // from the channel's own loop instead of waiting in the kernel for the peer's acknowledgements
  // to send it (which on loopback means on the receiver's core). TCP sockets only.
  std::optional<int> tcp_notsent_lowat;
  // Seconds of SO_LINGER; 0 makes close() abortive (RST instead of FIN).
  std::optional<int> so_linger;
  // listen() backlog of a server socket (default SOMAXCONN).
  std::optional<int> so_backlog;
  std::optional<bool> auto_read;
  std::optional<WriteBufferWaterMark> write_buffer_water_mark;
  // Pending bytes above which a write fails with Errc::outbound_buffer_full.
  std::optional<std::size_t> write_buffer_hard_limit;
  std::optional<std::chrono::milliseconds> connect_timeout;
  std::optional<bool> allow_half_closure;

  // Fields set in `other` override ours.
  void merge(const ChannelOptions& other);

  // setsockopt for the socket-level fields (family: AF_INET, AF_INET6 or AF_UNIX).
  std::error_code apply_to_socket(int fd, int family) const noexcept;
  // The ChannelConfig fields. Throws IllegalArgumentException for an inverted water mark.
  void apply_to_config(Channel& channel) const;
};

template <class T>
struct ChannelOption {
  std::optional<T> ChannelOptions::*field;
};

namespace channel_option {
inline constexpr ChannelOption<bool> tcp_nodelay{&ChannelOptions::tcp_nodelay};
inline constexpr ChannelOption<bool> so_reuseaddr{&ChannelOptions::so_reuseaddr};
inline constexpr ChannelOption<bool> so_keepalive{&ChannelOptions::so_keepalive};
inline constexpr ChannelOption<int> so_sndbuf{&ChannelOptions::so_sndbuf};
inline constexpr ChannelOption<int> so_rcvbuf{&ChannelOptions::so_rcvbuf};
inline constexpr ChannelOption<int> tcp_notsent_lowat{&ChannelOptions::tcp_notsent_lowat};
inline constexpr ChannelOption<int> so_linger{&ChannelOptions::so_linger};
inline constexpr ChannelOption<int> so_backlog{&ChannelOptions::so_backlog};
inline constexpr ChannelOption<bool> auto_read{&ChannelOptions::auto_read};
inline constexpr ChannelOption<WriteBufferWaterMark> write_buffer_water_mark{
    &ChannelOptions::write_buffer_water_mark};
inline constexpr ChannelOption<std::size_t> write_buffer_hard_limit{
    &ChannelOptions::write_buffer_hard_limit};
inline constexpr ChannelOption<std::chrono::milliseconds> connect_timeout{
    &ChannelOptions::connect_timeout};
inline constexpr ChannelOption<bool> allow_half_closure{&ChannelOptions::allow_half_closure};
}  // namespace channel_option

}  // namespace niox
