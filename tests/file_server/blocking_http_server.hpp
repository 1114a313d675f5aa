// A minimal blocking loopback server around HttpServerConnection, for interop tests with real
// clients (curl) until the transport exists: one thread, connections served one at a time,
// head and small body in one sendmsg, file regions with sendfile, an OpenFileCache like an
// event loop's. Test scaffolding only.
#pragma once

#include "http_server_connection.hpp"

#include <niox/base/file_descriptor.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace niox::http::testing {

class BlockingHttpServer {
 public:
  explicit BlockingHttpServer(const StaticFileResponder& responder) : responder_(responder) {
    ::signal(SIGPIPE, SIG_IGN);
    listener_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int l = listener_.get();
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (!listener_ || ::bind(l, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(l, 16) != 0 || ::getsockname(l, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("cannot listen on loopback");
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~BlockingHttpServer() {
    stop_ = true;
    thread_.join();
  }

  std::uint16_t port() const { return port_; }
  std::string url(std::string_view path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + std::string(path);
  }
  int connections() const { return connections_; }

 private:
  void run() {
    while (!stop_) {
      pollfd p{listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      FileDescriptor connection(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!connection) continue;
      ++connections_;
      const int fd = connection.get();
      timeval tv{5, 0};  // a stuck client cannot hang the test
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      serve(fd);
    }
  }

  static bool send_all(int fd, const ByteBuffer& a, const ByteBuffer& b) {
    iovec iov[2] = {{const_cast<std::byte*>(a.bytes().data()), a.remaining()},
                    {const_cast<std::byte*>(b.bytes().data()), b.remaining()}};
    std::size_t total = a.remaining() + b.remaining();
    std::size_t sent = 0;
    while (sent < total) {
      msghdr msg{};
      // Skip what was sent already.
      iovec rest[2];
      int n = 0;
      std::size_t skip = sent;
      for (auto& v : iov) {
        if (skip >= v.iov_len) {
          skip -= v.iov_len;
          continue;
        }
        rest[n++] = {static_cast<char*>(v.iov_base) + skip, v.iov_len - skip};
        skip = 0;
      }
      msg.msg_iov = rest;
      msg.msg_iovlen = static_cast<std::size_t>(n);
      ssize_t w = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      sent += static_cast<std::size_t>(w);
    }
    return true;
  }

  void serve(int fd) {
    HttpServerConnection conn(responder_, {}, 32, &cache_);
    std::vector<HttpResponse> queue;
    std::string pending;
    char buf[16384];
    while (true) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      pending.append(buf, static_cast<std::size_t>(n));
      while (true) {
        auto in = ByteBuffer::wrap(std::string_view(pending));
        conn.on_read(in, queue);
        pending.erase(0, in.position());
        const bool progressed = !queue.empty();
        for (auto& r : queue) {
          if (!send_all(fd, r.head, r.body)) return;
          if (r.has_file_region()) {
            off_t off = static_cast<off_t>(r.file_offset);
            std::uint64_t left = r.file_count;
            while (left > 0) {
              ssize_t w = ::sendfile(fd, r.file.get(), &off, left);
              if (w < 0 && errno == EINTR) continue;
              if (w <= 0) return;
              left -= static_cast<std::uint64_t>(w);
            }
          }
        }
        queue.clear();
        if (conn.is_closing()) {
          ::shutdown(fd, SHUT_WR);
          return;
        }
        if (!progressed || pending.empty()) break;
      }
    }
  }

  const StaticFileResponder& responder_;
  OpenFileCache cache_;  // used by the server thread only, like an event loop's
  FileDescriptor listener_;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
};

}  // namespace niox::http::testing
