// Typed socket options, as java.net.StandardSocketOptions names them:
//
//   channel.set_option(StandardSocketOptions::tcp_nodelay, true);
//   int size = channel.get_option(StandardSocketOptions::so_rcvbuf);
//
// The constants are lower-case because TCP_NODELAY, SO_REUSEADDR, ... are C macros in the
// system headers every socket program includes.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>
#include <system_error>

namespace niox {

// An option whose value has type T (bool or int).
template <class T>
struct SocketOption {
  enum class Kind { flag, integer, linger };
  int level;
  int name;
  Kind kind;
  std::string_view java_name;
};

namespace StandardSocketOptions {
extern const SocketOption<bool> tcp_nodelay;    // TCP_NODELAY
extern const SocketOption<bool> so_reuseaddr;   // SO_REUSEADDR
extern const SocketOption<bool> so_reuseport;   // SO_REUSEPORT
extern const SocketOption<bool> so_keepalive;   // SO_KEEPALIVE
extern const SocketOption<bool> so_broadcast;   // SO_BROADCAST
extern const SocketOption<int> so_sndbuf;       // SO_SNDBUF: the kernel doubles what is set
extern const SocketOption<int> so_rcvbuf;       // SO_RCVBUF: likewise
// SO_LINGER in seconds; negative disables it (Java's convention). 0 makes close() send a RST.
extern const SocketOption<int> so_linger;
extern const SocketOption<int> ip_tos;          // IP_TOS
extern const SocketOption<bool> ipv6_v6only;    // IPV6_V6ONLY (not in Java's list)
}  // namespace StandardSocketOptions

namespace detail {
void set_socket_option(int fd, int level, int name, int kind, int value, std::error_code& ec) noexcept;
int get_socket_option(int fd, int level, int name, int kind, std::error_code& ec) noexcept;
}  // namespace detail

// Mixed into every socket channel: set_option/get_option on its native_handle().
template <class Derived>
class SocketOptionsMixin {
 public:
  template <class T>
  Derived& set_option(const SocketOption<T>& option, T value) {
    std::error_code ec;
    set_option(option, value, ec);
    if (ec) {
      throw std::system_error(ec, std::string("set_option ") + std::string(option.java_name));
    }
    return static_cast<Derived&>(*this);
  }
  template <class T>
  void set_option(const SocketOption<T>& option, T value, std::error_code& ec) noexcept {
    detail::set_socket_option(static_cast<const Derived&>(*this).native_handle(), option.level,
                              option.name, static_cast<int>(option.kind), static_cast<int>(value),
                              ec);
  }
  template <class T>
  T get_option(const SocketOption<T>& option) const {
    std::error_code ec;
    T v = get_option(option, ec);
    if (ec) {
      throw std::system_error(ec, std::string("get_option ") + std::string(option.java_name));
    }
    return v;
  }
  template <class T>
  T get_option(const SocketOption<T>& option, std::error_code& ec) const noexcept {
    int v = detail::get_socket_option(static_cast<const Derived&>(*this).native_handle(),
                                      option.level, option.name, static_cast<int>(option.kind), ec);
    if constexpr (std::is_same_v<T, bool>) {
      return v != 0;
    } else {
      return v;
    }
  }
};

}  // namespace niox
