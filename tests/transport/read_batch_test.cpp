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
  // One task through the loop: the completions of the receives it submitted are reaped.
  auto p = std::make_shared<std::promise<LoopCounters>>();
  auto f = p->get_future();
  loop.execute([p, &loop] { p->set_value(loop.counters()); });
  const LoopCounters c = wait_for(f);
  EXPECT_EQ(c.speculative_misses, 0u) << fmt::format("{}", c);
  client.close();
  server.stop();
}

}  // namespace

NIOX_INSTANTIATE_BACKENDS(ReadBatchTest);
