// What a flush does with the bytes, on every backend. On epoll it sends what the socket takes
// at once itself (Netty's flush) and completes the writes that covers before it returns; the
// loop's write takes what a full socket left. On io_uring the ring carries every send.
#include <niox/transport/bootstrap.hpp>

#include "../support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <linux/sockios.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <sys/ioctl.h>

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

// How the server of segments_in_until_closed() ends its connection.
enum class Ending {
  plain,                  // write, then close
  expected,               // expect_close(), write, then close
  expected_under_ktls_tx  // the same once kernel TLS sends (marked so, as the SslHandler does)
};

// The segments a fresh client takes in until the server's end of stream, when the server
// writes `bytes` as the connection goes active and closes once they are written: at once when
// the flush completed the write (epoll), else from its listener (io_uring).
int segments_in_until_closed(const EventLoop::Options& opts, Ending ending,
                             const std::vector<std::byte>& bytes) {
  auto h = std::make_shared<LambdaHandler>();
  h->on_active = [ending, &bytes](ChannelHandlerContext& ctx) {
    ByteBuffer b = ByteBuffer::allocate(bytes.size());
    b.put(std::span<const std::byte>(bytes));
    b.flip();
    if (ending == Ending::expected_under_ktls_tx) {
      detail::KernelTls::started_send(static_cast<LoopSocketChannel&>(ctx.channel()));
    }
    if (ending != Ending::plain) ctx.channel().expect_close();
    ChannelFuture f = ctx.write_and_flush(std::move(b));
    if (f.is_success()) {
      ctx.close();
    } else {
      f.add_listener(
          [ch = ctx.channel().shared_from_this()](const std::error_code&) { ch->close(); });
    }
  };
  TestServer server(opts, 1);
  server.bootstrap().child_handler(init([h](Channel& ch) { ch.pipeline().add_last(h); }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  PeerSocket client(addr);
  EXPECT_EQ(client.recv_exact(bytes.size() + 1), bytes);  // then the end of stream
  tcp_info info{};
  socklen_t len = sizeof info;
  EXPECT_EQ(::getsockopt(client.fd(), IPPROTO_TCP, TCP_INFO, &info, &len), 0);
  client.close();
  server.stop();
  return static_cast<int>(info.tcpi_segs_in);
}

// The last bytes before a close, said so with expect_close(), leave with the FIN in one segment
// (MSG_MORE holds their tail until the close sends the FIN): the client takes one segment fewer.
TEST_P(FlushTest, TheLastBytesBeforeAnExpectedCloseLeaveWithTheFin) {
  const auto bytes = pseudo_random_bytes(300, 5);
  const int plain = segments_in_until_closed(options(), Ending::plain, bytes);
  const int hinted = segments_in_until_closed(options(), Ending::expected, bytes);
  EXPECT_EQ(hinted, plain - 1) << "SYN-ACK, then the bytes and the FIN in " << plain - 1
                               << " segments without the hint";
}

// Under kernel TLS (TLS_TX) the hint is ignored: the kernel would drop the record MSG_MORE
// left open at the close. The channel is only marked, so the bytes go as plain TCP and the
// segment count shows whether MSG_MORE was used.
TEST_P(FlushTest, AnExpectedCloseIsIgnoredOnceKernelTlsSends) {
  const auto bytes = pseudo_random_bytes(300, 8);
  const int plain = segments_in_until_closed(options(), Ending::plain, bytes);
  const int marked = segments_in_until_closed(options(), Ending::expected_under_ktls_tx, bytes);
  EXPECT_EQ(marked, plain);
}

// expect_close() without the close: what MSG_MORE held is pushed before the loop waits again,
// not at the kernel's probe timer. Looked at a turn after the write completed, when nothing of
// it may still be unsent in the socket.
TEST_P(FlushTest, HeldBytesArePushedWhenTheExpectedCloseDoesNotCome) {
  const auto bytes = pseudo_random_bytes(300, 6);
  std::promise<int> unsent;
  auto h = std::make_shared<LambdaHandler>();
  h->on_active = [&](ChannelHandlerContext& ctx) {
    ByteBuffer b = ByteBuffer::allocate(bytes.size());
    b.put(std::span<const std::byte>(bytes));
    b.flip();
    ctx.channel().expect_close();
    auto ch = std::static_pointer_cast<LoopSocketChannel>(ctx.channel().shared_from_this());
    ctx.write_and_flush(std::move(b)).add_listener([ch, &unsent](const std::error_code&) {
      ch->executor().execute([ch, &unsent] {
        int n = -1;
        if (::ioctl(ch->fd(), SIOCOUTQNSD, &n) != 0) n = -1;
        unsent.set_value(n);
      });
    });
  };
  TestServer server(options(), 1);
  server.bootstrap().child_handler(init([h](Channel& ch) { ch.pipeline().add_last(h); }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  PeerSocket client(addr);
  auto f = unsent.get_future();
  EXPECT_EQ(wait_for(f), 0) << "bytes still held in the socket";
  EXPECT_EQ(client.recv_exact(bytes.size()), bytes);
  client.close();
  server.stop();
}

}  // namespace

NIOX_INSTANTIATE_BACKENDS(FlushTest);
