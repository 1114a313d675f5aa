// Helpers for tests of the loop-backed socket transport: a server on its own EventLoopGroups
// and blocking peers with bounded waits.
#pragma once

#include <niox/base/file_descriptor.hpp>
#include <niox/transport/bootstrap.hpp>

#include "backends.hpp"
#include "blocking_sockets.hpp"
#include "open_fds.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <cstddef>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

namespace niox::test {

// The transport's Channel and the channels layer's Channel share a name, so this header stays
// clear of the channels test helpers and carries the few it needs.

// A test on every backend that fails if it leaves a descriptor open behind it.
class DescriptorCheckedTest : public BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    fds_before_ = open_fd_count();
  }
  void TearDown() override {
    if (!IsSkipped()) {
      EXPECT_EQ(open_fd_count(), fds_before_) << "descriptor leak";
    }
  }
  int fds_before_ = 0;
};

inline std::vector<std::byte> pseudo_random_bytes(std::size_t n, std::uint64_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937_64 g(seed);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w = g();
    std::memcpy(v.data() + i, &w, 8);
  }
  for (; i < n; ++i) v[i] = static_cast<std::byte>(g());
  return v;
}

inline std::uint64_t fnv1a(std::span<const std::byte> d) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (std::byte b : d) h = (h ^ static_cast<std::uint8_t>(b)) * 0x100000001B3ull;
  return h ^ d.size();
}

inline std::span<const std::byte> text_bytes(std::string_view s) {
  return std::as_bytes(std::span(s));
}
inline ByteBuffer text(std::string_view s) { return ByteBuffer::wrap(s); }

inline bool ipv6_loopback_usable() {
  FileDescriptor fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  return ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
}

// Waits for a std::future for at most `seconds` (tests stop by themselves).
template <class T>
T wait_for(std::future<T>& f, int seconds = 20) {
  if (f.wait_for(std::chrono::seconds(seconds)) != std::future_status::ready) {
    throw std::runtime_error("timed out waiting for the transport");
  }
  return f.get();
}

inline std::error_code await_for(const ChannelFuture& future, int seconds = 20) {
  auto done = std::make_shared<std::promise<std::error_code>>();
  auto f = done->get_future();
  ChannelFuture copy = future;
  copy.add_listener([done](const std::error_code& ec) { done->set_value(ec); });
  return wait_for(f, seconds);
}

// A blocking client socket with 20 s send/receive timeouts; it owns the socket until close() or
// its destruction.
class PeerSocket {
 public:
  explicit PeerSocket(const SocketAddress& to)
      : fd_(::socket(to.family(), SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (!fd_) throw std::system_error(errno, std::system_category(), "socket");
    timeval tv{20, 0};
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_storage ss{};
    socklen_t len = to.to_native(ss);
    int rc = connect_blocking(fd_.get(), reinterpret_cast<sockaddr*>(&ss), len, 20000);
    if (rc != 0) throw std::system_error(errno, std::system_category(), "connect");
  }
  PeerSocket(const PeerSocket&) = delete;
  PeerSocket& operator=(const PeerSocket&) = delete;

  // The socket's number, -1 once closed.
  int fd() const { return fd_.get(); }
  void close() { fd_.reset(); }
  void send_all(std::span<const std::byte> data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw std::system_error(errno, std::system_category(), "send");
      data = data.subspan(static_cast<std::size_t>(n));
    }
  }
  void send_all(std::string_view s) { send_all(text_bytes(s)); }
  // Exactly n bytes (fewer only at EOF).
  std::vector<std::byte> recv_exact(std::size_t n) {
    std::vector<std::byte> out(n);
    std::size_t got = 0;
    while (got < n) {
      ssize_t k = ::recv(fd_.get(), out.data() + got, n - got, 0);
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) throw std::system_error(errno, std::system_category(), "recv");
      if (k == 0) break;
      got += static_cast<std::size_t>(k);
    }
    out.resize(got);
    return out;
  }
  // Everything until EOF (throws on a timeout or an error such as ECONNRESET).
  std::vector<std::byte> recv_to_eof() {
    std::vector<std::byte> out;
    std::byte buf[65536];
    for (;;) {
      ssize_t k = ::recv(fd_.get(), buf, sizeof buf, 0);
      if (k < 0 && errno == EINTR) continue;  // io_uring's task work can interrupt a blocked call
      if (k < 0) throw std::system_error(errno, std::system_category(), "recv");
      if (k == 0) return out;
      out.insert(out.end(), buf, buf + k);
    }
  }
  // Sends `data` while reading what comes back, until `expect` bytes arrived (poll, bounded).
  std::vector<std::byte> exchange(std::span<const std::byte> data, std::size_t expect) {
    std::vector<std::byte> got;
    std::size_t sent = 0;
    std::byte buf[65536];
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (got.size() < expect) {
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error("exchange timed out");
      pollfd p{fd_.get(), static_cast<short>(POLLIN | (sent < data.size() ? POLLOUT : 0)), 0};
      if (::poll(&p, 1, 1000) <= 0) continue;
      if ((p.revents & POLLOUT) && sent < data.size()) {
        ssize_t n =
            ::send(fd_.get(), data.data() + sent, std::min<std::size_t>(data.size() - sent, 65536),
                   MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) sent += static_cast<std::size_t>(n);
      }
      if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t k = ::recv(fd_.get(), buf, sizeof buf, MSG_DONTWAIT);
        if (k == 0) break;
        if (k > 0) got.insert(got.end(), buf, buf + k);
        if (k < 0 && errno != EAGAIN && errno != EINTR)
          throw std::system_error(errno, std::system_category(), "recv");
      }
    }
    return got;
  }

 private:
  FileDescriptor fd_;
};

// The loop's counters read on its own thread, after one task has gone through it: the
// completions of what it submitted before are reaped by then.
inline LoopCounters counters_after_a_turn(EventLoop& loop) {
  auto p = std::make_shared<std::promise<LoopCounters>>();
  auto f = p->get_future();
  loop.execute([p, &loop] { p->set_value(loop.counters()); });
  return wait_for(f);
}

// A ServerBootstrap on its own boss and worker groups for one backend variant.
class TestServer {
 public:
  TestServer(const EventLoop::Options& loop_options, std::size_t workers)
      : boss_(group_options(loop_options, 1)), workers_(group_options(loop_options, workers)) {
    bootstrap_.group(boss_, workers_);
  }
  ~TestServer() { stop(); }

  ServerBootstrap& bootstrap() { return bootstrap_; }
  EventLoopGroup& workers() { return workers_; }
  // The listening channel once started.
  const std::shared_ptr<LoopServerSocketChannel>& channel() const { return server_; }

  // Binds (port 0 / a fresh path) and returns the address to connect to.
  SocketAddress start(const SocketAddress& where) {
    auto f = bootstrap_.bind(where);
    if (auto ec = await_for(f)) throw std::system_error(ec, "bind");
    server_ = std::static_pointer_cast<LoopServerSocketChannel>(f.channel());
    return *server_->local_address();
  }
  void stop() {
    if (server_) {
      await_for(server_->close());
      server_.reset();
    }
    workers_.shutdown_gracefully();
    boss_.shutdown_gracefully();
  }

  static EventLoopGroup::Options group_options(const EventLoop::Options& o, std::size_t n) {
    EventLoopGroup::Options g;
    g.threads = n;
    g.loop = o;
    return g;
  }

 private:
  EventLoopGroup boss_;
  EventLoopGroup workers_;
  ServerBootstrap bootstrap_;
  std::shared_ptr<LoopServerSocketChannel> server_;
};

// A handler from lambdas, for tests.
class LambdaHandler : public ChannelHandler {
 public:
  std::function<void(ChannelHandlerContext&)> on_active, on_inactive, on_read_complete,
      on_writability;
  std::function<void(ChannelHandlerContext&, Message&&)> on_read;
  std::function<void(ChannelHandlerContext&, std::any)> on_event;
  std::function<void(ChannelHandlerContext&, std::exception_ptr)> on_exception;

  void channel_active(ChannelHandlerContext& ctx) override {
    on_active ? on_active(ctx) : (void)ctx.fire_channel_active();
  }
  void channel_inactive(ChannelHandlerContext& ctx) override {
    on_inactive ? on_inactive(ctx) : (void)ctx.fire_channel_inactive();
  }
  void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
    on_read ? on_read(ctx, std::move(msg)) : (void)ctx.fire_channel_read(std::move(msg));
  }
  void channel_read_complete(ChannelHandlerContext& ctx) override {
    on_read_complete ? on_read_complete(ctx) : (void)ctx.fire_channel_read_complete();
  }
  void channel_writability_changed(ChannelHandlerContext& ctx) override {
    on_writability ? on_writability(ctx) : (void)ctx.fire_channel_writability_changed();
  }
  void user_event_triggered(ChannelHandlerContext& ctx, std::any e) override {
    on_event ? on_event(ctx, std::move(e)) : (void)ctx.fire_user_event_triggered(std::move(e));
  }
  void exception_caught(ChannelHandlerContext& ctx, std::exception_ptr e) override {
    on_exception ? on_exception(ctx, e) : (void)ctx.close();
  }
};

// Echoes every buffer back.
class EchoHandler : public ChannelHandler {
 public:
  void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
    ctx.write(std::move(msg));
  }
  void channel_read_complete(ChannelHandlerContext& ctx) override { ctx.flush(); }
  void exception_caught(ChannelHandlerContext& ctx, std::exception_ptr) override { ctx.close(); }
};

inline std::shared_ptr<ChannelInitializer> init(std::function<void(Channel&)> f) {
  return std::make_shared<ChannelInitializer>(std::move(f));
}

}  // namespace niox::test
