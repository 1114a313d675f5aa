// ChannelInboundQueue: a coroutine behind a decoder, with backpressure; and co_await on a
// ChannelFuture. The socket test runs on every backend.
#include <niox/async/spawn.hpp>
#include <niox/transport/channel_inbound_queue.hpp>
#include <niox/transport/codec/length_field_based_frame_decoder.hpp>
#include <niox/transport/embedded_channel.hpp>
#include <niox/transport/transport_error.hpp>

#include "../support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

using namespace niox;
using namespace niox::test;

namespace {

std::string text_of(Message& m) { return std::string(m.get<ByteBuffer>().string_view()); }

TEST(ChannelInboundQueue, HandsMessagesToACoroutineAndPausesReadingWhenFull) {
  auto queue = std::make_shared<ChannelInboundQueue>(2);
  EmbeddedChannel ch{queue};
  std::vector<std::string> got;
  bool ended = false;
  auto consume = [&]() -> Task<void> {
    while (auto m = co_await queue->next()) got.push_back(text_of(*m));
    ended = true;
  };
  ch.write_inbound({text("a"), text("b"), text("c")});
  EXPECT_FALSE(ch.config().is_auto_read());  // three waiting, capacity two: reading paused
  EXPECT_EQ(queue->size(), 3u);
  co_spawn(ch.executor(), consume(), [](std::exception_ptr e) { EXPECT_FALSE(e); });
  ch.run_pending_tasks();
  EXPECT_EQ(got, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(ch.config().is_auto_read());  // taken below the capacity: reading again
  EXPECT_FALSE(ended);
  ch.write_inbound(text("d"));
  EXPECT_EQ(got.size(), 4u);
  ch.finish();  // the input ends: next() returns nullopt after what was queued
  ch.run_pending_tasks();
  EXPECT_TRUE(ended);
}

TEST(ChannelInboundQueue, RethrowsAnExceptionAfterTheQueuedMessages) {
  auto queue = std::make_shared<ChannelInboundQueue>(4);
  EmbeddedChannel ch{queue};
  std::vector<std::string> got;
  std::string error;
  auto consume = [&]() -> Task<void> {
    try {
      while (auto m = co_await queue->next()) got.push_back(text_of(*m));
    } catch (const std::exception& e) {
      error = e.what();
    }
  };
  co_spawn(ch.executor(), consume(), [](std::exception_ptr) {});
  ch.run_pending_tasks();  // waiting for the first message
  ch.write_inbound(text("x"));
  ch.pipeline().fire_exception_caught(std::make_exception_ptr(std::runtime_error("bad frame")));
  ch.run_pending_tasks();
  EXPECT_EQ(got, (std::vector<std::string>{"x"}));
  EXPECT_EQ(error, "bad frame");
}

TEST(ChannelFutureAwait, CoAwaitThrowsOnFailureAndOutcomeReturnsTheCode) {
  EmbeddedChannel ch{std::make_shared<LambdaHandler>()};
  ChannelPromise ok = ch.new_promise();
  ChannelPromise bad = ch.new_promise();
  std::error_code outcome;
  bool threw = false;
  auto t = [&]() -> Task<void> {
    co_await ok.future();
    outcome = co_await bad.future().outcome();
    try {
      co_await bad.future();
    } catch (const std::system_error& e) {
      threw = e.code() == transport::Errc::channel_closed;
    }
  };
  co_spawn(ch.executor(), t(), [](std::exception_ptr e) { EXPECT_FALSE(e); });
  ch.run_pending_tasks();
  ok.set_success();
  bad.set_failure(transport::Errc::channel_closed);
  ch.run_pending_tasks();
  EXPECT_EQ(outcome, transport::Errc::channel_closed);
  EXPECT_TRUE(threw);
}

class InboundQueueSocketTest : public DescriptorCheckedTest {};

// Each connection is served by a coroutine behind a LengthFieldBasedFrameDecoder: it takes every
// frame from the queue and writes it back, awaiting each write; the client gets every frame in
// order, then EOF after its own.
TEST_P(InboundQueueSocketTest, ACoroutineServesFramesBehindADecoder) {
  TestServer server(options(), 1);
  auto serve = [](std::shared_ptr<ChannelInboundQueue> queue,
                  std::shared_ptr<Channel> ch) -> Task<void> {
    while (auto frame = co_await queue->next()) co_await ch->write_and_flush(std::move(*frame));
    co_await ch->close();
  };
  // Half-closure on: the client's FIN ends the queue's input after the frames it sent, and the
  // coroutine closes once it has echoed them all.
  server.bootstrap()
      .child_option(channel_option::allow_half_closure, true)
      .child_handler(init([serve](Channel& ch) {
        auto queue = std::make_shared<ChannelInboundQueue>(4);
        ch.pipeline().add_last("frames",
                               std::make_shared<LengthFieldBasedFrameDecoder>(1 << 20, 0, 4));
        ch.pipeline().add_last("queue", queue);
        co_spawn(ch.executor(), serve(queue, ch.shared_from_this()));
      }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  std::string stream;
  for (int i = 0; i < 200; ++i) {
    std::string body(static_cast<std::size_t>(i * 37 % 5000 + 1), static_cast<char>('a' + i % 26));
    std::uint32_t n = static_cast<std::uint32_t>(body.size());
    stream += std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                          static_cast<char>(n >> 8), static_cast<char>(n)} +
              body;
  }
  PeerSocket peer(addr);
  peer.send_all(stream);
  ::shutdown(peer.fd(), SHUT_WR);
  auto back = peer.recv_to_eof();
  ASSERT_EQ(back.size(), stream.size());
  EXPECT_EQ(fnv1a(back), fnv1a(text_bytes(stream)));
}

NIOX_INSTANTIATE_BACKENDS(InboundQueueSocketTest);

}  // namespace
