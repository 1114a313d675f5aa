// Reading that pauses and resumes, on every backend: on io_uring with a buffer ring the channel
// reads with one multishot receive, which is stopped at each pause; bytes the kernel had
// already handed over are parked and fired first on resume. Whatever the backend, the pipeline
// sees the peer's stream whole and in order.
#include <niox/transport/bootstrap.hpp>
#include <niox/transport/loop_socket_channel.hpp>

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
    h->on_read = [st](ChannelHandlerContext& ctx, Message&& m) {
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
        h->on_read = [st](ChannelHandlerContext&, Message&& m) {
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

// A connection that reads one request, answers and closes (HTTP with `Connection: close`)
// reads it with one single receive: no multishot is armed, so none has to be cancelled before
// its descriptor can close. Before, each such connection armed one and stopped it again.
TEST_P(MultishotReadTest, AConnectionThatReadsOnceAndClosesArmsNoMultishot) {
  constexpr int kConnections = 8;
  TestServer server(options(), 1);
  server.bootstrap().child_handler(init([](Channel& ch) {
    auto h = std::make_shared<LambdaHandler>();
    h->on_read = [](ChannelHandlerContext& ctx, Message&& m) {
      Channel& c = ctx.channel();
      c.config().set_auto_read(false);
      ctx.write(std::move(m));
      c.close_after_flush(ChannelPromise());
    };
    ch.pipeline().add_last(h);
  }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  EventLoop& loop = server.workers().loop(0);
  const LoopCounters before = counters_after_a_turn(loop);
  for (int i = 0; i < kConnections; ++i) {
    PeerSocket client(addr);
    const auto request = pseudo_random_bytes(300, static_cast<std::uint64_t>(i));
    client.send_all(request);
    ASSERT_EQ(client.recv_exact(request.size()), request) << "connection " << i;
    EXPECT_TRUE(client.recv_to_eof().empty()) << "connection " << i;
  }
  const LoopCounters after = counters_after_a_turn(loop);
  EXPECT_EQ(after.multishot_arms - before.multishot_arms, 0u) << fmt::format("{}", after);
  if (loop.has_multishot_receive()) {
    // The single receive still took its buffer from the ring.
    EXPECT_GE(after.ring_receives - before.ring_receives, std::uint64_t{kConnections});
  }
  server.stop();
}

// The multishots a server's loop armed while one client had `messages` echoed, one at a time;
// `handler` serves the connection.
std::uint64_t arms_while_echoing(const EventLoop::Options& options,
                                 std::shared_ptr<ChannelHandler> handler, int messages,
                                 bool& has_multishot) {
  TestServer server(options, 1);
  server.bootstrap().child_handler(std::move(handler));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  EventLoop& loop = server.workers().loop(0);
  has_multishot = loop.has_multishot_receive();
  const LoopCounters before = counters_after_a_turn(loop);
  PeerSocket client(addr);
  for (int i = 0; i < messages; ++i) {
    const auto message = pseudo_random_bytes(100, static_cast<std::uint64_t>(i));
    client.send_all(message);
    EXPECT_EQ(client.recv_exact(message.size()), message) << "message " << i;
  }
  const LoopCounters after = counters_after_a_turn(loop);
  client.close();
  server.stop();
  return after.multishot_arms - before.multishot_arms;
}

// A connection that goes on reading after its first read arms its multishot then, once.
TEST_P(MultishotReadTest, AConnectionThatKeepsReadingArmsItsMultishotAfterTheFirstRead) {
  bool has_multishot = false;
  const std::uint64_t arms =
      arms_while_echoing(options(), std::make_shared<EchoHandler>(), 6, has_multishot);
  EXPECT_EQ(arms, has_multishot ? 1u : 0u);
}

// Once the kernel decrypts what a channel reads (kernel TLS, which a client's handshake can
// switch on in its first read), the channel reads with single receives, never a multishot: a
// plain read of an alert record fails with EIO and is read again with its type.
TEST_P(MultishotReadTest, AChannelWhoseKernelDecryptsNeverArmsAMultishot) {
  bool has_multishot = false;
  const std::uint64_t arms =
      arms_while_echoing(options(), init([](Channel& ch) {
                           detail::KernelTls::started_receive(static_cast<LoopSocketChannel&>(ch));
                           ch.pipeline().add_last(std::make_shared<EchoHandler>());
                         }),
                         4, has_multishot);
  EXPECT_EQ(arms, 0u);
}

NIOX_INSTANTIATE_BACKENDS(MultishotReadTest);

}  // namespace
