#include <niox/channels/socket_address.hpp>

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/un.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace niox {

namespace {
// InetSocketAddress's private storage, as either form.
template <class S>
sockaddr_in* v4(S& s) {
  return &s.v4;
}
template <class S>
sockaddr_in6* v6(S& s) {
  return &s.v6;
}
template <class S>
const sockaddr_in* v4(const S& s) {
  return &s.v4;
}
template <class S>
const sockaddr_in6* v6(const S& s) {
  return &s.v6;
}

// getaddrinfo's errors are not errno values: they get a category of their own, whose messages
// are the resolver's ("Name or service not known") and whose codes compare equal to the errno
// conditions a caller can act on (EAI_NONAME is std::errc::address_not_available, ...).
class ResolverCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "getaddrinfo"; }
  std::string message(int rc) const override { return ::gai_strerror(rc); }
  std::error_condition default_error_condition(int rc) const noexcept override {
    switch (rc) {
      case EAI_NONAME: return std::errc::address_not_available;
#ifdef EAI_NODATA
      case EAI_NODATA: return std::errc::address_not_available;
#endif
      case EAI_AGAIN: return std::errc::resource_unavailable_try_again;
      case EAI_MEMORY: return std::errc::not_enough_memory;
      default: return std::errc::invalid_argument;
    }
  }
};

const std::error_category& resolver_category() noexcept {
  static const ResolverCategory category;
  return category;
}

// Replaces whatever `s` held (an IPv4 address, say) with the IPv6 address `addr`:`port`.
template <class S>
void store_v6(S& s, const in6_addr& addr, std::uint16_t port) {
  s = {};
  auto* s6 = v6(s);
  s6->sin6_family = AF_INET6;
  s6->sin6_port = htons(port);
  s6->sin6_addr = addr;
}

std::error_code gai_error(int rc) {
  if (rc == EAI_SYSTEM) {
    return {errno, std::system_category()};
  }
  return {rc, resolver_category()};
}
}  // namespace

InetSocketAddress::InetSocketAddress(std::uint16_t port) noexcept {
  auto* a = v4(storage_);
  a->sin_family = AF_INET;
  a->sin_port = htons(port);
  a->sin_addr.s_addr = htonl(INADDR_ANY);
}

InetSocketAddress::InetSocketAddress(std::string_view host, std::uint16_t port) {
  std::error_code ec;
  *this = resolve(host, port, ec);
  if (ec) {
    throw std::system_error(ec, "cannot resolve '" + std::string(host) + "'");
  }
}

InetSocketAddress InetSocketAddress::resolve(std::string_view host, std::uint16_t port,
                                             std::error_code& ec) noexcept {
  ec.clear();
  InetSocketAddress out(port);
  std::string h(host);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') {
    h = h.substr(1, h.size() - 2);
  }
  if (h.empty()) {
    return out;
  }
  if (inet_pton(AF_INET, h.c_str(), &v4(out.storage_)->sin_addr) == 1) {
    return out;
  }
  in6_addr a6;
  if (inet_pton(AF_INET6, h.c_str(), &a6) == 1) {
    store_v6(out.storage_, a6, port);
    return out;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(h.c_str(), nullptr, &hints, &res); rc != 0) {
    ec = gai_error(rc);
    return InetSocketAddress(port);
  }
  const addrinfo* pick = res;
  for (const addrinfo* p = res; p != nullptr; p = p->ai_next) {
    if (p->ai_family == AF_INET) {
      pick = p;
      break;
    }
  }
  out = from_sockaddr(pick->ai_addr, pick->ai_addrlen);
  freeaddrinfo(res);
  if (out.is_ipv6()) {
    v6(out.storage_)->sin6_port = htons(port);
  } else {
    v4(out.storage_)->sin_port = htons(port);
  }
  return out;
}

InetSocketAddress InetSocketAddress::loopback_v4(std::uint16_t port) noexcept {
  InetSocketAddress a(port);
  v4(a.storage_)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

InetSocketAddress InetSocketAddress::loopback_v6(std::uint16_t port) noexcept {
  InetSocketAddress a;
  store_v6(a.storage_, in6addr_loopback, port);
  return a;
}

InetSocketAddress InetSocketAddress::any_v6(std::uint16_t port) noexcept {
  InetSocketAddress a;
  store_v6(a.storage_, in6addr_any, port);
  return a;
}

InetSocketAddress InetSocketAddress::from_sockaddr(const sockaddr* sa, socklen_t len) noexcept {
  InetSocketAddress a;
  if (sa != nullptr && sa->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    std::memcpy(&a.storage_, sa, sizeof(sockaddr_in));
  } else if (sa != nullptr && sa->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    a.storage_ = {};
    std::memcpy(&a.storage_, sa, sizeof(sockaddr_in6));
  }
  return a;
}

std::uint16_t InetSocketAddress::port() const noexcept {
  return ntohs(is_ipv6() ? v6(storage_)->sin6_port : v4(storage_)->sin_port);
}

bool InetSocketAddress::is_loopback() const noexcept {
  if (is_ipv6()) {
    return IN6_IS_ADDR_LOOPBACK(&v6(storage_)->sin6_addr);
  }
  return (ntohl(v4(storage_)->sin_addr.s_addr) >> 24) == 127;
}

bool InetSocketAddress::is_any_local() const noexcept {
  if (is_ipv6()) {
    return IN6_IS_ADDR_UNSPECIFIED(&v6(storage_)->sin6_addr);
  }
  return v4(storage_)->sin_addr.s_addr == htonl(INADDR_ANY);
}

std::string InetSocketAddress::host_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (is_ipv6()) {
    inet_ntop(AF_INET6, &v6(storage_)->sin6_addr, buf, sizeof buf);
  } else {
    inet_ntop(AF_INET, &v4(storage_)->sin_addr, buf, sizeof buf);
  }
  return buf;
}

bool operator==(const InetSocketAddress& a, const InetSocketAddress& b) noexcept {
  if (a.is_ipv6() != b.is_ipv6() || a.port() != b.port()) {
    return false;
  }
  if (a.is_ipv6()) {
    return std::memcmp(&v6(a.storage_)->sin6_addr, &v6(b.storage_)->sin6_addr, sizeof(in6_addr)) ==
           0;
  }
  return v4(a.storage_)->sin_addr.s_addr == v4(b.storage_)->sin_addr.s_addr;
}

UnixDomainSocketAddress::UnixDomainSocketAddress(std::string_view path) : path_(path) {
  if (path_.size() >= sizeof(sockaddr_un::sun_path)) {
    throw std::invalid_argument("unix socket path too long: " + path_);
  }
}

UnixDomainSocketAddress UnixDomainSocketAddress::from_sockaddr(const sockaddr* sa, socklen_t len) {
  const auto* un = reinterpret_cast<const sockaddr_un*>(sa);
  std::size_t n = len > offsetof(sockaddr_un, sun_path) ? len - offsetof(sockaddr_un, sun_path) : 0;
  n = std::min(n, sizeof(un->sun_path));
  if (n > 0 && un->sun_path[0] != '\0') {
    n = strnlen(un->sun_path, n);  // a path: stop at its terminator
  }
  return UnixDomainSocketAddress(std::string_view(un->sun_path, n));
}

socklen_t UnixDomainSocketAddress::to_native(sockaddr_storage& out) const noexcept {
  out = {};
  auto* un = reinterpret_cast<sockaddr_un*>(&out);
  un->sun_family = AF_UNIX;
  std::memcpy(un->sun_path, path_.data(), path_.size());
  // Abstract names are exactly their bytes; paths carry their terminating NUL.
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path_.size() +
                                (is_abstract() ? 0 : 1));
}

SocketAddress SocketAddress::from_sockaddr(const sockaddr* sa, socklen_t len) {
  if (sa != nullptr && sa->sa_family == AF_UNIX) {
    return UnixDomainSocketAddress::from_sockaddr(sa, len);
  }
  return InetSocketAddress::from_sockaddr(sa, len);
}

int SocketAddress::family() const noexcept {
  if (is_unix()) {
    return AF_UNIX;
  }
  return inet().is_ipv6() ? AF_INET6 : AF_INET;
}

socklen_t SocketAddress::to_native(sockaddr_storage& out) const noexcept {
  if (is_unix()) {
    return unix_domain().to_native(out);
  }
  const auto& a = inet();
  out = {};
  std::memcpy(&out, a.native(), a.native_size());
  return a.native_size();
}

std::string SocketAddress::to_string() const {
  if (is_unix()) {
    const auto& p = unix_domain().path();
    if (unix_domain().is_abstract()) {
      return "unix:@" + p.substr(1);
    }
    return "unix:" + p;
  }
  const auto& a = inet();
  // Appended piece by piece into one string (chained operator+ on temporaries makes GCC 12 warn
  // about overlapping copies at -O3, -Wrestrict, falsely).
  std::string out;
  if (a.is_ipv6()) {
    out += '[';
    out += a.host_string();
    out += ']';
  } else {
    out += a.host_string();
  }
  out += ':';
  out += std::to_string(a.port());
  return out;
}

}  // namespace niox
