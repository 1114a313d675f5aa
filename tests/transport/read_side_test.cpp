#include <niox/transport/adaptive_recv_buffer_allocator.hpp>
#include <niox/transport/embedded_channel.hpp>

#include <gtest/gtest.h>

using namespace niox;

TEST(AdaptiveRecvBufferAllocator, GrowsFastOnFullReadsAndShrinksSlowly) {
  AdaptiveRecvBufferAllocator alloc(64, 1024, 65536);
  auto h = alloc.new_handle();
  EXPECT_EQ(h.guess(), 1024u);
  EXPECT_EQ(h.allocate().remaining(), 1024u);
  // A read that fills its buffer grows the guess at once by 4 steps (1024 -> 16384).
  h.reset(16, true);
  h.attempted_bytes_read(1024);
  h.last_bytes_read(1024);
  EXPECT_EQ(h.guess(), 16384u);
  EXPECT_TRUE(h.continue_reading());
  h.increment_messages_read();
  h.attempted_bytes_read(16384);
  h.last_bytes_read(100);
  EXPECT_FALSE(h.continue_reading());  // not full: the socket is probably drained
  h.read_complete();                   // total 1124: small, first strike only
  EXPECT_EQ(h.guess(), 16384u);
  h.reset(16, true);
  h.attempted_bytes_read(16384);
  h.last_bytes_read(100);
  h.read_complete();  // second small batch: one step down
  EXPECT_EQ(h.guess(), 8192u);
  // Never above the maximum nor below the minimum.
  for (int i = 0; i < 20; ++i) {
    h.reset(16, true);
    h.attempted_bytes_read(h.guess());
    h.last_bytes_read(static_cast<ssize_t>(h.guess()));
  }
  EXPECT_EQ(h.guess(), 65536u);
  for (int i = 0; i < 200; ++i) {
    h.reset(16, true);
    h.attempted_bytes_read(h.guess());
    h.last_bytes_read(1);
    h.read_complete();
  }
  EXPECT_EQ(h.guess(), 64u);
}

// The handle keeps one read's counts in 32 bits: an offer above 4 GiB is never filled by a
// read (at most 0x7ffff000 bytes on Linux), as before.
TEST(AdaptiveRecvBufferAllocator, AnOfferAboveFourGibibytesIsNotFilledByARead) {
  AdaptiveRecvBufferAllocator alloc(64, 1024, 65536);
  auto h = alloc.new_handle();
  h.reset(16, true);
  h.attempted_bytes_read((std::size_t{1} << 32) + 1024);
  h.last_bytes_read(1024);
  EXPECT_EQ(h.last_bytes_read(), 1024);
  EXPECT_FALSE(h.continue_reading());
  EXPECT_EQ(h.guess(), 1024u);  // not grown as after a full buffer
  h.attempted_bytes_read(std::size_t{0x7ffff000});
  h.last_bytes_read(0x7ffff000);
  EXPECT_TRUE(h.continue_reading());
  EXPECT_EQ(h.total_bytes_read(), 1024u + 0x7ffff000u);
}

TEST(AdaptiveRecvBufferAllocator, BatchEndsAtMaxMessagesOrWithoutAutoRead) {
  AdaptiveRecvBufferAllocator alloc(64, 64, 64);
  auto h = alloc.new_handle();
  h.reset(3, true);
  int reads = 0;
  do {
    h.attempted_bytes_read(64);
    h.last_bytes_read(64);
    h.increment_messages_read();
    ++reads;
  } while (h.continue_reading());
  EXPECT_EQ(reads, 3);
  h.reset(3, false);
  h.attempted_bytes_read(64);
  h.last_bytes_read(64);
  h.increment_messages_read();
  EXPECT_FALSE(h.continue_reading());
  h.reset(3, true);
  h.attempted_bytes_read(64);
  h.last_bytes_read(-1);  // EOF
  EXPECT_FALSE(h.continue_reading());
  EXPECT_THROW(AdaptiveRecvBufferAllocator(0, 1, 2), IllegalArgumentException);
  EXPECT_THROW(AdaptiveRecvBufferAllocator(64, 32, 128), IllegalArgumentException);
}

TEST(ChannelReads, AutoReadOffStopsReadingUntilAHandlerAsks) {
  // A handler applying backpressure: turns auto_read off, asks for one read at a time.
  struct OneAtATime : ChannelInboundHandlerAdapter {
    void channel_active(ChannelHandlerContext& ctx) override {
      ctx.channel().config().set_auto_read(false);
      ctx.fire_channel_active();
    }
  };
  EmbeddedChannel ch({std::make_shared<OneAtATime>()});
  EXPECT_EQ(ch.read_requests(), 0);  // auto_read was off by the time the channel was active
  EXPECT_FALSE(ch.should_keep_reading());
  ch.read();
  EXPECT_EQ(ch.read_requests(), 1);
  EXPECT_TRUE(ch.should_keep_reading());  // one read requested
  ch.simulate_read(ByteBuffer::allocate(4));
  EXPECT_FALSE(ch.should_keep_reading());  // served: stop until asked again
  EXPECT_EQ(ch.inbound_messages().size(), 1u);
  ch.config().set_auto_read(true);
  EXPECT_TRUE(ch.should_keep_reading());
  EXPECT_EQ(ch.read_requests(), 2);  // turning auto_read on asks for a read
}

TEST(ChannelReads, EndOfStreamClosesUnlessHalfClosureIsAllowed) {
  EmbeddedChannel closing;
  closing.simulate_input_shutdown();
  EXPECT_FALSE(closing.is_open());

  EmbeddedChannel half;
  half.config().set_allow_half_closure(true);
  half.simulate_input_shutdown();
  EXPECT_TRUE(half.is_open());
  EXPECT_TRUE(half.is_input_shutdown());
  ASSERT_EQ(half.user_events().size(), 1u);
  EXPECT_NE(std::any_cast<ChannelInputShutdownEvent>(&half.user_events().front()), nullptr);
  // Writing still works after the peer's FIN.
  auto f = half.write_and_flush(ByteBuffer::wrap(std::string_view("bye")));
  half.run_pending_tasks();
  EXPECT_TRUE(f.is_success());
  int reads = half.read_requests();
  half.read();
  EXPECT_EQ(half.read_requests(), reads);  // no reading past EOF
}
