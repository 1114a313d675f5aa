// What a flush does with the bytes, on every backend. On epoll it sends what the socket takes
// at once itself (Netty's flush) and completes the writes that covers before it returns; the
// loop's write takes what a full socket left. On io_uring the ring carries every send.
#include <niox/transport/bootstrap.hpp>

#include "../support/transport_sockets.hpp"

#include <gtest/gtest.h>

using namespace niox;
using namespace niox::test;

namespace {

class FlushTest : public DescriptorCheckedTest {};

// A write that fits in the socket: on epoll its future is done when write_and_flush returns
// (before, the loop's write made the same send a turn later); on io_uring it completes with
// its completion. Either way the peer gets the bytes once, in order.
TEST_P(FlushTest, AWriteTheSocketTakesCompletesInTheFlushOnEpoll) {
  struct Seen {
    std::promise<bool> done_on_return;
  };
  auto seen = std::make_shared<Seen>();
  auto h = std::make_shared<LambdaHandler>();
  h->on_read = [seen](ChannelHandlerContext& ctx, Message msg) {
    ChannelFuture f = ctx.write_and_flush(std::move(msg));
    seen->done_on_return.set_value(f.is_done() && f.is_success());
  };
  TestServer server(options(), 1);
  server.bootstrap().child_handler(init([h](Channel& ch) { ch.pipeline().add_last(h); }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));

  PeerSocket client(addr);
  const auto hello = pseudo_random_bytes(300, 7);
  client.send_all(hello);
  EXPECT_EQ(client.recv_exact(hello.size()), hello);
  auto f = seen->done_on_return.get_future();
  const bool done = wait_for(f);
  EXPECT_EQ(done, server.workers().loop(0).backend() == BackendKind::epoll);
  client.close();
  server.stop();
}

// A write far larger than the socket takes at once: the flush sends what fits (on epoll, itself)
// and the loop's write the rest as the peer reads; every byte arrives once, in order, and the
// write's future succeeds only after the last of them went out.
TEST_P(FlushTest, AWriteLargerThanTheSocketTakesIsFinishedByTheLoop) {
  constexpr std::size_t kBytes = 8u << 20;
  const auto payload = pseudo_random_bytes(kBytes, 11);
  struct Seen {
    std::promise<void> flushed;
    std::promise<std::error_code> written;
    bool done_on_return = true;
  };
  auto seen = std::make_shared<Seen>();
  auto h = std::make_shared<LambdaHandler>();
  h->on_active = [seen, &payload](ChannelHandlerContext& ctx) {
    ByteBuffer b = ByteBuffer::allocate(payload.size());
    b.put(std::span<const std::byte>(payload));
    b.flip();
    ChannelFuture f = ctx.write_and_flush(std::move(b));
    seen->done_on_return = f.is_done();
    f.add_listener([seen](const std::error_code& ec) { seen->written.set_value(ec); });
    seen->flushed.set_value();
    ctx.fire_channel_active();
  };
  TestServer server(options(), 1);
  server.bootstrap().child_handler(init([h](Channel& ch) { ch.pipeline().add_last(h); }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));

  PeerSocket client(addr);
  auto flushed = seen->flushed.get_future();
  wait_for(flushed);  // the socket is full now: the rest waits for the reads below
  const auto got = client.recv_exact(kBytes);
  ASSERT_EQ(got.size(), kBytes);
  EXPECT_EQ(fnv1a(got), fnv1a(payload));
  auto written = seen->written.get_future();
  EXPECT_FALSE(wait_for(written));
  EXPECT_FALSE(seen->done_on_return);
  client.close();
  server.stop();
}

}  // namespace

NIOX_INSTANTIATE_BACKENDS(FlushTest);
