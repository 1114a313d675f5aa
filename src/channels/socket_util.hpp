// Private: socket creation and address queries shared by the socket channels.
#pragma once

#include <niox/channels/socket_address.hpp>

#include <optional>
#include <system_error>

namespace niox::detail {

int family_domain(ProtocolFamily family) noexcept;
// socket(domain, type | SOCK_CLOEXEC); throws std::system_error.
int open_socket(ProtocolFamily family, int type);
int open_socket(int domain, int type);
// getsockname/getpeername; nullopt when unbound/unconnected. Throws on EBADF etc.
std::optional<SocketAddress> local_address_of(int fd);
std::optional<SocketAddress> remote_address_of(int fd);
void bind_socket(int fd, const SocketAddress& local);

}  // namespace niox::detail
