#include "channels/socket_util.hpp"

#include "channels/fd_io.hpp"

#include <sys/socket.h>
#include <sys/un.h>

namespace niox::detail {

int family_domain(ProtocolFamily family) noexcept {
  switch (family) {
    case ProtocolFamily::inet6: return AF_INET6;
    case ProtocolFamily::unix_domain: return AF_UNIX;
    case ProtocolFamily::inet: break;
  }
  return AF_INET;
}

int open_socket(int domain, int type) {
  int fd = ::socket(domain, type | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    throw std::system_error(errno_code(), "socket");
  }
  return fd;
}

int open_socket(ProtocolFamily family, int type) { return open_socket(family_domain(family), type); }

namespace {
std::optional<SocketAddress> to_address(const sockaddr_storage& ss, socklen_t len) {
  if (ss.ss_family == AF_UNIX) {
    if (len <= offsetof(sockaddr_un, sun_path)) {
      return std::nullopt;  // unnamed
    }
    return SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&ss), len);
  }
  if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) {
    return std::nullopt;
  }
  auto a = InetSocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&ss), len);
  if (a.port() == 0) {
    return std::nullopt;  // not bound yet
  }
  return SocketAddress(a);
}
}  // namespace

std::optional<SocketAddress> local_address_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) < 0) {
    throw std::system_error(errno_code(), "getsockname");
  }
  return to_address(ss, len);
}

std::optional<SocketAddress> remote_address_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) < 0) {
    if (errno == ENOTCONN) {
      return std::nullopt;
    }
    throw std::system_error(errno_code(), "getpeername");
  }
  return to_address(ss, len);
}

void bind_socket(int fd, const SocketAddress& local) {
  sockaddr_storage ss;
  socklen_t len = local.to_native(ss);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) < 0) {
    throw std::system_error(errno_code(), "bind " + local.to_string());
  }
}

}  // namespace niox::detail
