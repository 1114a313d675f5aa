// A channel's read batch (Netty's read loop): after a receive that filled its buffer the channel
// reads on without waiting until the socket is drained, and the loop hears of it, so the next
// receive neither tries an empty socket first nor waits on a full one. Run on every backend.
#include <niox/transport/bootstrap.hpp>

#include "../support/transport_sockets.hpp"

#include <gtest/gtest.h>

using namespace niox;
using namespace niox::test;

namespace {

class ReadBatchTest : public DescriptorCheckedTest {};

// Bursts larger than one ring buffer (16 KiB) and no larger than the channel's biggest read
// (64 KiB): on io_uring the ring's receive takes 16 KiB and the batch reads the rest at once,
// draining the socket. The channel's next receive must then wait in the ring, not try the
// socket with a pooled buffer first (a speculative receive that can only find EAGAIN).
TEST_P(ReadBatchTest, ABatchThatDrainedTheSocketLeavesNoTryOfItForTheNextReceive) {
  TestServer server(options(), 1);
  server.bootstrap().child_handler(std::make_shared<EchoHandler>());
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  EventLoop& loop = server.workers().loop(0);

  PeerSocket client(addr);
  for (std::uint64_t round = 0; round < 8; ++round) {
    const auto burst = pseudo_random_bytes(64 * 1024, round);
    client.send_all(burst);
    ASSERT_EQ(client.recv_exact(burst.size()), burst) << "round " << round;
  }
  const LoopCounters c = counters_after_a_turn(loop);
  EXPECT_EQ(c.speculative_misses, 0u) << fmt::format("{}", c);
  client.close();
  server.stop();
}

// accept returns once the handshake is done, and the peer's first bytes come after it: the
// first receive of an accepted connection waits for them (epoll's edge, io_uring's
// IORING_RECVSEND_POLL_FIRST) instead of trying the empty socket first. Each client here sends
// only after the server's loop has made two turns since the connection became active, so a
// first read that tried the socket has found it empty by then.
TEST_P(ReadBatchTest, AnAcceptedConnectionsFirstReceiveWaitsForItsBytes) {
  constexpr int kConnections = 8;
  // Made before the server starts and never reassigned: the loop thread takes them in turn (the
  // connect that orders a client after the last one is invisible to ThreadSanitizer).
  struct Activations {
    std::vector<std::promise<void>> each = std::vector<std::promise<void>>(kConnections);
    std::atomic<int> next{0};
  };
  auto activations = std::make_shared<Activations>();
  std::vector<std::future<void>> ready;
  for (auto& p : activations->each) ready.push_back(p.get_future());
  TestServer server(options(), 1);
  auto echo = std::make_shared<EchoHandler>();
  server.bootstrap().child_handler(init([activations, echo](Channel& ch) {
    auto signal = std::make_shared<LambdaHandler>();
    signal->on_active = [activations](ChannelHandlerContext& ctx) {
      Executor& ex = ctx.executor();
      std::promise<void>* p = &activations->each.at(static_cast<std::size_t>(activations->next++));
      // Tasks run at the start of a turn: the second runs after the turn that made the read.
      ex.execute([p, &ex] { ex.execute([p] { p->set_value(); }); });
      ctx.fire_channel_active();
    };
    ch.pipeline().add_last("signal", signal).add_last("echo", echo);
  }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  EventLoop& loop = server.workers().loop(0);
  const LoopCounters before = counters_after_a_turn(loop);
  for (int i = 0; i < kConnections; ++i) {
    PeerSocket client(addr);
    wait_for(ready[static_cast<std::size_t>(i)]);
    const auto hello = pseudo_random_bytes(100, static_cast<std::uint64_t>(i));
    client.send_all(hello);
    ASSERT_EQ(client.recv_exact(hello.size()), hello) << "connection " << i;
  }
  const LoopCounters after = counters_after_a_turn(loop);
  if (loop.backend() == BackendKind::epoll) {
    // Before, each connection's first recv found EAGAIN.
    EXPECT_EQ(after.would_block - before.would_block, 0u) << fmt::format("{}", after);
  }
  server.stop();
}

}  // namespace

NIOX_INSTANTIATE_BACKENDS(ReadBatchTest);
