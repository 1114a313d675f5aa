// Private: the socket core. socket.cpp makes every socket call of the socket channels
// (SocketChannel, ServerSocketChannel, DatagramChannel) and of the transport's socket channels,
// and holds the option table (StandardSocketOptions, socket_options.hpp).
//
// A Socket names a descriptor; it never owns or closes it. open() and accept() hand a new
// descriptor to the caller as a FileDescriptor (a loop's channel closes it through its loop).
// Copies name the same descriptor. Errors come back as the errno's std::error_code;
// only the overloads documented as throwing throw std::system_error.
#pragma once

#include <niox/base/file_descriptor.hpp>
#include <niox/channels/socket_address.hpp>
#include <niox/channels/socket_options.hpp>

#include <cstdint>
#include <optional>
#include <system_error>

namespace niox::detail {

int family_domain(ProtocolFamily family) noexcept;
// AF_INET or AF_INET6: the stream sockets that are TCP.
bool is_ip_family(int family) noexcept;

class Socket {
 public:
  explicit Socket(int fd) noexcept : fd_(fd) {}

  // socket(domain, type | SOCK_CLOEXEC, plus SOCK_NONBLOCK when asked); the result owns the
  // new descriptor. The first throws std::system_error("socket"), the second returns an
  // invalid one.
  static FileDescriptor open(int domain, int type, bool nonblocking = false);
  static FileDescriptor open(int domain, int type, bool nonblocking, std::error_code& ec) noexcept;

  int fd() const noexcept { return fd_; }

  std::error_code bind(const SocketAddress& local) const noexcept;
  void bind_or_throw(const SocketAddress& local) const;  // std::system_error("bind <address>")
  std::error_code listen(int backlog) const noexcept;
  // accept4(SOCK_CLOEXEC); EINTR and connections that died queued (ECONNABORTED) are retried.
  // The result owns the new descriptor; invalid when none is pending (ec clear) or on error.
  FileDescriptor accept(std::error_code& ec) const noexcept;
  // One connect(2): clear when connected, else its errno (EINPROGRESS while pending).
  std::error_code connect(const SocketAddress& remote) const noexcept;
  // Dissolves a datagram socket's association (connect to AF_UNSPEC).
  std::error_code disconnect() const noexcept;
  // SO_ERROR: the outcome of a connection that was pending.
  std::error_code pending_error() const noexcept;
  // Connected to a peer (getpeername succeeds, also for an unnamed Unix-domain peer).
  bool has_peer() const noexcept;
  std::error_code shutdown(int how) const noexcept;  // SHUT_RD, SHUT_WR

  // getsockname/getpeername; nullopt when unbound, unconnected (not an error) or unnamed. The
  // overloads without ec throw std::system_error.
  std::optional<SocketAddress> local_address(std::error_code& ec) const;
  std::optional<SocketAddress> remote_address(std::error_code& ec) const;
  std::optional<SocketAddress> local_address() const;
  std::optional<SocketAddress> remote_address() const;

 private:
  int fd_;
};

}  // namespace niox::detail
