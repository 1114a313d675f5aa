// The read path's pooled receive buffers end to end, on every backend: sized adaptively (they
// grow for bulk transfers and shrink again for small messages) and taken from the loop
// thread's BufferPool, whose blocks are reused.
#include <niox/buffer/buffer_pool.hpp>
#include <niox/transport/bootstrap.hpp>

#include "../support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

using namespace niox;
using namespace niox::test;

namespace {

class RecvBufferTest : public DescriptorCheckedTest {};

TEST_P(RecvBufferTest, ReceiveBuffersGrowAndShrinkWithReadSizesAndComeFromThePool) {
  struct State {
    std::mutex mu;
    std::vector<std::size_t> capacities;
    BufferPool::Stats first{}, last{};
    bool have_first = false;
  };
  auto st = std::make_shared<State>();
  auto echo = std::make_shared<EchoHandler>();
  auto probe = std::make_shared<LambdaHandler>();
  probe->on_read = [st](ChannelHandlerContext& ctx, Message&& m) {
    auto* b = m.get_if<ByteBuffer>();
    ASSERT_NE(b, nullptr);
    {
      std::lock_guard lock(st->mu);
      st->capacities.push_back(b->capacity());
      // On the loop thread: its pool served this buffer.
      auto s = BufferPool::for_this_thread().stats();
      if (!st->have_first) st->first = s, st->have_first = true;
      st->last = s;
    }
    ctx.fire_channel_read(std::move(m));
  };
  // Pooled receive buffers on every backend: io_uring's buffer ring (fixed-size buffers, the
  // guess bounding only how much a recv takes) is tested in tests/loop/buffer_ring_test.cpp.
  EventLoop::Options pooled = options();
  pooled.receive_ring_entries = 0;
  TestServer server(pooled, 1);
  server.bootstrap().child_handler(init([probe, echo](Channel& ch) {
    ch.pipeline().add_last("probe", probe).add_last("echo", echo);
  }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  PeerSocket peer(addr);

  // Bulk: full reads grow the buffers to the maximum.
  auto bulk = pseudo_random_bytes(8 << 20, 8);
  auto back = peer.exchange(bulk, bulk.size());
  ASSERT_TRUE(back == bulk);
  std::size_t bulk_reads;
  {
    std::lock_guard lock(st->mu);
    bulk_reads = st->capacities.size();
    EXPECT_EQ(*std::max_element(st->capacities.begin(), st->capacities.end()), 65536u);
  }
  // Small request/response: the guess shrinks again.
  for (int i = 0; i < 200; ++i) {
    auto msg = pseudo_random_bytes(100, static_cast<std::uint64_t>(i));
    peer.send_all(msg);
    ASSERT_TRUE(peer.recv_exact(msg.size()) == msg) << i;
  }
  std::lock_guard lock(st->mu);
  ASSERT_GT(st->capacities.size(), bulk_reads);
  EXPECT_LE(st->capacities.back(), 256u) << "the receive buffer did not shrink";
  // Pooled: the loop's pool served the reads and reused its blocks.
  EXPECT_GE(st->last.allocations - st->first.allocations, st->capacities.size() - 1);
  EXPECT_GT(st->last.reused - st->first.reused, (st->capacities.size() - 1) / 2);
}

NIOX_INSTANTIATE_BACKENDS(RecvBufferTest);

}  // namespace
