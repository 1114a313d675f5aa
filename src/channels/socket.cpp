#include "channels/socket.hpp"

#include "channels/fd_io.hpp"

#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>

namespace niox {

// ---- The option table ---------------------------------------------------------------------

namespace StandardSocketOptions {
using B = SocketOption<bool>;
using I = SocketOption<int>;
constexpr auto flag = SocketOptionInfo::Kind::flag;
constexpr auto integer = SocketOptionInfo::Kind::integer;
constexpr bool ip = true;  // ip_only
constexpr bool any = false;
const B tcp_nodelay{{IPPROTO_TCP, TCP_NODELAY, flag, ip, "TCP_NODELAY"}};
const B so_reuseaddr{{SOL_SOCKET, SO_REUSEADDR, flag, ip, "SO_REUSEADDR"}};
const B so_reuseport{{SOL_SOCKET, SO_REUSEPORT, flag, ip, "SO_REUSEPORT"}};
const B so_keepalive{{SOL_SOCKET, SO_KEEPALIVE, flag, ip, "SO_KEEPALIVE"}};
const B so_broadcast{{SOL_SOCKET, SO_BROADCAST, flag, ip, "SO_BROADCAST"}};
const I so_sndbuf{{SOL_SOCKET, SO_SNDBUF, integer, any, "SO_SNDBUF"}};
const I so_rcvbuf{{SOL_SOCKET, SO_RCVBUF, integer, any, "SO_RCVBUF"}};
const I so_linger{{SOL_SOCKET, SO_LINGER, SocketOptionInfo::Kind::linger, any, "SO_LINGER"}};
const I ip_tos{{IPPROTO_IP, IP_TOS, integer, ip, "IP_TOS"}};
const B ipv6_v6only{{IPPROTO_IPV6, IPV6_V6ONLY, flag, ip, "IPV6_V6ONLY"}};
const I tcp_notsent_lowat{{IPPROTO_TCP, TCP_NOTSENT_LOWAT, integer, ip, "TCP_NOTSENT_LOWAT"}};
const B tcp_cork{{IPPROTO_TCP, TCP_CORK, flag, ip, "TCP_CORK"}};
}  // namespace StandardSocketOptions

bool SocketOptionInfo::applies_to(int family) const noexcept {
  return !ip_only || detail::is_ip_family(family);
}

namespace detail {

namespace {
std::error_code result(int rc) noexcept { return rc < 0 ? errno_code() : std::error_code(); }
}  // namespace

// The value as the kernel takes it: an int, or for SO_LINGER a struct linger.
std::error_code set_socket_option(int fd, const SocketOptionInfo& option, int value) noexcept {
  const bool linger = option.kind == SocketOptionInfo::Kind::linger;
  const ::linger l{value >= 0 ? 1 : 0, value >= 0 ? value : 0};
  return result(::setsockopt(fd, option.level, option.name,
                             linger ? static_cast<const void*>(&l) : &value,
                             linger ? sizeof l : sizeof value));
}

int get_socket_option(int fd, const SocketOptionInfo& option, std::error_code& ec) noexcept {
  const bool linger = option.kind == SocketOptionInfo::Kind::linger;
  ::linger l{};
  int v = 0;
  socklen_t len = linger ? sizeof l : sizeof v;
  ec = result(
      ::getsockopt(fd, option.level, option.name, linger ? static_cast<void*>(&l) : &v, &len));
  if (ec || !linger) {
    return ec ? 0 : v;
  }
  return l.l_onoff != 0 ? l.l_linger : -1;
}

// ---- Socket -------------------------------------------------------------------------------

int family_domain(ProtocolFamily family) noexcept {
  switch (family) {
    case ProtocolFamily::inet6: return AF_INET6;
    case ProtocolFamily::unix_domain: return AF_UNIX;
    case ProtocolFamily::inet: break;
  }
  return AF_INET;
}

bool is_ip_family(int family) noexcept { return family == AF_INET || family == AF_INET6; }

namespace {
std::optional<SocketAddress> to_address(const sockaddr_storage& ss, socklen_t len) {
  const auto* sa = reinterpret_cast<const sockaddr*>(&ss);
  if (ss.ss_family == AF_UNIX) {
    if (len <= offsetof(sockaddr_un, sun_path)) {
      return std::nullopt;  // unnamed
    }
    return SocketAddress::from_sockaddr(sa, len);
  }
  if (!is_ip_family(ss.ss_family) || InetSocketAddress::from_sockaddr(sa, len).port() == 0) {
    return std::nullopt;  // port 0: not bound yet
  }
  return SocketAddress(InetSocketAddress::from_sockaddr(sa, len));
}

template <class Call>
std::optional<SocketAddress> address(int fd, Call call, std::error_code& ec) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ec = result(call(fd, reinterpret_cast<sockaddr*>(&ss), &len));
  if (ec == std::errc::not_connected) {
    ec.clear();  // no peer: not an error
  }
  return ec ? std::nullopt : to_address(ss, len);
}
}  // namespace

FileDescriptor Socket::open(int domain, int type, bool nonblocking, std::error_code& ec) noexcept {
  int fd = ::socket(domain, type | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  ec = result(fd);
  return FileDescriptor(fd);
}

FileDescriptor Socket::open(int domain, int type, bool nonblocking) {
  std::error_code ec;
  FileDescriptor fd = open(domain, type, nonblocking, ec);
  if (ec) throw std::system_error(ec, "socket");
  return fd;
}

std::error_code Socket::bind(const SocketAddress& local) const noexcept {
  sockaddr_storage ss;
  socklen_t len = local.to_native(ss);
  return result(::bind(fd_, reinterpret_cast<sockaddr*>(&ss), len));
}

void Socket::bind_or_throw(const SocketAddress& local) const {
  if (auto ec = bind(local)) {
    throw std::system_error(ec, "bind " + local.to_string());
  }
}

std::error_code Socket::listen(int backlog) const noexcept {
  return result(::listen(fd_, backlog));
}

FileDescriptor Socket::accept(std::error_code& ec) const noexcept {
  int fd;
  do {
    fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  } while (fd < 0 && (errno == EINTR || errno == ECONNABORTED));
  ec = fd < 0 && !would_block(errno) ? errno_code() : std::error_code();
  return FileDescriptor(fd);
}

std::error_code Socket::connect(const SocketAddress& remote) const noexcept {
  sockaddr_storage ss;
  socklen_t len = remote.to_native(ss);
  return result(::connect(fd_, reinterpret_cast<sockaddr*>(&ss), len));
}

std::error_code Socket::disconnect() const noexcept {
  sockaddr sa{};
  sa.sa_family = AF_UNSPEC;
  return result(::connect(fd_, &sa, sizeof sa));
}

std::error_code Socket::pending_error() const noexcept {
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) < 0) {
    err = errno;
  }
  return err != 0 ? errno_code(err) : std::error_code();
}

bool Socket::has_peer() const noexcept {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  return ::getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0;
}

std::error_code Socket::shutdown(int how) const noexcept { return result(::shutdown(fd_, how)); }

std::optional<SocketAddress> Socket::local_address(std::error_code& ec) const {
  return address(fd_, ::getsockname, ec);
}

std::optional<SocketAddress> Socket::remote_address(std::error_code& ec) const {
  return address(fd_, ::getpeername, ec);
}

std::optional<SocketAddress> Socket::local_address() const {
  std::error_code ec;
  auto a = local_address(ec);
  return ec ? throw std::system_error(ec, "getsockname") : a;
}

std::optional<SocketAddress> Socket::remote_address() const {
  std::error_code ec;
  auto a = remote_address(ec);
  return ec ? throw std::system_error(ec, "getpeername") : a;
}

}  // namespace detail

}  // namespace niox
