#include <niox/transport/embedded_channel.hpp>
#include <niox/transport/idle_state_handler.hpp>

#include <gtest/gtest.h>

#include <any>
#include <string>
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
  EXPECT_EQ(ch.event_loop().scheduled_tasks(), 1u);  // the loop's idle timer, for all three
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

// Every IdleStateHandler of a loop waits on one timer of that loop, armed for the earliest
// deadline: handlers with different periods still fire each at its own time, in time order.
TEST(IdleStateHandler, HandlersOfOneLoopShareOneTimerAndFireInDeadlineOrder) {
  class Recorder final : public ChannelHandler {
   public:
    explicit Recorder(std::vector<std::string>& log, std::string name)
        : log_(log), name_(std::move(name)) {}
    void user_event_triggered(ChannelHandlerContext& ctx, std::any event) override {
      if (auto* e = std::any_cast<IdleStateEvent>(&event)) {
        log_.push_back(name_ + (e->first ? "" : "+"));
        return;  // not passed on: only this handler's own events reach it
      }
      ctx.fire_user_event_triggered(std::move(event));
    }

   private:
    std::vector<std::string>& log_;
    std::string name_;
  };
  std::vector<std::string> log;
  EmbeddedChannel ch(
      {std::make_shared<IdleStateHandler>(5s, 0s, 0s), std::make_shared<Recorder>(log, "a"),
       std::make_shared<IdleStateHandler>(3s, 0s, 0s), std::make_shared<Recorder>(log, "b"),
       std::make_shared<IdleStateHandler>(0s, 0s, 4s), std::make_shared<Recorder>(log, "c")});
  EXPECT_EQ(ch.event_loop().scheduled_tasks(), 1u);
  ch.advance_time(2s);
  EXPECT_TRUE(log.empty());
  ch.advance_time(1s);  // t=3: b
  EXPECT_EQ(log, (std::vector<std::string>{"b"}));
  ch.advance_time(1s);  // t=4: c
  ch.advance_time(1s);  // t=5: a
  ch.advance_time(1s);  // t=6: b again
  EXPECT_EQ(log, (std::vector<std::string>{"b", "c", "a", "b+"}));
  EXPECT_EQ(ch.event_loop().scheduled_tasks(), 1u);
  // A read postpones every reader and all-idle deadline; the timer follows the earliest.
  ch.write_inbound(ByteBuffer::allocate(1));
  ch.inbound_messages().clear();
  log.clear();
  ch.advance_time(3s);  // t=9: b, 3 s after the read
  EXPECT_EQ(log, (std::vector<std::string>{"b"}));
  ch.close();
  ch.run_pending_tasks();
  EXPECT_EQ(ch.event_loop().scheduled_tasks(), 0u);
}

// Two channels on one loop: the one removed leaves the other's deadline in place.
TEST(IdleStateHandler, RemovingOneHandlerKeepsTheOthersDeadline) {
  EmbeddedChannel ch;
  auto first = std::make_shared<IdleStateHandler>(2s, 0s, 0s);
  auto second = std::make_shared<IdleStateHandler>(7s, 0s, 0s);
  ch.pipeline().add_last("first", first);
  ch.pipeline().add_last("second", second);
  ch.advance_time(1s);
  ch.pipeline().remove("first");
  EXPECT_EQ(ch.event_loop().scheduled_tasks(), 1u);
  ch.advance_time(5s);  // t=6: the removed handler's 2 s and 4 s passed unseen
  EXPECT_TRUE(take_events(ch).empty());
  ch.advance_time(1s);  // t=7
  EXPECT_EQ(take_events(ch), (std::vector<IdleStateEvent>{{IdleState::reader_idle, true}}));
  ch.pipeline().remove("second");
  EXPECT_EQ(ch.event_loop().scheduled_tasks(), 0u);
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
