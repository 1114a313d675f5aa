// Reading that pauses and resumes, on every backend: on io_uring with a buffer ring the channel
// reads with one multishot receive, which is stopped at each pause; bytes the kernel had
// already handed over are parked and fired first on resume. Whatever the backend, the pipeline
// sees the peer's stream whole and in order.
#include <niox/transport/bootstrap.hpp>

#include "../support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

using namespace niox;
using namespace niox::test;
using namespace std::chrono_literals;

namespace {

class MultishotReadTest : public DescriptorCheckedTest {};

struct Received {
  std::mutex mu;
  std::vector<std::byte> bytes;
  std::atomic<int> reads{0}, pauses{0}, reads_while_paused{0};
  std::atomic<bool> closed{false};
};

// AUTO_READ goes off after every third read and back on 1 ms later (from a timer, as a handler
// whose consumer caught up would): 8 MiB arrive through many pauses, none lost or reordered.
TEST_P(MultishotReadTest, PausingAndResumingAutoReadLosesNoByte) {
  auto st = std::make_shared<Received>();
  TestServer server(options(), 1);
  server.bootstrap().child_handler(init([st](Channel& ch) {
    auto h = std::make_shared<LambdaHandler>();
    h->on_read = [st](ChannelHandlerContext& ctx, Message m) {
      auto* b = m.get_if<ByteBuffer>();
      ASSERT_NE(b, nullptr);
      if (!ctx.channel().config().is_auto_read()) ++st->reads_while_paused;
      {
        std::lock_guard g(st->mu);
        st->bytes.insert(st->bytes.end(), b->bytes().begin(), b->bytes().end());
      }
      if (++st->reads % 3 == 0 && ctx.channel().config().is_auto_read()) {
        ++st->pauses;
        ctx.channel().config().set_auto_read(false);
        ctx.channel().executor().schedule(
            1ms, [ch = ctx.channel().shared_from_this()] { ch->config().set_auto_read(true); });
      }
    };
    h->on_inactive = [st](ChannelHandlerContext&) { st->closed = true; };
    ch.pipeline().add_last(h);
  }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  const auto data = pseudo_random_bytes(8 << 20, 29);
  {
    PeerSocket peer(addr);
    peer.send_all(data);
    ::shutdown(peer.fd(), SHUT_WR);
    auto deadline = std::chrono::steady_clock::now() + 60s;
    while (!st->closed && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(st->closed) << "the server never saw the end of the stream";
  std::lock_guard g(st->mu);
  ASSERT_EQ(st->bytes.size(), data.size());
  EXPECT_TRUE(st->bytes == data) << "bytes reordered or corrupted";
  EXPECT_GE(st->pauses.load(), 1);
  // A read() is answered with one channel_read; AUTO_READ off asks for none.
  EXPECT_EQ(st->reads_while_paused.load(), 0);
}

// AUTO_READ off from the start and one read() per channel_read_complete: each read() is
// answered, in order, until the end of the stream.
TEST_P(MultishotReadTest, ReadOnDemandGetsTheWholeStream) {
  auto st = std::make_shared<Received>();
  TestServer server(options(), 1);
  server.bootstrap()
      .child_option(channel_option::auto_read, false)
      .child_handler(init([st](Channel& ch) {
        auto h = std::make_shared<LambdaHandler>();
        h->on_active = [](ChannelHandlerContext& ctx) { ctx.read(); };
        h->on_read = [st](ChannelHandlerContext&, Message m) {
          auto* b = m.get_if<ByteBuffer>();
          ASSERT_NE(b, nullptr);
          ++st->reads;
          std::lock_guard g(st->mu);
          st->bytes.insert(st->bytes.end(), b->bytes().begin(), b->bytes().end());
        };
        h->on_read_complete = [](ChannelHandlerContext& ctx) { ctx.read(); };
        h->on_inactive = [st](ChannelHandlerContext&) { st->closed = true; };
        ch.pipeline().add_last(h);
      }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  const auto data = pseudo_random_bytes(2 << 20, 31);
  {
    PeerSocket peer(addr);
    peer.send_all(data);
    ::shutdown(peer.fd(), SHUT_WR);
    auto deadline = std::chrono::steady_clock::now() + 60s;
    while (!st->closed && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(st->closed) << "the server never saw the end of the stream";
  std::lock_guard g(st->mu);
  ASSERT_EQ(st->bytes.size(), data.size());
  EXPECT_TRUE(st->bytes == data) << "bytes reordered or corrupted";
}

NIOX_INSTANTIATE_BACKENDS(MultishotReadTest);

}  // namespace
