#include <niox/base/log.hpp>
#include <niox/transport/embedded_channel.hpp>
#include <niox/transport/transport_error.hpp>

#include <gtest/gtest.h>

#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace niox;

namespace {

// Records every event it sees into a shared log, then forwards.
class Recorder : public ChannelDuplexHandler {
 public:
  Recorder(std::string tag, std::vector<std::string>& log) : tag_(std::move(tag)), log_(log) {}
  void handler_added(ChannelHandlerContext&) override { log_.push_back(tag_ + ":added"); }
  void handler_removed(ChannelHandlerContext&) override { log_.push_back(tag_ + ":removed"); }
  void channel_active(ChannelHandlerContext& ctx) override {
    log_.push_back(tag_ + ":active");
    ctx.fire_channel_active();
  }
  void channel_inactive(ChannelHandlerContext& ctx) override {
    log_.push_back(tag_ + ":inactive");
    ctx.fire_channel_inactive();
  }
  void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
    log_.push_back(tag_ + ":read");
    ctx.fire_channel_read(std::move(msg));
  }
  void channel_read_complete(ChannelHandlerContext& ctx) override {
    log_.push_back(tag_ + ":read_complete");
    ctx.fire_channel_read_complete();
  }
  void user_event_triggered(ChannelHandlerContext& ctx, std::any e) override {
    log_.push_back(tag_ + ":event");
    ctx.fire_user_event_triggered(std::move(e));
  }
  void channel_writability_changed(ChannelHandlerContext& ctx) override {
    log_.push_back(tag_ + ":writability");
    ctx.fire_channel_writability_changed();
  }
  void exception_caught(ChannelHandlerContext& ctx, std::exception_ptr e) override {
    log_.push_back(tag_ + ":exception");
    ctx.fire_exception_caught(std::move(e));
  }
  void write(ChannelHandlerContext& ctx, Message&& msg, ChannelPromise p) override {
    log_.push_back(tag_ + ":write");
    ctx.write(std::move(msg), std::move(p));
  }
  void flush(ChannelHandlerContext& ctx) override {
    log_.push_back(tag_ + ":flush");
    ctx.flush();
  }
  void read(ChannelHandlerContext& ctx) override {
    log_.push_back(tag_ + ":read_op");
    ctx.read();
  }
  void close(ChannelHandlerContext& ctx, ChannelPromise p) override {
    log_.push_back(tag_ + ":close");
    ctx.close(std::move(p));
  }

 private:
  std::string tag_;
  std::vector<std::string>& log_;
};

// Appends a suffix to string messages (inbound) — shows the order handlers saw a message.
class Suffix : public ChannelInboundHandlerAdapter {
 public:
  explicit Suffix(std::string s) : s_(std::move(s)) {}
  void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
    ctx.fire_channel_read(msg.get<std::string>() + s_);
  }

 private:
  std::string s_;
};

// Appends a suffix to string messages (outbound).
class OutSuffix : public ChannelOutboundHandlerAdapter {
 public:
  explicit OutSuffix(std::string s) : s_(std::move(s)) {}
  void write(ChannelHandlerContext& ctx, Message&& msg, ChannelPromise p) override {
    ctx.write(msg.get<std::string>() + s_, std::move(p));
  }

 private:
  std::string s_;
};

std::string read_string(EmbeddedChannel& ch) {
  auto m = ch.read_inbound();
  return m ? m->get<std::string>() : std::string("<none>");
}
std::string read_out_string(EmbeddedChannel& ch) {
  auto m = ch.read_outbound();
  return m ? m->get<std::string>() : std::string("<none>");
}

}  // namespace

TEST(ChannelPipeline, InboundFlowsHeadToTailOutboundTailToHead) {
  EmbeddedChannel ch;
  auto& p = ch.pipeline();
  p.add_last("a", std::make_shared<Suffix>("a"));
  p.add_last("b", std::make_shared<Suffix>("b"));
  p.add_first("z", std::make_shared<Suffix>("z"));
  p.add_last("oa", std::make_shared<OutSuffix>("1"));
  p.add_last("ob", std::make_shared<OutSuffix>("2"));
  EXPECT_EQ(p.names(), (std::vector<std::string>{"z", "a", "b", "oa", "ob"}));

  EXPECT_TRUE(ch.write_inbound(std::string("x")));
  EXPECT_EQ(read_string(ch), "xzab");
  EXPECT_TRUE(ch.write_outbound(std::string("y")));
  EXPECT_EQ(read_out_string(ch), "y21");  // tail-most outbound handler first
}

TEST(ChannelPipeline, AddBeforeAfterReplaceRemoveByName) {
  EmbeddedChannel ch;
  auto& p = ch.pipeline();
  p.add_last("m", std::make_shared<Suffix>("m"));
  p.add_before("m", "b", std::make_shared<Suffix>("b"));
  p.add_after("m", "a", std::make_shared<Suffix>("a"));
  EXPECT_EQ(p.names(), (std::vector<std::string>{"b", "m", "a"}));
  ch.write_inbound(std::string(""));
  EXPECT_EQ(read_string(ch), "bma");

  auto old = p.replace("m", "n", std::make_shared<Suffix>("n"));
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(p.names(), (std::vector<std::string>{"b", "n", "a"}));
  EXPECT_EQ(p.get("m"), nullptr);
  EXPECT_NE(p.get<Suffix>("n"), nullptr);
  ch.write_inbound(std::string(""));
  EXPECT_EQ(read_string(ch), "bna");

  p.remove("b");
  EXPECT_EQ(p.names(), (std::vector<std::string>{"n", "a"}));
  auto h = p.get("a");
  p.remove(*h);
  EXPECT_EQ(p.names(), (std::vector<std::string>{"n"}));
  ch.write_inbound(std::string(""));
  EXPECT_EQ(read_string(ch), "n");
}

TEST(ChannelPipeline, DuplicateAndMissingNamesAreClearErrors) {
  EmbeddedChannel ch;
  auto& p = ch.pipeline();
  p.add_last("x", std::make_shared<Suffix>("x"));
  EXPECT_THROW(p.add_last("x", std::make_shared<Suffix>("y")), IllegalArgumentException);
  EXPECT_THROW(p.add_first("x", std::make_shared<Suffix>("y")), IllegalArgumentException);
  EXPECT_THROW(p.add_last("head", std::make_shared<Suffix>("y")), IllegalArgumentException);
  EXPECT_THROW(p.add_before("nope", "y", std::make_shared<Suffix>("y")), NoSuchElementException);
  EXPECT_THROW(p.add_after("nope", "y", std::make_shared<Suffix>("y")), NoSuchElementException);
  EXPECT_THROW(p.remove("nope"), NoSuchElementException);
  EXPECT_THROW(p.replace("nope", "y", std::make_shared<Suffix>("y")), NoSuchElementException);
  EXPECT_THROW(p.add_last("y", nullptr), IllegalArgumentException);
  try {
    p.add_last("x", std::make_shared<Suffix>("y"));
  } catch (const IllegalArgumentException& e) {
    EXPECT_NE(std::string(e.what()).find("'x'"), std::string::npos);
  }
  // Replacing a handler by another under a name already used elsewhere fails too.
  p.add_last("z", std::make_shared<Suffix>("z"));
  EXPECT_THROW(p.replace("z", "x", std::make_shared<Suffix>("y")), IllegalArgumentException);
  EXPECT_EQ(p.names(), (std::vector<std::string>{"x", "z"}));
}

TEST(ChannelPipeline, GeneratedNamesAreUnique) {
  EmbeddedChannel ch({std::make_shared<Suffix>("1"), std::make_shared<Suffix>("2"),
                      std::make_shared<Suffix>("3")});
  auto names = ch.pipeline().names();
  ASSERT_EQ(names.size(), 3u);
  EXPECT_NE(names[0], names[1]);
  EXPECT_NE(names[1], names[2]);
  ch.write_inbound(std::string(""));
  EXPECT_EQ(read_string(ch), "123");
}

TEST(ChannelPipeline, EveryEventKindReachesHandlersInOrder) {
  std::vector<std::string> log;
  EmbeddedChannel ch;
  ch.pipeline().add_last("a", std::make_shared<Recorder>("a", log));
  ch.pipeline().add_last("b", std::make_shared<Recorder>("b", log));
  EXPECT_EQ(log, (std::vector<std::string>{"a:added", "b:added"}));
  log.clear();

  ch.pipeline().fire_channel_active();
  ch.write_inbound(std::string("m"));
  ch.pipeline().fire_user_event_triggered(42);
  ch.pipeline().fire_channel_writability_changed();
  ch.pipeline().fire_exception_caught(std::make_exception_ptr(std::runtime_error("boom")));
  EXPECT_EQ(log,
            (std::vector<std::string>{"a:active", "b:active", "a:read", "b:read", "a:read_complete",
                                      "b:read_complete", "a:event", "b:event", "a:writability",
                                      "b:writability", "a:exception", "b:exception"}));
  EXPECT_THROW(ch.check_exception(), std::runtime_error);
  ASSERT_EQ(ch.user_events().size(), 1u);
  EXPECT_EQ(std::any_cast<int>(ch.user_events().front()), 42);
  log.clear();

  int reads_before = ch.read_requests();
  ch.read();
  EXPECT_EQ(ch.read_requests(), reads_before + 1);
  auto f = ch.write_and_flush(std::string("w"));
  ch.run_pending_tasks();
  EXPECT_TRUE(f.is_success());
  ch.close();
  ch.run_pending_tasks();
  EXPECT_EQ(
      log, (std::vector<std::string>{"b:read_op", "a:read_op", "b:write", "a:write", "b:flush",
                                     "a:flush", "b:close", "a:close", "a:inactive", "b:inactive"}));
}

TEST(ChannelPipeline, ContextWriteSkipsHandlersBehindIt) {
  // A handler writing through its own ctx does not pass the outbound handlers behind it.
  struct Echo : ChannelInboundHandlerAdapter {
    void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
      ctx.write_and_flush(std::move(msg));
    }
  };
  EmbeddedChannel ch;
  ch.pipeline().add_last("before", std::make_shared<OutSuffix>("B"));
  ch.pipeline().add_last("echo", std::make_shared<Echo>());
  ch.pipeline().add_last("after", std::make_shared<OutSuffix>("A"));
  ch.write_inbound(std::string("x"));
  EXPECT_EQ(read_out_string(ch), "xB");
}

TEST(ChannelPipeline, RemoveSelfDuringReadLetsTheEventContinue) {
  // A one-shot handler: sees the first message, removes itself, passes the message on.
  struct OneShot : ChannelInboundHandlerAdapter {
    int seen = 0;
    bool removed = false;
    void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
      ++seen;
      ctx.pipeline().remove(*this);
      EXPECT_TRUE(ctx.is_removed());
      ctx.fire_channel_read(msg.get<std::string>() + "!");  // still forwards after removal
    }
    void handler_removed(ChannelHandlerContext&) override { removed = true; }
  };
  auto once = std::make_shared<OneShot>();
  EmbeddedChannel ch;
  ch.pipeline().add_last("once", once);
  ch.pipeline().add_last("s", std::make_shared<Suffix>("s"));
  ch.write_inbound({std::string("a"), std::string("b")});
  EXPECT_EQ(once->seen, 1);
  EXPECT_TRUE(once->removed);
  EXPECT_EQ(read_string(ch), "a!s");
  EXPECT_EQ(read_string(ch), "bs");
}

TEST(ChannelPipeline, AddAndReplaceDuringEventsTakeEffectForLaterHandlers) {
  // While handling a read, insert a handler after itself: the same event passes through it.
  struct Inserter : ChannelInboundHandlerAdapter {
    void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
      if (!ctx.pipeline().get("late")) {
        ctx.pipeline().add_after(ctx.name(), "late", std::make_shared<Suffix>("L"));
      }
      ctx.fire_channel_read(std::move(msg));
    }
  };
  // Replaces the next handler while the event is in this one.
  struct Replacer : ChannelInboundHandlerAdapter {
    void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
      if (ctx.pipeline().get("victim")) {
        ctx.pipeline().replace("victim", "fresh", std::make_shared<Suffix>("F"));
      }
      ctx.fire_channel_read(std::move(msg));
    }
  };
  EmbeddedChannel ch;
  ch.pipeline().add_last("ins", std::make_shared<Inserter>());
  ch.pipeline().add_last("rep", std::make_shared<Replacer>());
  ch.pipeline().add_last("victim", std::make_shared<Suffix>("V"));
  ch.write_inbound(std::string(""));
  EXPECT_EQ(read_string(ch), "LF");
  EXPECT_EQ(ch.pipeline().names(), (std::vector<std::string>{"ins", "late", "rep", "fresh"}));
  ch.write_inbound(std::string(""));
  EXPECT_EQ(read_string(ch), "LF");
}

// Contexts removed inside an event live until it returns, however many: each is freed then
// (its handler is no longer held), and the event still passes through the one it is in.
TEST(ChannelPipeline, HandlersRemovedInsideOneEventAreFreedWhenItReturns) {
  struct Sweeper : ChannelInboundHandlerAdapter {
    std::vector<long> held_during;
    std::vector<std::shared_ptr<ChannelHandler>> victims;
    void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
      for (const char* name : {"v1", "v2", "v3"}) victims.push_back(ctx.pipeline().remove(name));
      ctx.pipeline().remove(*this);
      for (auto& v : victims) held_during.push_back(v.use_count());
      ctx.fire_channel_read(std::move(msg));
    }
  };
  auto sweeper = std::make_shared<Sweeper>();
  EmbeddedChannel ch;
  ch.pipeline().add_last("v1", std::make_shared<Suffix>("1"));
  ch.pipeline().add_last("sweep", sweeper);
  ch.pipeline().add_last("v2", std::make_shared<Suffix>("2"));
  ch.pipeline().add_last("v3", std::make_shared<Suffix>("3"));
  ch.write_inbound(std::string("a"));
  EXPECT_EQ(read_string(ch), "a1");  // v1 came before the sweep
  // During the event every removed context waited (a handler was running), holding its handler.
  ASSERT_EQ(sweeper->held_during.size(), 3u);
  for (long n : sweeper->held_during) EXPECT_EQ(n, 2);
  for (auto& v : sweeper->victims) EXPECT_EQ(v.use_count(), 1);
  EXPECT_EQ(sweeper.use_count(), 1);
  EXPECT_TRUE(ch.pipeline().names().empty());
}

TEST(ChannelPipeline, RemovingTheNextHandlerFromInsideAnEventSkipsIt) {
  struct Killer : ChannelInboundHandlerAdapter {
    void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
      if (ctx.pipeline().get("next")) {
        ctx.pipeline().remove("next");
      }
      ctx.fire_channel_read(std::move(msg));
    }
  };
  EmbeddedChannel ch;
  ch.pipeline().add_last("k", std::make_shared<Killer>());
  ch.pipeline().add_last("next", std::make_shared<Suffix>("N"));
  ch.pipeline().add_last("last", std::make_shared<Suffix>("Z"));
  ch.write_inbound(std::string(""));
  EXPECT_EQ(read_string(ch), "Z");
}

TEST(ChannelPipeline, ThrowingInboundHandlerGetsItsOwnExceptionCaughtFirst) {
  struct Thrower : ChannelInboundHandlerAdapter {
    int own = 0;
    void channel_read(ChannelHandlerContext&, Message&&) override {
      throw std::runtime_error("bad message");
    }
    void exception_caught(ChannelHandlerContext& ctx, std::exception_ptr e) override {
      ++own;
      ctx.fire_exception_caught(std::move(e));
    }
  };
  auto thrower = std::make_shared<Thrower>();
  std::vector<std::string> log;
  EmbeddedChannel ch;
  ch.pipeline().add_last("t", thrower);
  ch.pipeline().add_last("r", std::make_shared<Recorder>("r", log));
  log.clear();
  EXPECT_THROW(ch.write_inbound(std::string("x")), std::runtime_error);
  EXPECT_EQ(thrower->own, 1);
  EXPECT_EQ(log, (std::vector<std::string>{"r:exception", "r:read_complete"}));
}

TEST(ChannelPipeline, ThrowingOutboundHandlerFailsThePromise) {
  struct Thrower : ChannelOutboundHandlerAdapter {
    void write(ChannelHandlerContext&, Message&&, ChannelPromise) override {
      throw std::system_error(std::make_error_code(std::errc::message_size));
    }
  };
  EmbeddedChannel ch({std::make_shared<Thrower>()});
  auto f = ch.write_and_flush(std::string("x"));
  ch.run_pending_tasks();
  EXPECT_TRUE(f.is_done());
  EXPECT_EQ(f.cause(), std::make_error_code(std::errc::message_size));
  EXPECT_FALSE(ch.read_outbound());
}

TEST(ChannelPipeline, HandlerRemovedIsCalledOnTeardown) {
  std::vector<std::string> log;
  {
    EmbeddedChannel ch;
    ch.pipeline().add_last("a", std::make_shared<Recorder>("a", log));
    ch.pipeline().add_last("b", std::make_shared<Recorder>("b", log));
  }
  EXPECT_EQ(log, (std::vector<std::string>{"a:added", "b:added", "b:removed", "a:removed"}));
}

// A handler_removed that throws while the channel is torn down is reported with the handler's
// name, and the handlers before it are still removed. (The report once read the name of a
// context already freed: AddressSanitizer saw a use after free.)
TEST(ChannelPipeline, AHandlerRemovedThatThrowsOnTeardownIsReportedByName) {
  struct Throws final : ChannelHandler {
    void handler_removed(ChannelHandlerContext&) override { throw std::runtime_error("boom"); }
  };
  std::vector<std::string> events;
  std::vector<std::string> logged;
  auto previous = set_log_sink([&](LogLevel, std::string_view m) { logged.emplace_back(m); });
  {
    EmbeddedChannel ch;
    ch.pipeline().add_last("first", std::make_shared<Recorder>("first", events));
    ch.pipeline().add_last("a-handler-with-a-long-name", std::make_shared<Throws>());
  }
  set_log_sink(std::move(previous));
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_NE(logged[0].find("handler_removed of 'a-handler-with-a-long-name' threw during teardown"),
            std::string::npos)
      << logged[0];
  EXPECT_NE(logged[0].find("boom"), std::string::npos) << logged[0];
  EXPECT_EQ(events, (std::vector<std::string>{"first:added", "first:removed"}));
}

TEST(ChannelFuture, ListenersRunOnceOnTheExecutorNeverInline) {
  EmbeddedEventLoop loop;
  ChannelPromise p(loop);
  int calls = 0;
  std::error_code seen;
  p.add_listener([&](const std::error_code& ec) {
    ++calls;
    seen = ec;
  });
  EXPECT_TRUE(p.try_failure(transport::Errc::channel_closed));
  EXPECT_EQ(calls, 0);  // not inside try_failure
  EXPECT_FALSE(p.try_success());
  EXPECT_THROW(p.set_success(), std::logic_error);
  loop.run_pending_tasks();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, transport::Errc::channel_closed);
  // A listener added after completion also runs later, not inside add_listener.
  p.add_listener([&](const std::error_code&) { ++calls; });
  EXPECT_EQ(calls, 1);
  loop.run_pending_tasks();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(p.cause().message(), "channel closed");

  ChannelPromise void_promise;
  EXPECT_TRUE(void_promise.try_success());
  void_promise.set_failure(std::make_error_code(std::errc::io_error));  // no-op, no throw
}

TEST(EmbeddedChannel, CloseFailsPendingWritesOnceAndFiresInactiveLater) {
  std::vector<std::string> log;
  EmbeddedChannel ch;
  ch.pipeline().add_last("r", std::make_shared<Recorder>("r", log));
  auto unflushed = ch.write(std::string("a"));
  auto close = ch.close();
  EXPECT_FALSE(ch.is_open());
  EXPECT_EQ(std::count(log.begin(), log.end(), "r:inactive"), 0);  // later, not inside close()
  ch.run_pending_tasks();
  EXPECT_EQ(std::count(log.begin(), log.end(), "r:inactive"), 1);
  EXPECT_EQ(unflushed.cause(), transport::Errc::channel_closed);
  EXPECT_TRUE(close.is_success());
  EXPECT_TRUE(ch.close_future().is_success());
  // Closing again is idempotent: one do_close, a successful future.
  auto again = ch.close();
  ch.run_pending_tasks();
  EXPECT_TRUE(again.is_success());
  EXPECT_EQ(ch.close_calls(), 1);
  // Writes after close fail at once with a clear error.
  auto late = ch.write_and_flush(std::string("b"));
  ch.run_pending_tasks();
  EXPECT_EQ(late.cause(), transport::Errc::channel_closed);
  EXPECT_EQ(std::count(log.begin(), log.end(), "r:inactive"), 1);
}

TEST(EmbeddedChannel, AutoReadRequestsAReadOnActiveAndWhenTurnedBackOn) {
  EmbeddedChannel ch;
  EXPECT_EQ(ch.read_requests(), 1);
  ch.config().set_auto_read(false);
  ch.config().set_auto_read(true);
  EXPECT_EQ(ch.read_requests(), 2);
}

TEST(EmbeddedChannel, ShutdownOutputWaitsForFlushedWritesAndRefusesLaterOnes) {
  EmbeddedChannel ch;
  long budget = 0;  // the pretend kernel takes nothing until we allow it
  ch.set_write_script([&](std::span<const iovec>, std::size_t bytes) -> long {
    long n = std::min<long>(budget, static_cast<long>(bytes));
    budget -= n;
    return n;
  });
  auto w = ch.write_and_flush(ByteBuffer::wrap(std::string_view("hello")));
  EXPECT_TRUE(ch.write_pending());
  auto s = ch.shutdown_output();
  ch.run_pending_tasks();
  EXPECT_FALSE(s.is_done());
  EXPECT_FALSE(ch.output_shutdown_done());
  auto refused = ch.write_and_flush(ByteBuffer::wrap(std::string_view("x")));
  budget = 100;
  ch.signal_writable();
  ch.run_pending_tasks();
  EXPECT_TRUE(w.is_success());
  EXPECT_TRUE(s.is_success());
  EXPECT_TRUE(ch.output_shutdown_done());
  EXPECT_EQ(refused.cause(), transport::Errc::output_shutdown);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(ch.written_bytes().data()),
                        ch.written_bytes().size()),
            "hello");
}

TEST(ChannelPipeline, HandlerRemovingItselfInWriteStillGetsTheFlushThrough) {
  // write_and_flush from outside any event: the handler that saw the write is gone when the
  // flush follows; the flush must still pass its (removed) context safely.
  struct OneShotWriter : ChannelOutboundHandlerAdapter {
    void write(ChannelHandlerContext& ctx, Message&& msg, ChannelPromise p) override {
      ctx.pipeline().remove(*this);
      ctx.write(std::move(msg), std::move(p));
    }
  };
  EmbeddedChannel ch({std::make_shared<OneShotWriter>()});
  auto f = ch.write_and_flush(std::string("x"));
  ch.run_pending_tasks();
  EXPECT_TRUE(f.is_success());
  EXPECT_EQ(read_out_string(ch), "x");
  EXPECT_TRUE(ch.pipeline().empty());
}

namespace {
// An executor owned by the test thread: other threads only queue.
struct QueueExecutor : Executor {
  std::thread::id owner = std::this_thread::get_id();
  std::mutex mutex;
  std::deque<Runnable> tasks;
  ~QueueExecutor() override { retire(); }
  void execute(Runnable t) override {
    std::lock_guard lock(mutex);
    tasks.push_back(std::move(t));
  }
  bool in_event_loop() const noexcept override { return std::this_thread::get_id() == owner; }
  ScheduledFuture schedule(std::chrono::nanoseconds, Runnable t) override {
    execute(std::move(t));
    return {};
  }
  void run() {
    for (;;) {
      Runnable t;
      {
        std::lock_guard lock(mutex);
        if (tasks.empty()) {
          return;
        }
        t = std::move(tasks.front());
        tasks.pop_front();
      }
      t();
    }
  }
};

// The smallest transport: takes every flushed buffer whole.
struct RecordingChannel : Channel {
  explicit RecordingChannel(Executor& e) : Channel(e) {}
  ~RecordingChannel() override { destroy_pipeline(); }
  std::vector<std::string> written;
  bool open = true;
  bool is_open() const noexcept override { return open; }
  bool is_active() const noexcept override { return open; }
  void do_write(OutboundBuffer& out) override {
    while (auto* m = out.current()) {
      written.emplace_back(m->get<ByteBuffer>().string_view());
      out.remove();
    }
  }
  void do_close() noexcept override { open = false; }
  std::error_code do_shutdown_output() noexcept override { return {}; }
  void do_read_begin() override {}
  using Channel::notify_active;
};
}  // namespace

TEST(Channel, OperationsFromAnotherThreadAreHandedToTheExecutor) {
  QueueExecutor loop;
  auto ch = std::make_shared<RecordingChannel>(loop);
  ChannelFuture f;
  std::thread other([&] { f = ch->write_and_flush(ByteBuffer::wrap(std::string_view("x"))); });
  other.join();
  EXPECT_TRUE(ch->written.empty());  // nothing ran on the other thread
  EXPECT_FALSE(f.is_done());
  loop.run();
  EXPECT_EQ(ch->written, (std::vector<std::string>{"x"}));
  EXPECT_TRUE(f.is_success());
  ch->close();
  loop.run();
  EXPECT_FALSE(ch->is_open());
}

TEST(Channel, TheDefaultTailLogsAndDropsUnhandledInbound) {
  QueueExecutor loop;
  auto ch = std::make_shared<RecordingChannel>(loop);
  ::testing::internal::CaptureStderr();
  ch->pipeline().fire_channel_read(ByteBuffer::allocate(3));
  ch->pipeline().fire_exception_caught(std::make_exception_ptr(std::runtime_error("lost")));
  auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("reached the tail"), std::string::npos);
  EXPECT_NE(err.find("lost"), std::string::npos);
}

namespace {
// On every event it sees, randomly removes itself, inserts a fresh mutator after itself, or
// replaces its successor — always forwarding the event. Under ASan this checks that contexts
// removed mid-event stay valid until the event has left them.
struct Mutator : ChannelDuplexHandler {
  std::mt19937* rng;
  int* counter;
  explicit Mutator(std::mt19937& r, int& c) : rng(&r), counter(&c) {}
  void mutate(ChannelHandlerContext& ctx) {
    auto& p = ctx.pipeline();
    switch ((*rng)() % 6) {
      case 0:
        if (!ctx.is_removed()) {
          p.remove(*this);
        }
        break;
      case 1:
        if (!ctx.is_removed() && p.names().size() < 12) {
          p.add_after(ctx.name(), "m" + std::to_string((*counter)++),
                      std::make_shared<Mutator>(*rng, *counter));
        }
        break;
      case 2: {
        auto names = p.names();
        if (!names.empty()) {
          auto victim = names[(*rng)() % names.size()];
          p.replace(victim, "m" + std::to_string((*counter)++),
                    std::make_shared<Mutator>(*rng, *counter));
        }
        break;
      }
      default: break;
    }
  }
  void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
    mutate(ctx);
    ctx.fire_channel_read(std::move(msg));
  }
  void write(ChannelHandlerContext& ctx, Message&& msg, ChannelPromise p) override {
    mutate(ctx);
    ctx.write(std::move(msg), std::move(p));
  }
};
}  // namespace

TEST(ChannelPipeline, RandomMutationDuringEventsNeverLosesOrDuplicatesAMessage) {
  std::mt19937 rng(99);
  int counter = 0;
  EmbeddedChannel ch;
  for (int i = 0; i < 4; ++i) {
    ch.pipeline().add_last("m" + std::to_string(counter++),
                           std::make_shared<Mutator>(rng, counter));
  }
  for (int i = 0; i < 2000; ++i) {
    if (ch.pipeline().empty()) {
      ch.pipeline().add_last("m" + std::to_string(counter++),
                             std::make_shared<Mutator>(rng, counter));
    }
    ch.write_inbound(std::string("in") + std::to_string(i));
    auto in = ch.read_inbound();
    ASSERT_TRUE(in);
    EXPECT_EQ(in->get<std::string>(), "in" + std::to_string(i));
    EXPECT_FALSE(ch.read_inbound());
    ch.write_outbound(std::string("out") + std::to_string(i));
    auto out = ch.read_outbound();
    ASSERT_TRUE(out);
    EXPECT_EQ(out->get<std::string>(), "out" + std::to_string(i));
    EXPECT_FALSE(ch.read_outbound());
  }
}
