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
  h->on_read = [seen](ChannelHandlerContext& ctx, Message&& msg) {
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
    ChannelFuture f = ctx.write_and_flush(ByteBuffer::wrap(std::span(payload)));
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
  close_when_written,      // write_and_flush, then close() once the write completed
  close_after_flush,       // write, then close_after_flush()
  close_after_flush_ktls,  // the same once kernel TLS sends (marked so, as the SslHandler does)
  flush_then_shutdown,     // write_and_flush, then shutdown_output()
  shutdown_output,         // write, then shutdown_output()
};

// The segments a fresh client takes in until the server's end of stream, when the server
// writes `bytes` as the connection goes active and ends it as `ending` says.
int segments_in_until_closed(const EventLoop::Options& opts, Ending ending,
                             const std::vector<std::byte>& bytes) {
  auto h = std::make_shared<LambdaHandler>();
  h->on_active = [ending, &bytes](ChannelHandlerContext& ctx) {
    Channel& ch = ctx.channel();
    ByteBuffer b = ByteBuffer::wrap(std::span(bytes));
    switch (ending) {
      case Ending::close_when_written: {
        // The same close, written out by hand: at once when the flush completed the write
        // (epoll), else from its listener (io_uring).
        ChannelFuture f = ch.write_and_flush(std::move(b));
        if (f.is_success()) {
          ch.close();
        } else {
          f.add_listener([c = ch.shared_from_this()](const std::error_code&) { c->close(); });
        }
        break;
      }
      case Ending::close_after_flush_ktls:
        detail::KernelTls::started_send(static_cast<LoopSocketChannel&>(ch));
        [[fallthrough]];
      case Ending::close_after_flush:
        ch.write(std::move(b));
        ch.close_after_flush();
        break;
      case Ending::flush_then_shutdown:
        ch.write_and_flush(std::move(b));
        ch.shutdown_output();
        break;
      case Ending::shutdown_output:
        ch.write(std::move(b));
        ch.shutdown_output();
        break;
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

// close_after_flush(): the last bytes leave with the FIN in one segment (MSG_MORE holds their
// tail until the close sends the FIN), so the client takes one segment fewer than when the
// close follows the written bytes.
TEST_P(FlushTest, CloseAfterFlushSendsTheLastBytesWithTheFin) {
  const auto bytes = pseudo_random_bytes(300, 5);
  const int apart = segments_in_until_closed(options(), Ending::close_when_written, bytes);
  const int together = segments_in_until_closed(options(), Ending::close_after_flush, bytes);
  EXPECT_EQ(together, apart - 1) << "SYN-ACK, then the bytes and the FIN in " << apart - 1
                                 << " segments when the close follows the write";
}

// shutdown_output() after writes it flushes itself: their tail goes with the FIN too.
TEST_P(FlushTest, ShutdownOutputSendsWhatItFlushesWithTheFin) {
  const auto bytes = pseudo_random_bytes(300, 7);
  const int apart = segments_in_until_closed(options(), Ending::flush_then_shutdown, bytes);
  const int together = segments_in_until_closed(options(), Ending::shutdown_output, bytes);
  EXPECT_EQ(together, apart - 1);
}

// Under kernel TLS (TLS_TX) the bytes go without MSG_MORE: the kernel would drop the record it
// left open at the close. The channel is only marked, so the bytes go as plain TCP and the
// segment count shows whether MSG_MORE was used.
TEST_P(FlushTest, CloseAfterFlushHoldsNothingBackOnceKernelTlsSends) {
  const auto bytes = pseudo_random_bytes(300, 8);
  const int apart = segments_in_until_closed(options(), Ending::close_when_written, bytes);
  const int marked = segments_in_until_closed(options(), Ending::close_after_flush_ktls, bytes);
  EXPECT_EQ(marked, apart);
}

// close_after_flush() after a write far larger than the socket takes closes only once the
// last byte has left: every byte arrives, in order, then the end of stream. The same after
// shutdown_output(), and from a thread that is not the loop's.
TEST_P(FlushTest, CloseAfterFlushClosesOnceALargeWriteHasLeft) {
  constexpr std::size_t kBytes = 8u << 20;
  const auto payload = pseudo_random_bytes(kBytes, 12);
  enum class From { loop, loop_after_shutdown, other_thread };
  for (From from : {From::loop, From::loop_after_shutdown, From::other_thread}) {
    SCOPED_TRACE(static_cast<int>(from));
    std::promise<std::shared_ptr<Channel>> accepted;
    auto h = std::make_shared<LambdaHandler>();
    h->on_active = [&](ChannelHandlerContext& ctx) {
      Channel& ch = ctx.channel();
      if (from == From::other_thread) {
        accepted.set_value(ch.shared_from_this());
        return;
      }
      ch.write(ByteBuffer::wrap(std::span(payload)));
      if (from == From::loop_after_shutdown) ch.shutdown_output();
      ch.close_after_flush();
    };
    TestServer server(options(), 1);
    server.bootstrap().child_handler(init([h](Channel& ch) { ch.pipeline().add_last(h); }));
    SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
    PeerSocket client(addr);
    ChannelFuture closed;
    if (from == From::other_thread) {
      auto f = accepted.get_future();
      std::shared_ptr<Channel> ch = wait_for(f);
      ch->write(ByteBuffer::wrap(std::span(payload)));
      closed = ch->close_after_flush();
    }
    const auto got = client.recv_exact(kBytes + 1);  // then the end of stream
    EXPECT_EQ(got.size(), kBytes);
    EXPECT_EQ(fnv1a(got), fnv1a(payload));
    if (closed.valid()) {
      EXPECT_FALSE(await_for(closed));
    }
    client.close();
    server.stop();
  }
}

// Holds back the first close() it sees, as an SslHandler does until its close_notify left.
class CloseHolder : public ChannelHandler {
 public:
  void close(ChannelHandlerContext& ctx, ChannelPromise promise) override {
    if (held_++ == 0) return;
    ctx.close(std::move(promise));
  }

 private:
  int held_ = 0;
};

// close_after_flush() whose close a handler holds back: what MSG_MORE held is pushed before the
// loop waits again, not at the kernel's probe timer. Looked at a turn after the write
// completed, when nothing of it may still be unsent in the socket.
TEST_P(FlushTest, HeldBytesArePushedWhenTheCloseIsHeldBack) {
  const auto bytes = pseudo_random_bytes(300, 6);
  std::promise<int> unsent;
  auto h = std::make_shared<LambdaHandler>();
  h->on_active = [&](ChannelHandlerContext& ctx) {
    auto ch = std::static_pointer_cast<LoopSocketChannel>(ctx.channel().shared_from_this());
    ctx.channel()
        .write(ByteBuffer::wrap(std::span(bytes)))
        .add_listener([ch, &unsent](const std::error_code&) {
          ch->executor().execute([ch, &unsent] {
            int n = -1;
            if (::ioctl(ch->fd(), SIOCOUTQNSD, &n) != 0) n = -1;
            unsent.set_value(n);
          });
        });
    ctx.channel().close_after_flush();
  };
  TestServer server(options(), 1);
  server.bootstrap().child_handler(init([h](Channel& ch) {
    ch.pipeline().add_last(std::make_shared<CloseHolder>());
    ch.pipeline().add_last(h);
  }));
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
