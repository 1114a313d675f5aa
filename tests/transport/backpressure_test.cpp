// Backpressure and connection set-up end to end, on every backend: a client that floods
// requests and never reads replies, AUTO_READ off on a listening channel, CONNECT_TIMEOUT.
#include <niox/transport/bootstrap.hpp>
#include <niox/transport/transport_error.hpp>

#include "../support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include <fcntl.h>

using namespace niox;
using namespace niox::test;

namespace {

class BackpressureTest : public DescriptorCheckedTest {};

// An echo server that respects writability: it stops reading when its channel becomes
// unwritable and reads again when it is writable (Netty's usual idiom).
class BackpressureEcho : public ChannelHandler {
 public:
  std::atomic<std::size_t> max_pending{0};
  std::atomic<int> pauses{0}, resumes{0};

  void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
    ctx.write(std::move(msg));
    note(ctx);
    if (!ctx.channel().is_writable() && ctx.channel().config().is_auto_read()) {
      ++pauses;
      ctx.channel().config().set_auto_read(false);
    }
  }
  void channel_read_complete(ChannelHandlerContext& ctx) override {
    ctx.flush();
    note(ctx);
  }
  void channel_writability_changed(ChannelHandlerContext& ctx) override {
    if (ctx.channel().is_writable() && !ctx.channel().config().is_auto_read()) {
      ++resumes;
      ctx.channel().config().set_auto_read(true);
    }
  }
  void exception_caught(ChannelHandlerContext& ctx, std::exception_ptr) override { ctx.close(); }

 private:
  void note(ChannelHandlerContext& ctx) {
    std::size_t p = ctx.channel().outbound_buffer().total_pending_bytes();
    if (p > max_pending.load(std::memory_order_relaxed))
      max_pending.store(p, std::memory_order_relaxed);
  }
};

// Row "a client that floods requests and never reads replies": reading pauses, the server's
// queued bytes stay bounded by the high water mark plus one read; once the client reads again
// every byte comes back in order.
TEST_P(BackpressureTest, FloodingClientThatNeverReadsIsPushedBackWithBoundedMemory) {
  constexpr std::size_t kHigh = 128 * 1024;
  auto echo = std::make_shared<BackpressureEcho>();
  TestServer server(options(), 1);
  server.bootstrap()
      .child_option(channel_option::write_buffer_water_mark, WriteBufferWaterMark{32 * 1024, kHigh})
      .child_option(channel_option::so_sndbuf, 64 * 1024)
      .child_option(channel_option::so_rcvbuf, 64 * 1024)
      .child_handler(init([echo](Channel& ch) { ch.pipeline().add_last(echo); }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  PeerSocket peer(addr);
  int small = 64 * 1024;
  ::setsockopt(peer.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  ::setsockopt(peer.fd(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);

  auto data = pseudo_random_bytes(32 << 20, 17);
  // Phase 1: only write, until the server has stopped taking bytes for a while.
  std::size_t sent = 0;
  auto stalled_since = std::chrono::steady_clock::now();
  auto deadline = stalled_since + std::chrono::seconds(20);
  bool stalled = false;
  while (sent < data.size() && std::chrono::steady_clock::now() < deadline) {
    ssize_t n =
        ::send(peer.fd(), data.data() + sent, std::min<std::size_t>(65536, data.size() - sent),
               MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      stalled_since = std::chrono::steady_clock::now();
      continue;
    }
    ASSERT_TRUE(n < 0 && (errno == EAGAIN || errno == EINTR)) << std::strerror(errno);
    if (std::chrono::steady_clock::now() - stalled_since > std::chrono::milliseconds(300)) {
      stalled = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(stalled) << "the server kept reading " << sent
                       << " bytes from a client that never reads";
  EXPECT_GE(echo->pauses.load(), 1);
  // Bounded: the high water mark plus what one read can bring (64 KiB buffers at most).
  EXPECT_LE(echo->max_pending.load(), kHigh + 64 * 1024);

  // Phase 2: the client reads again; everything sent comes back, in order, and the rest of the
  // data goes through too.
  std::vector<std::byte> got;
  got.reserve(data.size());
  std::vector<std::byte> buf(65536);
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (got.size() < data.size() && std::chrono::steady_clock::now() < deadline) {
    pollfd p{peer.fd(), static_cast<short>(POLLIN | (sent < data.size() ? POLLOUT : 0)), 0};
    if (::poll(&p, 1, 1000) <= 0) continue;
    if ((p.revents & POLLOUT) && sent < data.size()) {
      ssize_t n =
          ::send(peer.fd(), data.data() + sent, std::min<std::size_t>(65536, data.size() - sent),
                 MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<std::size_t>(n);
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t k = ::recv(peer.fd(), buf.data(), buf.size(), MSG_DONTWAIT);
      ASSERT_NE(k, 0) << "the server closed early";
      if (k > 0) got.insert(got.end(), buf.begin(), buf.begin() + k);
      if (k < 0) {
        ASSERT_TRUE(errno == EAGAIN || errno == EINTR) << std::strerror(errno);
      }
    }
  }
  ASSERT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data);
  EXPECT_GE(echo->resumes.load(), 1);
  EXPECT_LE(echo->max_pending.load(), kHigh + 64 * 1024);
}

// AUTO_READ off on a listening channel: no connection is accepted until read(), each read()
// accepts one, and turning AUTO_READ on accepts the rest. Waiting connections sit in the
// kernel's backlog meanwhile (their connect() has completed).
TEST_P(BackpressureTest, AutoReadOffOnTheServerChannelPausesAccepting) {
  std::atomic<int> accepted{0};
  std::mutex mu;
  std::vector<std::shared_ptr<Channel>> children;
  TestServer server(options(), 1);
  server.bootstrap().option(channel_option::auto_read, false).child_handler(init([&](Channel& ch) {
    std::lock_guard lock(mu);
    children.push_back(ch.shared_from_this());
    ++accepted;
  }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  auto listener = server.channel();
  ASSERT_TRUE(listener);
  constexpr int kClients = 4;
  std::vector<std::unique_ptr<PeerSocket>> peers;
  for (int i = 0; i < kClients; ++i) peers.push_back(std::make_unique<PeerSocket>(addr));

  auto settle = [] { std::this_thread::sleep_for(std::chrono::milliseconds(150)); };
  auto wait_accepted = [&](int n) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (accepted.load() < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };
  settle();
  EXPECT_EQ(accepted.load(), 0) << "accepted without read()";
  listener->read();
  wait_accepted(1);
  settle();
  EXPECT_EQ(accepted.load(), 1);
  listener->read();
  wait_accepted(2);
  settle();
  EXPECT_EQ(accepted.load(), 2);
  // AUTO_READ on: accepts the waiting ones and keeps accepting.
  listener->event_loop().execute([listener] { listener->config().set_auto_read(true); });
  wait_accepted(kClients);
  EXPECT_EQ(accepted.load(), kClients);
  PeerSocket late(addr);
  wait_accepted(kClients + 1);
  EXPECT_EQ(accepted.load(), kClients + 1);
  // And off again: the connection at hand is still taken, then accepting stops.
  std::promise<void> off;
  listener->event_loop().execute([&] {
    listener->config().set_auto_read(false);
    off.set_value();
  });
  auto o = off.get_future();
  wait_for(o);
  PeerSocket later1(addr);
  wait_accepted(kClients + 2);
  settle();
  PeerSocket later2(addr);
  settle();
  EXPECT_EQ(accepted.load(), kClients + 2) << "kept accepting with AUTO_READ off";
  listener->read();
  wait_accepted(kClients + 3);
  EXPECT_EQ(accepted.load(), kClients + 3);
  std::lock_guard lock(mu);
  for (auto& c : children) await_for(c->close());
}

// CONNECT_TIMEOUT: a connect to a listener that never answers (its accept queue is full, so
// the kernel drops our SYNs) fails with ETIMEDOUT after the timeout and leaks no descriptor.
TEST_P(BackpressureTest, ConnectTimeoutFailsTheConnectToAListenerThatNeverAnswers) {
  // A listener with a backlog of 0 that never accepts; fill its queue.
  FileDescriptor listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(listener.valid());
  const int lfd = listener.get();
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(lfd, 0), 0);
  socklen_t alen = sizeof a;
  ASSERT_EQ(::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &alen), 0);
  std::vector<FileDescriptor> fillers;
  bool saturated = false;
  for (int i = 0; i < 16 && !saturated; ++i) {
    fillers.emplace_back(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    ASSERT_TRUE(fillers.back().valid());
    const int fd = fillers.back().get();
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    if (rc == 0) continue;
    ASSERT_EQ(errno, EINPROGRESS);
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 300) == 0) saturated = true;  // our SYN was dropped
  }
  if (!saturated) {
    GTEST_SKIP() << "this kernel answers a listener with a full accept queue";
  }
  EventLoopGroup group(TestServer::group_options(options(), 1));
  std::atomic<int> inactive{0};
  auto h = std::make_shared<LambdaHandler>();
  h->on_inactive = [&](ChannelHandlerContext&) { ++inactive; };
  Bootstrap b;
  b.group(group)
      .option(channel_option::connect_timeout, std::chrono::milliseconds(200))
      .handler(init([h](Channel& ch) { ch.pipeline().add_last(h); }));
  auto f = b.connect(InetSocketAddress::loopback_v4(ntohs(a.sin_port)));
  auto ec = await_for(f);
  EXPECT_EQ(ec, std::errc::timed_out) << ec.message();
  ASSERT_TRUE(f.channel());
  await_for(f.channel()->close_future());
  EXPECT_FALSE(f.channel()->is_open());
  EXPECT_EQ(inactive.load(), 0) << "never active, so never inactive";
  group.shutdown_gracefully();
}

NIOX_INSTANTIATE_BACKENDS(BackpressureTest);

}  // namespace
