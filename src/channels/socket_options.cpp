#include <niox/channels/socket_options.hpp>

#include "channels/fd_io.hpp"

#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace niox {

namespace StandardSocketOptions {
using B = SocketOption<bool>;
using I = SocketOption<int>;
const B tcp_nodelay{IPPROTO_TCP, TCP_NODELAY, B::Kind::flag, "TCP_NODELAY"};
const B so_reuseaddr{SOL_SOCKET, SO_REUSEADDR, B::Kind::flag, "SO_REUSEADDR"};
const B so_reuseport{SOL_SOCKET, SO_REUSEPORT, B::Kind::flag, "SO_REUSEPORT"};
const B so_keepalive{SOL_SOCKET, SO_KEEPALIVE, B::Kind::flag, "SO_KEEPALIVE"};
const B so_broadcast{SOL_SOCKET, SO_BROADCAST, B::Kind::flag, "SO_BROADCAST"};
const I so_sndbuf{SOL_SOCKET, SO_SNDBUF, I::Kind::integer, "SO_SNDBUF"};
const I so_rcvbuf{SOL_SOCKET, SO_RCVBUF, I::Kind::integer, "SO_RCVBUF"};
const I so_linger{SOL_SOCKET, SO_LINGER, I::Kind::linger, "SO_LINGER"};
const I ip_tos{IPPROTO_IP, IP_TOS, I::Kind::integer, "IP_TOS"};
const B ipv6_v6only{IPPROTO_IPV6, IPV6_V6ONLY, B::Kind::flag, "IPV6_V6ONLY"};
}  // namespace StandardSocketOptions

namespace detail {
namespace {
constexpr int linger_kind = static_cast<int>(SocketOption<int>::Kind::linger);
}

void set_socket_option(int fd, int level, int name, int kind, int value,
                       std::error_code& ec) noexcept {
  int rc;
  if (kind == linger_kind) {
    ::linger l{};
    l.l_onoff = value >= 0 ? 1 : 0;
    l.l_linger = value >= 0 ? value : 0;
    rc = ::setsockopt(fd, level, name, &l, sizeof l);
  } else {
    rc = ::setsockopt(fd, level, name, &value, sizeof value);
  }
  ec = rc < 0 ? errno_code() : std::error_code();
}

int get_socket_option(int fd, int level, int name, int kind, std::error_code& ec) noexcept {
  ec.clear();
  if (kind == linger_kind) {
    ::linger l{};
    socklen_t len = sizeof l;
    if (::getsockopt(fd, level, name, &l, &len) < 0) {
      ec = errno_code();
      return 0;
    }
    return l.l_onoff != 0 ? l.l_linger : -1;
  }
  int v = 0;
  socklen_t len = sizeof v;
  if (::getsockopt(fd, level, name, &v, &len) < 0) {
    ec = errno_code();
    return 0;
  }
  return v;
}
}  // namespace detail

}  // namespace niox
