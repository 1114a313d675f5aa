// Raw-syscall descriptors for loop tests: socket pairs, loopback listeners, pipes, temp files,
// all O_CLOEXEC and non-blocking, each owned by the FileDescriptor returned; buffers to write
// from and what a read left in them; reading a stream through a loop until enough has come;
// and a bounded way to run a loop until something holds.
#pragma once

#include <niox/base/file_descriptor.hpp>
#include <niox/loop/event_loop.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace niox::test {

inline std::pair<FileDescriptor, FileDescriptor> loop_socket_pair(int type = SOCK_STREAM) {
  int sv[2];
  if (::socketpair(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
    ADD_FAILURE() << "socketpair: " << errno;
  }
  return {FileDescriptor(sv[0]), FileDescriptor(sv[1])};
}

inline std::pair<FileDescriptor, FileDescriptor> loop_pipe() {
  int p[2];
  if (::pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) ADD_FAILURE() << "pipe2: " << errno;
  return {FileDescriptor(p[0]), FileDescriptor(p[1])};
}

// Bytes written to a TCP socket that the kernel has not sent yet (MSG_MORE holds them back); -1
// if the descriptor cannot tell.
inline int unsent_bytes(int fd) {
  int n = -1;
  return ::ioctl(fd, SIOCOUTQNSD, &n) == 0 ? n : -1;
}

inline std::uint16_t local_port(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// 127.0.0.1:port (port 0: the kernel chooses one at bind).
inline sockaddr_in loopback_sockaddr(std::uint16_t port = 0) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// A listening TCP socket on 127.0.0.1 with a kernel-chosen port.
inline FileDescriptor loop_tcp_listener() {
  FileDescriptor fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = loopback_sockaddr();
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(fd.get(), 128) != 0) {
    ADD_FAILURE() << "listen: " << errno;
  }
  return fd;
}

inline FileDescriptor loop_tcp_socket() {
  return FileDescriptor(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
}

// A client of a loop_tcp_listener(): the connect is not waited for, the connection completes
// in the listener's backlog.
inline FileDescriptor loop_tcp_client(int listener) {
  FileDescriptor fd = loop_tcp_socket();
  sockaddr_in a = loopback_sockaddr(local_port(listener));
  ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  return fd;
}

// A bound UDP socket on 127.0.0.1.
inline FileDescriptor loop_udp_socket() {
  FileDescriptor fd(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  sockaddr_in a = loopback_sockaddr();
  ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  return fd;
}

// A temporary file, already unlinked.
inline FileDescriptor loop_temp_file() {
  std::string path = (std::filesystem::temp_directory_path() / "niox-loop-XXXXXX").string();
  int fd = ::mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) ADD_FAILURE() << "mkostemp: " << errno;
  ::unlink(path.c_str());
  return FileDescriptor(fd);
}

// A buffer holding `s`, flipped for reading (a copy: the loop may write into it).
inline ByteBuffer buffer_with(std::string_view s) {
  ByteBuffer b = ByteBuffer::allocate(s.size());
  b.put(s);
  b.flip();
  return b;
}

// [0, position) of a buffer read into.
inline std::string filled(ByteBuffer b) {
  b.flip();
  return std::string(b.string_view());
}

// Reads from `fd` on `loop`, `chunk` bytes at a time, appending to `got` until it holds `want`
// bytes; every read must bring some.
inline void read_into(EventLoop& loop, int fd, std::size_t chunk, std::size_t want,
                      std::string& got) {
  loop.read(fd, ByteBuffer::allocate(chunk),
            [&loop, fd, chunk, want, &got](std::error_code ec, std::size_t n, ByteBuffer buf) {
              ASSERT_FALSE(ec);
              ASSERT_GT(n, 0u);
              buf.flip();
              got.append(buf.string_view());
              if (got.size() < want) read_into(loop, fd, chunk, want, got);
            });
}

// Runs turns until pred() holds or `limit` passes; returns pred().
template <class Pred>
bool run_until(EventLoop& loop, Pred pred,
               std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (!pred() && std::chrono::steady_clock::now() < end)
    loop.run_once(std::chrono::milliseconds(10));
  return pred();
}

}  // namespace niox::test
