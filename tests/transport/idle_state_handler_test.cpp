#include <niox/transport/embedded_channel.hpp>
#include <niox/transport/idle_state_handler.hpp>

#include <gtest/gtest.h>

#include <vector>

using namespace niox;
using namespace std::chrono_literals;

namespace {
std::vector<IdleStateEvent> take_events(EmbeddedChannel& ch) {
  std::vector<IdleStateEvent> out;
  for (auto& e : ch.user_events()) {
    out.push_back(std::any_cast<IdleStateEvent>(e));
  }
  ch.user_events().clear();
  return out;
}
}  // namespace

TEST(IdleStateHandler, ReaderIdleFiresAfterTheTimeoutAndRepeatsWithFirstFalse) {
  EmbeddedChannel ch({std::make_shared<IdleStateHandler>(10s, 0s, 0s)});
  ch.advance_time(9s);
  EXPECT_TRUE(take_events(ch).empty());
  ch.advance_time(1s);
  EXPECT_EQ(take_events(ch), (std::vector<IdleStateEvent>{{IdleState::reader_idle, true}}));
  ch.advance_time(10s);
  EXPECT_EQ(take_events(ch), (std::vector<IdleStateEvent>{{IdleState::reader_idle, false}}));
}

TEST(IdleStateHandler, ReadsPostponeReaderIdleAndResetFirst) {
  EmbeddedChannel ch({std::make_shared<IdleStateHandler>(10s, 0s, 0s)});
  for (int i = 0; i < 5; ++i) {
    ch.advance_time(6s);
    ch.write_inbound(ByteBuffer::allocate(1));
  }
  ch.inbound_messages().clear();
  EXPECT_TRUE(take_events(ch).empty());
  ch.advance_time(10s);
  EXPECT_EQ(take_events(ch), (std::vector<IdleStateEvent>{{IdleState::reader_idle, true}}));
  ch.write_inbound(ByteBuffer::allocate(1));
  ch.advance_time(10s);
  EXPECT_EQ(take_events(ch), (std::vector<IdleStateEvent>{{IdleState::reader_idle, true}}));
}

TEST(IdleStateHandler, WriterIdleCountsCompletedWrites) {
  EmbeddedChannel ch({std::make_shared<IdleStateHandler>(0s, 5s, 0s)});
  long budget = 0;
  ch.set_write_script([&](std::span<const iovec>, std::size_t bytes) -> long {
    long n = std::min<long>(budget, static_cast<long>(bytes));
    budget -= n;
    return n;
  });
  ch.advance_time(4s);
  ch.write_and_flush(ByteBuffer::allocate(10));  // queued, not written: still idle
  ch.advance_time(1s);
  EXPECT_EQ(take_events(ch), (std::vector<IdleStateEvent>{{IdleState::writer_idle, true}}));
  budget = 100;
  ch.signal_writable();  // completes now, at t=5s
  ch.run_pending_tasks();
  ch.advance_time(4s);
  EXPECT_TRUE(take_events(ch).empty());
  ch.advance_time(1s);
  EXPECT_EQ(take_events(ch), (std::vector<IdleStateEvent>{{IdleState::writer_idle, true}}));
}

TEST(IdleStateHandler, AllIdleNeedsNeitherReadsNorWrites) {
  EmbeddedChannel ch({std::make_shared<IdleStateHandler>(0s, 0s, 3s)});
  ch.advance_time(2s);
  ch.write_inbound(ByteBuffer::allocate(1));
  ch.advance_time(2s);
  ch.write_outbound(ByteBuffer::allocate(1));
  ch.advance_time(2s);
  EXPECT_TRUE(take_events(ch).empty());
  ch.advance_time(1s);
  EXPECT_EQ(take_events(ch), (std::vector<IdleStateEvent>{{IdleState::all_idle, true}}));
}

TEST(IdleStateHandler, TimersStopWhenRemovedOrInactive) {
  EmbeddedChannel ch({std::make_shared<IdleStateHandler>(1s, 1s, 1s)});
  EXPECT_EQ(ch.event_loop().scheduled_tasks(), 3u);
  ch.pipeline().remove(ch.pipeline().names().front());
  EXPECT_EQ(ch.event_loop().scheduled_tasks(), 0u);
  ch.advance_time(10s);
  EXPECT_TRUE(take_events(ch).empty());

  EmbeddedChannel ch2({std::make_shared<IdleStateHandler>(1s, 0s, 0s)});
  ch2.close();
  ch2.run_pending_tasks();
  ch2.advance_time(10s);
  EXPECT_TRUE(take_events(ch2).empty());
  EXPECT_EQ(ch2.event_loop().scheduled_tasks(), 0u);
}

TEST(ReadTimeoutHandler, ClosesAConnectionThatSendsTooSlowly) {
  // A slowloris peer: a byte every 2 s keeps a 3 s read timeout alive; then it stops.
  EmbeddedChannel ch({std::make_shared<ReadTimeoutHandler>(3s)});
  for (int i = 0; i < 10; ++i) {
    ch.advance_time(2s);
    ch.write_inbound(ByteBuffer::allocate(1));
  }
  EXPECT_TRUE(ch.is_open());
  ch.advance_time(2s);
  EXPECT_TRUE(ch.is_open());
  ch.advance_time(1s);
  EXPECT_FALSE(ch.is_open());
  EXPECT_THROW(ch.check_exception(), ReadTimeoutException);
}
