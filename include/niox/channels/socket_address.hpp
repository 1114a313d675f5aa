// Socket addresses, as java.net names them: InetSocketAddress (IPv4 or IPv6 host and port) and
// UnixDomainSocketAddress (a path, or a Linux abstract name starting with '\0'). SocketAddress
// holds either, and converts to and from the kernel's sockaddr forms.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>

#include <netinet/in.h>
#include <sys/socket.h>

#include <fmt/format.h>

namespace niox {

// java.net.StandardProtocolFamily: which kind of socket a channel opens.
enum class ProtocolFamily { inet, inet6, unix_domain };

class InetSocketAddress {
 public:
  // The wildcard IPv4 address 0.0.0.0 with `port` (Java: new InetSocketAddress(port)).
  explicit InetSocketAddress(std::uint16_t port = 0) noexcept;
  // A numeric IPv4 or IPv6 literal ("127.0.0.1", "::1", "[::1]") or a host name, resolved now
  // (first result, IPv4 preferred). Throws std::system_error if it cannot be resolved.
  InetSocketAddress(std::string_view host, std::uint16_t port);
  // Non-throwing form: `ec` is set and the result is the wildcard address on failure.
  static InetSocketAddress resolve(std::string_view host, std::uint16_t port,
                                   std::error_code& ec) noexcept;
  static InetSocketAddress loopback_v4(std::uint16_t port = 0) noexcept;
  static InetSocketAddress loopback_v6(std::uint16_t port = 0) noexcept;
  static InetSocketAddress any_v6(std::uint16_t port = 0) noexcept;
  // Takes an AF_INET or AF_INET6 address; anything else gives the wildcard address.
  static InetSocketAddress from_sockaddr(const sockaddr* sa, socklen_t len) noexcept;

  std::uint16_t port() const noexcept;
  bool is_ipv6() const noexcept { return storage_.v6.sin6_family == AF_INET6; }
  bool is_loopback() const noexcept;
  bool is_any_local() const noexcept;
  // The numeric host ("127.0.0.1", "::1").
  std::string host_string() const;

  const sockaddr* native() const noexcept { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t native_size() const noexcept {
    return is_ipv6() ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  }
  friend bool operator==(const InetSocketAddress& a, const InetSocketAddress& b) noexcept;

 private:
  // Either form and nothing more (28 bytes): every channel keeps its addresses, and a
  // sockaddr_storage would be 128 bytes each. Value-initialised: all bytes zero.
  union Native {
    sockaddr_in v4;
    sockaddr_in6 v6;
  };
  Native storage_{};
};

class UnixDomainSocketAddress {
 public:
  // A filesystem path, or an abstract name when it starts with '\0'. Throws
  // std::invalid_argument if it does not fit in sun_path.
  explicit UnixDomainSocketAddress(std::string_view path);
  static UnixDomainSocketAddress from_sockaddr(const sockaddr* sa, socklen_t len);

  const std::string& path() const noexcept { return path_; }
  bool is_abstract() const noexcept { return !path_.empty() && path_[0] == '\0'; }
  // Filled on demand; the kernel form of path().
  socklen_t to_native(sockaddr_storage& out) const noexcept;
  friend bool operator==(const UnixDomainSocketAddress&, const UnixDomainSocketAddress&) = default;

 private:
  std::string path_;
};

// Either kind of address. Channels take and return this.
class SocketAddress {
 public:
  SocketAddress() = default;
  SocketAddress(InetSocketAddress a) : v_(a) {}                   // NOLINT: implicit by design
  SocketAddress(UnixDomainSocketAddress a) : v_(std::move(a)) {}  // NOLINT
  static SocketAddress from_sockaddr(const sockaddr* sa, socklen_t len);

  int family() const noexcept;  // AF_INET, AF_INET6 or AF_UNIX
  bool is_inet() const noexcept { return std::holds_alternative<InetSocketAddress>(v_); }
  bool is_unix() const noexcept { return !is_inet(); }
  const InetSocketAddress& inet() const { return std::get<InetSocketAddress>(v_); }
  const UnixDomainSocketAddress& unix_domain() const {
    return std::get<UnixDomainSocketAddress>(v_);
  }
  // Writes the kernel form into `out` and returns its length.
  socklen_t to_native(sockaddr_storage& out) const noexcept;
  std::string to_string() const;
  friend bool operator==(const SocketAddress&, const SocketAddress&) = default;

 private:
  std::variant<InetSocketAddress, UnixDomainSocketAddress> v_;
};

}  // namespace niox

// "127.0.0.1:80", "[::1]:80", "unix:/path" (abstract names print '@' for the leading NUL).
template <>
struct fmt::formatter<niox::SocketAddress> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(const niox::SocketAddress& a, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(a.to_string(), ctx);
  }
};
template <>
struct fmt::formatter<niox::InetSocketAddress> : fmt::formatter<niox::SocketAddress> {
  template <class Ctx>
  auto format(const niox::InetSocketAddress& a, Ctx& ctx) const {
    return fmt::formatter<niox::SocketAddress>::format(niox::SocketAddress(a), ctx);
  }
};
