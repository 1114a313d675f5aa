// Idle connections hold no receive buffer, on every backend: 9,000 of them, client and server in
// this one process (two descriptors each, under the 20,000 this machine allows), each after one
// echo, and the server loop's BufferPool has nothing outstanding.
#include <niox/buffer/buffer_pool.hpp>
#include <niox/transport/bootstrap.hpp>

#include "../support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include <sys/resource.h>

using namespace niox;
using namespace niox::test;

namespace {

class IdleConnectionsTest : public DescriptorCheckedTest {};

constexpr int kConnections = 9000;

// Raises this process's descriptor limit to its hard limit; false when that still cannot hold
// `n` connections (a client and a server descriptor each) and the rest of the test process.
bool room_for_connections(int n) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return false;
  r.rlim_cur = r.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &r);
  return r.rlim_cur >= static_cast<rlim_t>(2 * n + 500);
}

BufferPool::Stats pool_stats_of(EventLoop& loop) {
  auto p = std::make_shared<std::promise<BufferPool::Stats>>();
  auto f = p->get_future();
  loop.execute([p] { p->set_value(BufferPool::for_this_thread().stats()); });
  return wait_for(f);
}

// The loop's outstanding count once the write completions of the last echoes have run (the
// client may read an echo before the server's loop has seen its write complete).
std::uint64_t settled_outstanding(EventLoop& loop) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::uint64_t n = pool_stats_of(loop).outstanding;
  while (n != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    n = pool_stats_of(loop).outstanding;
  }
  return n;
}

// An echo handler that counts the channels that went active and inactive.
class CountingEcho final : public EchoHandler {
 public:
  std::atomic<int> active{0};
  std::atomic<int> inactive{0};
  void channel_active(ChannelHandlerContext& ctx) override {
    ++active;
    ctx.fire_channel_active();
  }
  void channel_inactive(ChannelHandlerContext& ctx) override {
    ++inactive;
    ctx.fire_channel_inactive();
  }
};

// 9,000 connections, one echo each, then idle: the server loop's pool has no buffer out.
void hold_idle_connections(const EventLoop::Options& options) {
  TestServer server(options, 1);
  auto echo = std::make_shared<CountingEcho>();  // shared: it keeps no per-connection state
  server.bootstrap().child_handler(echo);
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  EventLoop& loop = server.workers().loop(0);

  std::vector<std::unique_ptr<PeerSocket>> clients;
  clients.reserve(kConnections);
  const auto message = pseudo_random_bytes(64, 9);
  for (int i = 0; i < kConnections; ++i) {
    clients.push_back(std::make_unique<PeerSocket>(addr));
    clients.back()->send_all(message);
    ASSERT_EQ(clients.back()->recv_exact(message.size()), message) << "connection " << i;
  }
  EXPECT_GT(pool_stats_of(loop).allocations + loop.counters().ring_receives, 0u)
      << "the echoes went through neither the pool nor the ring";

  EXPECT_EQ(settled_outstanding(loop), 0u) << "buffers held by idle connections";
  EXPECT_EQ(echo->active.load(), kConnections);
  EXPECT_EQ(echo->inactive.load(), 0) << "an idle connection was closed";

  clients.clear();
  server.stop();
  EXPECT_EQ(echo->inactive.load(), kConnections);
}

TEST_P(IdleConnectionsTest, NineThousandIdleConnectionsHoldNoPooledBuffer) {
  if (!room_for_connections(kConnections)) {
    GTEST_SKIP() << "the descriptor limit cannot hold " << kConnections << " connections";
  }
  hold_idle_connections(options());
}

// Without a buffer ring (a kernel before 5.19, or receive_ring_entries = 0) every io_uring
// receive reads into a pooled buffer: still none may wait in the kernel for a quiet socket.
TEST_P(IdleConnectionsTest, NineThousandIdleConnectionsWithoutABufferRingHoldNoPooledBuffer) {
  if (!room_for_connections(kConnections)) {
    GTEST_SKIP() << "the descriptor limit cannot hold " << kConnections << " connections";
  }
  EventLoop::Options o = options();
  o.receive_ring_entries = 0;
  hold_idle_connections(o);
}

// The count the test above relies on sees a buffer a handler keeps: one connection whose
// handler holds what it received shows as one outstanding buffer. Only where receives come
// from the pool (epoll, io_uring's per-operation fallback, or a ring that is off).
TEST_P(IdleConnectionsTest, ABufferAHandlerKeepsIsOutstanding) {
  EventLoop::Options o = options();
  o.receive_ring_entries = 0;  // receives from the pool on every backend
  TestServer server(o, 1);
  auto kept = std::make_shared<std::vector<ByteBuffer>>();
  server.bootstrap().child_handler(init([kept](Channel& ch) {
    auto h = std::make_shared<LambdaHandler>();
    h->on_read = [kept](ChannelHandlerContext&, Message&& m) {
      if (auto* b = m.get_if<ByteBuffer>()) kept->push_back(*b);
    };
    ch.pipeline().add_last(h);
  }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  EventLoop& loop = server.workers().loop(0);
  PeerSocket client(addr);
  client.send_all("hello");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (pool_stats_of(loop).outstanding == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(pool_stats_of(loop).outstanding, 1u);
  loop.execute([kept] { kept->clear(); });
  EXPECT_EQ(settled_outstanding(loop), 0u);
}

NIOX_INSTANTIATE_BACKENDS(IdleConnectionsTest);

}  // namespace
