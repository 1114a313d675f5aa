// The close rows of docs/reliability.md end to end, on every backend: a graceful close with 64 MiB
// queued, a peer reset under pending writes, half-closure with bulk data, a group shut down
// under channels that wait on no operation, a channel closed under a write in the kernel.
#include <niox/transport/bootstrap.hpp>
#include <niox/transport/transport_error.hpp>

#include "../support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

using namespace niox;
using namespace niox::test;

namespace {

class CloseTest : public DescriptorCheckedTest {};

// Incremental FNV-1a over a stream, with its length.
struct StreamSum {
  std::uint64_t h = 0xCBF29CE484222325ull;
  std::size_t n = 0;
  void add(std::span<const std::byte> d) {
    for (std::byte b : d) h = (h ^ static_cast<std::uint8_t>(b)) * 0x100000001B3ull;
    n += d.size();
  }
  std::uint64_t value() const { return h ^ n; }
};

const std::vector<std::byte>& sixty_four_mib() {
  static const auto data = pseudo_random_bytes(64 << 20, 64);
  return data;
}

// Row "graceful close with 64 MiB queued": every byte arrives, in order, then FIN; each write
// succeeds once; the server's channel closes and frees its descriptor.
TEST_P(CloseTest, GracefulCloseWith64MiBQueuedDeliversEverythingThenFin) {
  const auto& data = sixty_four_mib();
  constexpr std::size_t kPiece = 1 << 20;
  const int pieces = static_cast<int>(data.size() / kPiece);
  struct State {
    std::atomic<int> ok{0}, failed{0};
    std::atomic<std::size_t> max_pending{0};
    std::promise<std::error_code> shutdown;
    std::promise<void> closed;
  };
  auto st = std::make_shared<State>();
  auto h = std::make_shared<LambdaHandler>();
  h->on_active = [&data, st, pieces](ChannelHandlerContext& ctx) {
    for (int i = 0; i < pieces; ++i) {
      auto piece =
          std::span<const std::byte>(data).subspan(static_cast<std::size_t>(i) * kPiece, kPiece);
      ctx.write(ByteBuffer::wrap(piece)).add_listener([st](const std::error_code& ec) {
        ec ? ++st->failed : ++st->ok;
      });
    }
    st->max_pending = ctx.channel().outbound_buffer().total_pending_bytes();
    ctx.flush();
    // Graceful close: FIN once everything queued is out, then close.
    auto ch = ctx.channel().shared_from_this();
    ctx.shutdown_output().add_listener([st, ch](const std::error_code& ec) {
      st->shutdown.set_value(ec);
      ch->close();
    });
    ch->close_future().add_listener([st](const std::error_code&) { st->closed.set_value(); });
  };
  TestServer server(options(), 1);
  server.bootstrap()
      .child_option(channel_option::so_sndbuf, 64 * 1024)
      .child_option(channel_option::write_buffer_hard_limit, std::size_t(128) << 20)
      .child_handler(init([h](Channel& ch) { ch.pipeline().add_last(h); }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  PeerSocket peer(addr);
  int small = 64 * 1024;
  ::setsockopt(peer.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  // A slow reader: small reads, a pause at the start so everything is queued on the server.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  StreamSum sum;
  std::vector<std::byte> buf(16 * 1024);
  for (;;) {
    ssize_t k = ::recv(peer.fd(), buf.data(), buf.size(), 0);
    if (k < 0 && errno == EINTR) continue;
    ASSERT_GE(k, 0) << std::strerror(errno);
    if (k == 0) break;  // FIN
    sum.add(std::span<const std::byte>(buf.data(), static_cast<std::size_t>(k)));
  }
  StreamSum expect;
  expect.add(data);
  EXPECT_EQ(sum.n, data.size());
  EXPECT_EQ(sum.value(), expect.value());
  auto s = st->shutdown.get_future();
  EXPECT_FALSE(wait_for(s));
  auto c = st->closed.get_future();
  wait_for(c);
  EXPECT_GT(st->max_pending.load(), std::size_t(32) << 20) << "the data was not queued";
  for (int i = 0; i < 2000 && st->ok + st->failed < pieces; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(st->ok.load(), pieces);
  EXPECT_EQ(st->failed.load(), 0);
}

// Row "peer resets mid-stream": every pending write completes exactly once; the ones that were
// flushed fail with ECONNRESET or EPIPE (never a vague error), the descriptor is freed.
TEST_P(CloseTest, PeerResetFailsFlushedWritesOnceWithResetOrBrokenPipe) {
  constexpr int kWrites = 300;
  struct State {
    std::mutex mu;
    std::vector<int> completions = std::vector<int>(kWrites, 0);
    std::vector<std::error_code> errors;
    int ok = 0;
    std::promise<void> queued, closed;
    std::atomic<int> exceptions{0};
  };
  auto st = std::make_shared<State>();
  auto h = std::make_shared<LambdaHandler>();
  h->on_active = [st](ChannelHandlerContext& ctx) {
    auto payload = ByteBuffer::allocate(64 * 1024);
    for (int i = 0; i < kWrites; ++i) {
      ctx.write_and_flush(payload.duplicate()).add_listener([st, i](const std::error_code& ec) {
        std::lock_guard lock(st->mu);
        ++st->completions[static_cast<std::size_t>(i)];
        if (ec) {
          st->errors.push_back(ec);
        } else {
          ++st->ok;
        }
      });
    }
    ctx.channel().close_future().add_listener(
        [st](const std::error_code&) { st->closed.set_value(); });
    st->queued.set_value();
  };
  h->on_exception = [st](ChannelHandlerContext&, std::exception_ptr) { ++st->exceptions; };
  TestServer server(options(), 1);
  server.bootstrap()
      .child_option(channel_option::write_buffer_hard_limit, std::size_t(64) << 20)
      .child_handler(init([h](Channel& ch) { ch.pipeline().add_last(h); }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  PeerSocket peer(addr);
  auto q = st->queued.get_future();
  wait_for(q);
  // Read a little so the stream is really under way, then reset.
  ASSERT_EQ(peer.recv_exact(1000).size(), 1000u);
  linger l{1, 0};
  ::setsockopt(peer.fd(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
  peer.close();
  auto c = st->closed.get_future();
  wait_for(c);
  auto all_done = [&] {
    std::lock_guard lock(st->mu);
    return static_cast<int>(st->errors.size()) + st->ok >= kWrites;
  };
  for (int i = 0; i < 5000 && !all_done(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a second completion would show now
  std::lock_guard lock(st->mu);
  for (int i = 0; i < kWrites; ++i)
    EXPECT_EQ(st->completions[static_cast<std::size_t>(i)], 1) << "write " << i;
  ASSERT_FALSE(st->errors.empty());
  for (auto& ec : st->errors) {
    EXPECT_TRUE(ec == std::errc::connection_reset || ec == std::errc::broken_pipe)
        << "unclear failure: " << ec.message();
  }
  EXPECT_LE(st->exceptions.load(), 1);
}

// Row "peer half-closes": all of a bulk upload arrives, then the input-shutdown event; the
// server still writes its answer (the whole upload back) and then closes.
TEST_P(CloseTest, HalfClosureDeliversAllDataThenTheEventAndWritingStillWorks) {
  auto data = pseudo_random_bytes(4 << 20, 5);
  struct State {
    std::vector<std::byte> got;
    std::atomic<bool> event_after_all{false};
    std::atomic<int> events{0};
  };
  auto st = std::make_shared<State>();
  const std::size_t expected = data.size();
  auto h = std::make_shared<LambdaHandler>();
  h->on_read = [st](ChannelHandlerContext&, Message&& m) {
    auto* b = m.get_if<ByteBuffer>();
    ASSERT_NE(b, nullptr);
    st->got.insert(st->got.end(), b->bytes().begin(), b->bytes().end());
  };
  h->on_event = [st, expected](ChannelHandlerContext& ctx, std::any e) {
    if (std::any_cast<ChannelInputShutdownEvent>(&e) == nullptr) return;
    ++st->events;
    st->event_after_all = st->got.size() == expected;
    EXPECT_TRUE(ctx.channel().is_active());
    EXPECT_FALSE(ctx.channel().is_output_shutdown());
    auto reply = ByteBuffer::wrap(std::span<const std::byte>(st->got));
    ctx.write_and_flush(std::move(reply))
        .add_listener([ch = ctx.channel().shared_from_this()](const std::error_code& ec) {
          EXPECT_FALSE(ec) << ec.message();
          ch->close();
        });
  };
  TestServer server(options(), 1);
  server.bootstrap()
      .child_option(channel_option::allow_half_closure, true)
      .child_handler(init([h](Channel& ch) { ch.pipeline().add_last(h); }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  PeerSocket peer(addr);
  peer.send_all(data);
  ASSERT_EQ(::shutdown(peer.fd(), SHUT_WR), 0);
  auto back = peer.recv_to_eof();
  EXPECT_EQ(back.size(), data.size());
  EXPECT_TRUE(back == data);
  EXPECT_EQ(st->events.load(), 1);
  EXPECT_TRUE(st->event_after_all);
}

// Row "group shut down under open channels": a connection that waits on no operation (reading
// paused, or half-closed and not answered) and a listener that is not accepting are closed by
// their group's shutdown like the others: handlers see channel_inactive, peers see the end of
// stream, and no descriptor stays open.
TEST_P(CloseTest, GroupShutdownClosesChannelsThatWaitOnNoOperation) {
  struct State {
    std::atomic<int> paused{0}, half_closed{0}, inactive{0};
  };
  auto st = std::make_shared<State>();
  auto h = std::make_shared<LambdaHandler>();
  h->on_read = [st](ChannelHandlerContext& ctx, Message) {
    ctx.channel().config().set_auto_read(false);  // and never reads again
    ++st->paused;
  };
  h->on_event = [st](ChannelHandlerContext&, std::any e) {
    if (std::any_cast<ChannelInputShutdownEvent>(&e) != nullptr) ++st->half_closed;
  };
  h->on_inactive = [st](ChannelHandlerContext& ctx) {
    ++st->inactive;
    ctx.fire_channel_inactive();
  };
  SocketAddress addr;
  std::optional<PeerSocket> pausing, half_closing;
  std::optional<SocketAddress> idle_listener;
  {
    TestServer server(options(), 1);
    server.bootstrap()
        .child_option(channel_option::allow_half_closure, true)
        .child_handler(init([h](Channel& ch) { ch.pipeline().add_last(h); }));
    addr = server.start(InetSocketAddress::loopback_v4(0));
    pausing.emplace(addr);
    pausing->send_all("pause");
    half_closing.emplace(addr);
    ASSERT_EQ(::shutdown(half_closing->fd(), SHUT_WR), 0);

    // A second listener on the worker group, reading (accepting) off and never closed.
    ServerBootstrap quiet;
    quiet.group(server.workers())
        .option(channel_option::auto_read, false)
        .child_handler(init([](Channel&) {}));
    auto bound = quiet.bind(InetSocketAddress::loopback_v4(0));
    ASSERT_FALSE(await_for(bound));
    idle_listener = bound.channel()->local_address();

    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while ((st->paused < 1 || st->half_closed < 1) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(st->paused.load(), 1);
    ASSERT_EQ(st->half_closed.load(), 1);
    server.workers().shutdown_gracefully();  // with both connections and the listener open
    EXPECT_EQ(st->inactive.load(), 2);
  }
  EXPECT_TRUE(pausing->recv_to_eof().empty());
  EXPECT_TRUE(half_closing->recv_to_eof().empty());
  pausing.reset();
  half_closing.reset();
  EXPECT_THROW(PeerSocket{*idle_listener}, std::system_error);  // refused: the listener is closed
}

// A channel closed while its write waits in the kernel for a peer that never reads, with no
// reference to it left but its own: the write's completion (aborted) still finds it, and it is
// freed after that, not kept for ever. Under ASan a use after free would show here.
TEST_P(CloseTest, AChannelClosedUnderAWriteInTheKernelLivesUntilItsCompletionThenGoes) {
  struct State {
    std::mutex mutex;
    std::weak_ptr<Channel> channel;
    std::promise<std::error_code> write_done;
    std::promise<void> stuck;
  };
  auto st = std::make_shared<State>();
  auto h = std::make_shared<LambdaHandler>();
  h->on_active = [st](ChannelHandlerContext& ctx) {
    {
      std::lock_guard lock(st->mutex);
      st->channel = ctx.channel().weak_from_this();
    }
    // Far more than the socket buffers take: most of it stays queued behind a write that waits.
    auto data = std::make_shared<std::vector<std::byte>>(8 << 20, std::byte{0x5a});
    ctx.write_and_flush(ByteBuffer::wrap(std::span<const std::byte>(*data)))
        .add_listener([st, data](const std::error_code& ec) { st->write_done.set_value(ec); });
    static_cast<LoopSocketChannel&>(ctx.channel())
        .event_loop()
        .schedule(std::chrono::milliseconds(50), [st] { st->stuck.set_value(); });
  };
  TestServer server(options(), 1);
  server.bootstrap()
      .child_option(channel_option::so_sndbuf, 16 * 1024)
      .child_handler(init([h](Channel& ch) { ch.pipeline().add_last(h); }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  PeerSocket peer(addr);  // never reads
  auto stuck = st->stuck.get_future();
  wait_for(stuck);
  std::shared_ptr<Channel> ch;
  {
    std::lock_guard lock(st->mutex);
    ch = st->channel.lock();
  }
  ASSERT_NE(ch, nullptr);
  EXPECT_FALSE(await_for(ch->close()));
  ch.reset();  // from here only the channel (and its write) can keep it alive
  auto done = st->write_done.get_future();
  EXPECT_EQ(wait_for(done), transport::Errc::channel_closed);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    {
      std::lock_guard lock(st->mutex);
      if (st->channel.expired()) break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the closed channel is never freed";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

NIOX_INSTANTIATE_BACKENDS(CloseTest);

}  // namespace
