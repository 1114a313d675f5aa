// Typed socket options, as java.net.StandardSocketOptions names them:
//
//   channel.set_option(StandardSocketOptions::tcp_nodelay, true);
//   int size = channel.get_option(StandardSocketOptions::so_rcvbuf);
//
// The constants are lower-case because TCP_NODELAY, SO_REUSEADDR, ... are C macros in the
// system headers every socket program includes. These constants are the one option table of
// niox: the transport's channel_option names (transport/channel_option.hpp) set the same rows.
#pragma once

#include <string>
#include <string_view>
#include <system_error>

namespace niox {

// One row of the option table, which StandardSocketOptions spells in Java's names and the
// transport's channel_option in Netty's: the level and name setsockopt takes, how the value
// converts (flag: a bool as 0/1; integer; linger: seconds as struct linger, negative turning it
// off) and whether the option means anything outside IP sockets.
struct SocketOptionInfo {
  enum class Kind { flag, integer, linger };
  int level;
  int name;
  Kind kind;
  bool ip_only;
  std::string_view java_name;
  // False for an ip_only option on a Unix-domain socket (family AF_UNIX): the transport skips
  // it there; a channel's set_option passes it on and the kernel decides.
  bool applies_to(int family) const noexcept;
};

// An option whose value has type T (bool or int).
template <class T>
struct SocketOption : SocketOptionInfo {};

namespace StandardSocketOptions {
extern const SocketOption<bool> tcp_nodelay;   // TCP_NODELAY
extern const SocketOption<bool> so_reuseaddr;  // SO_REUSEADDR
extern const SocketOption<bool> so_reuseport;  // SO_REUSEPORT
extern const SocketOption<bool> so_keepalive;  // SO_KEEPALIVE
extern const SocketOption<bool> so_broadcast;  // SO_BROADCAST
extern const SocketOption<int> so_sndbuf;      // SO_SNDBUF: the kernel doubles what is set
extern const SocketOption<int> so_rcvbuf;      // SO_RCVBUF: likewise
// SO_LINGER in seconds; negative disables it (Java's convention). 0 makes close() send a RST.
extern const SocketOption<int> so_linger;
extern const SocketOption<int> ip_tos;  // IP_TOS
// Not in Java's list:
extern const SocketOption<bool> ipv6_v6only;  // IPV6_V6ONLY
// TCP_NOTSENT_LOWAT: unsent bytes the kernel keeps before it stops taking more.
extern const SocketOption<int> tcp_notsent_lowat;
// TCP_CORK; clearing it also pushes a partial segment that MSG_MORE held back.
extern const SocketOption<bool> tcp_cork;
}  // namespace StandardSocketOptions

namespace detail {
std::error_code set_socket_option(int fd, const SocketOptionInfo& option, int value) noexcept;
int get_socket_option(int fd, const SocketOptionInfo& option, std::error_code& ec) noexcept;
}  // namespace detail

// Mixed into every socket channel: set_option/get_option on its native_handle().
template <class Derived>
class SocketOptionsMixin {
 public:
  template <class T>
  Derived& set_option(const SocketOption<T>& option, T value) {
    std::error_code ec;
    set_option(option, value, ec);
    return ec ? throw std::system_error(ec, "set_option " + std::string(option.java_name))
              : static_cast<Derived&>(*this);
  }
  template <class T>
  void set_option(const SocketOption<T>& option, T value, std::error_code& ec) noexcept {
    ec = detail::set_socket_option(fd(), option, static_cast<int>(value));
  }
  template <class T>
  T get_option(const SocketOption<T>& option) const {
    std::error_code ec;
    T v = get_option(option, ec);
    return ec ? throw std::system_error(ec, "get_option " + std::string(option.java_name)) : v;
  }
  template <class T>
  T get_option(const SocketOption<T>& option, std::error_code& ec) const noexcept {
    return static_cast<T>(detail::get_socket_option(fd(), option, ec));  // bool: v != 0
  }

 private:
  int fd() const noexcept { return static_cast<const Derived&>(*this).native_handle(); }
};

}  // namespace niox
