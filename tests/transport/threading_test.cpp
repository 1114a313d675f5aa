// The transport's threading and lifetime contract (channel.hpp), on every backend: outbound
// calls from any thread, waiting on a loop thread, channels outliving their group, a handler
// that throws from exception_caught.
#include <niox/transport/bootstrap.hpp>
#include <niox/transport/embedded_channel.hpp>
#include <niox/transport/loop_socket_channel.hpp>
#include <niox/transport/transport_error.hpp>

#include "../support/transport_scenarios.hpp"
#include "../support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

using namespace niox;
using namespace niox::test;

namespace {

class ThreadingTest : public DescriptorCheckedTest {};

constexpr int kThreads = 4;
constexpr int kWritesPerThread = 500;
constexpr std::size_t kMessage = 64;

// Counts what arrives; completes `all` once `expect` bytes did.
struct Sink {
  std::size_t expect;
  std::atomic<std::size_t> got{0};
  std::promise<void> all;
  explicit Sink(std::size_t n) : expect(n) {}
  void add(std::size_t n) {
    if (got.fetch_add(n) + n == expect) all.set_value();
  }
};

std::shared_ptr<ChannelHandler> counting_handler(std::shared_ptr<Sink> sink) {
  auto h = std::make_shared<LambdaHandler>();
  h->on_read = [sink](ChannelHandlerContext&, Message&& m) { sink->add(m.readable_bytes()); };
  return h;
}

// A client bootstrap on a group of its own, with nothing in its pipelines.
struct BareClient {
  EventLoopGroup group;
  Bootstrap bootstrap;

  explicit BareClient(const EventLoop::Options& options)
      : group(TestServer::group_options(options, 1)) {
    bootstrap.group(group).handler(init([](Channel&) {}));
  }
};

// A client on a group of its own, connected to `addr`, with one handler named `name`; the
// handler's context is known once the channel is active.
struct ActiveClient {
  EventLoopGroup group;
  std::shared_ptr<Channel> channel;
  ChannelHandlerContext* ctx = nullptr;

  ActiveClient(const EventLoop::Options& options, const SocketAddress& addr,
               const std::string& name)
      : group(TestServer::group_options(options, 1)) {
    auto active = std::make_shared<std::promise<ChannelHandlerContext*>>();
    auto h = std::make_shared<LambdaHandler>();
    h->on_active = [active](ChannelHandlerContext& c) { active->set_value(&c); };
    Bootstrap b;
    b.group(group).handler(init([h, name](Channel& ch) { ch.pipeline().add_last(name, h); }));
    auto connected = b.connect(addr);
    if (auto ec = await_for(connected)) throw std::system_error(ec, "connect");
    auto f = active->get_future();
    ctx = wait_for(f);
    channel = connected.channel();
  }
};

// ctx.write_and_flush() from other threads hops to the loop: every future completes, on the
// loop thread, and every byte arrives (ThreadSanitizer watches the channel's state).
TEST_P(ThreadingTest, ContextWritesFromOtherThreadsHopToTheLoop) {
  auto sink = std::make_shared<Sink>(kThreads * kWritesPerThread * kMessage);
  TestServer server(options(), 1);
  server.bootstrap().child_handler(
      init([sink](Channel& ch) { ch.pipeline().add_last(counting_handler(sink)); }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));

  ActiveClient client(options(), addr, "writer");
  ChannelHandlerContext* ctx = client.ctx;
  std::shared_ptr<Channel> keep = client.channel;  // the channel outlives the writers

  std::atomic<int> ok{0}, on_loop{0}, failed{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kWritesPerThread; ++i) {
        auto buf = ByteBuffer::allocate(kMessage);
        for (std::size_t k = 0; k < kMessage; ++k) buf.put(static_cast<std::uint8_t>(t + i + k));
        buf.flip();
        ctx->write_and_flush(std::move(buf))
            .add_listener([&, c = keep.get()](const std::error_code& ec) {
              (ec ? failed : ok).fetch_add(1);
              if (c->in_event_loop()) on_loop.fetch_add(1);
            });
      }
    });
  }
  for (auto& w : writers) w.join();
  auto all = sink->all.get_future();
  wait_for(all);
  for (int i = 0; i < 2000 && ok.load() + failed.load() < kThreads * kWritesPerThread; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(ok.load(), kThreads * kWritesPerThread);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(on_loop.load(), kThreads * kWritesPerThread);
  EXPECT_EQ(sink->got.load(), sink->expect);

  // The other outbound calls of a context hop too: flush, read, and close from this thread.
  ctx->flush();
  ctx->read();
  EXPECT_FALSE(await_for(ctx->close()));
  EXPECT_FALSE(keep->is_open());
  keep.reset();
  client.channel.reset();
  client.group.shutdown_gracefully();
}

struct AddedProbe : ChannelHandler {
  std::atomic<int> added_on_loop{0}, removed_on_loop{0};
  void handler_added(ChannelHandlerContext& ctx) override {
    if (ctx.channel().in_event_loop()) ++added_on_loop;
  }
  void handler_removed(ChannelHandlerContext& ctx) override {
    if (ctx.channel().in_event_loop()) ++removed_on_loop;
  }
};

// Pipeline changes and config() setters from another thread run on the loop; the caller gets
// their results and exceptions. From another loop's thread the wait is refused.
TEST_P(ThreadingTest, PipelineAndConfigChangesFromAnotherThreadRunOnTheLoop) {
  TestServer server(options(), 1);
  SocketAddress addr = serve_echo(server);
  BareClient client(options());
  auto ch = client.bootstrap.connect(addr).sync().channel();

  auto probe = std::make_shared<AddedProbe>();
  ch->pipeline().add_last("probe", probe);
  EXPECT_EQ(probe->added_on_loop.load(), 1);
  EXPECT_THROW(ch->pipeline().add_last("probe", std::make_shared<AddedProbe>()),
               IllegalArgumentException);
  EXPECT_THROW(ch->pipeline().remove("missing"), NoSuchElementException);
  auto other = std::make_shared<AddedProbe>();
  EXPECT_EQ(ch->pipeline().replace("probe", "other", other), probe);
  EXPECT_EQ(probe->removed_on_loop.load(), 1);
  EXPECT_EQ(other->added_on_loop.load(), 1);
  EXPECT_EQ(ch->pipeline().remove("other"), other);

  ch->config().set_auto_read(false).set_write_buffer_water_mark({1024, 4096});
  std::promise<std::pair<bool, std::size_t>> seen;
  ch->executor().execute([&] {
    seen.set_value({ch->config().is_auto_read(), ch->config().write_buffer_water_mark().high});
  });
  auto f = seen.get_future();
  EXPECT_EQ(wait_for(f), (std::pair<bool, std::size_t>{false, 4096}));

  std::promise<std::string> from_other_loop;
  server.workers().next().execute([&] {
    try {
      ch->pipeline().add_last("late", std::make_shared<AddedProbe>());
      from_other_loop.set_value("added");
    } catch (const BlockingOperationException&) {
      from_other_loop.set_value("BlockingOperationException");
    }
  });
  auto g = from_other_loop.get_future();
  EXPECT_EQ(wait_for(g), "BlockingOperationException");
  ch->close().sync();
  ch.reset();
  client.group.shutdown_gracefully();
}

// A context whose handler was removed before the hop arrived: a write fails with
// handler_removed (it never runs through a freed context), a close still closes.
TEST_P(ThreadingTest, ContextOfARemovedHandlerFailsItsWriteCleanly) {
  TestServer server(options(), 1);
  SocketAddress addr = serve_echo(server);
  ActiveClient client(options(), addr, "gone");
  ChannelHandlerContext* ctx = client.ctx;
  std::shared_ptr<Channel> ch = client.channel;

  // Block the loop, queue the write behind the removal, then let the loop go.
  std::promise<void> release;
  auto released = release.get_future().share();
  std::promise<void> removed;
  ch->executor().execute([&, released] {
    released.wait();
    ch->pipeline().remove("gone");
    removed.set_value();
  });
  auto write = ctx->write_and_flush(text("lost"));
  auto close = ctx->close();
  release.set_value();
  EXPECT_EQ(await_for(write), transport::Errc::handler_removed);
  EXPECT_FALSE(await_for(close));
  EXPECT_FALSE(ch->is_open());
  ch.reset();
  client.channel.reset();
  client.group.shutdown_gracefully();
}

// Waiting on a loop thread throws BlockingOperationException instead of freezing the loop:
// sync() on a close in a handler, and Bootstrap::connect().sync() in a task on a loop.
TEST_P(ThreadingTest, WaitingOnALoopThreadThrowsBlockingOperationException) {
  TestServer server(options(), 1);
  std::promise<std::string> in_handler;
  server.bootstrap().child_handler(init([&](Channel& ch) {
    auto h = std::make_shared<LambdaHandler>();
    h->on_active = [&](ChannelHandlerContext& ctx) {
      try {
        ctx.channel().close().sync();
        in_handler.set_value("returned");
      } catch (const BlockingOperationException&) {
        in_handler.set_value("BlockingOperationException");
      }
    };
    ch.pipeline().add_last(h);
  }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  PeerSocket peer(addr);
  auto f = in_handler.get_future();
  EXPECT_EQ(wait_for(f), "BlockingOperationException");

  BareClient client(options());
  std::promise<std::string> in_task;
  client.group.next().execute([&] {
    auto connected = client.bootstrap.connect(addr);
    try {
      connected.sync();
      in_task.set_value("returned");
    } catch (const BlockingOperationException&) {
      in_task.set_value("BlockingOperationException");
    }
    std::error_code ec;
    try {
      connected.sync(ec);
    } catch (const BlockingOperationException&) {
      // The error_code form refuses the same way: it is a programming error, not an outcome.
    }
    if (connected.channel()) connected.channel()->close();
  });
  auto g = in_task.get_future();
  EXPECT_EQ(wait_for(g), "BlockingOperationException");
  client.group.shutdown_gracefully();
}

// Off the loop, sync() waits and reports: success, and a failure as std::system_error or in
// the error_code.
TEST_P(ThreadingTest, SyncOffTheLoopWaitsForTheOutcome) {
  TestServer server(options(), 1);
  SocketAddress addr = serve_echo(server);
  BareClient client(options());
  auto connected = client.bootstrap.connect(addr).sync();
  ASSERT_TRUE(connected.channel());
  EXPECT_TRUE(connected.channel()->is_active());
  ASSERT_TRUE(connected.channel()->remote_address());
  EXPECT_EQ(*connected.channel()->remote_address(), addr);
  ASSERT_TRUE(connected.channel()->local_address());
  EXPECT_NE(connected.channel()->local_address()->inet().port(), 0);
  EXPECT_NO_THROW(connected.channel()->close().sync());

  auto port = addr.inet().port();
  server.stop();
  std::error_code ec;
  client.bootstrap.connect(InetSocketAddress::loopback_v4(port)).sync(ec);
  EXPECT_EQ(ec, std::errc::connection_refused);
  EXPECT_THROW(client.bootstrap.connect(InetSocketAddress::loopback_v4(port)).sync(),
               std::system_error);
  client.group.shutdown_gracefully();
}

// The addresses are asked of the kernel when first wanted and then kept: one asked for while
// the channel was open is still there after the close, one first asked for after it is empty.
TEST_P(ThreadingTest, AnAddressAskedForWhileOpenOutlivesTheClose) {
  TestServer server(options(), 1);
  SocketAddress addr = serve_echo(server);
  BareClient client(options());
  auto asked = client.bootstrap.connect(addr).sync().channel();
  auto unasked = client.bootstrap.connect(addr).sync().channel();
  ASSERT_TRUE(asked && unasked);
  ASSERT_TRUE(asked->remote_address());
  EXPECT_EQ(*asked->remote_address(), addr);
  const auto local = asked->local_address();
  ASSERT_TRUE(local);
  asked->close().sync();
  unasked->close().sync();
  EXPECT_EQ(asked->remote_address(), addr);
  EXPECT_EQ(asked->local_address(), local);
  EXPECT_FALSE(unasked->remote_address());
  EXPECT_FALSE(unasked->local_address());
  client.group.shutdown_gracefully();
}

// The bound port through Channel::local_address(), no downcast needed.
TEST_P(ThreadingTest, ServerChannelTellsItsBoundAddress) {
  EventLoopGroup group(TestServer::group_options(options(), 1));
  ServerBootstrap sb;
  sb.group(group).child_handler(init([](Channel&) {}));
  auto bound = sb.bind(InetSocketAddress::loopback_v4(0)).sync();
  ASSERT_TRUE(bound.channel()->local_address());
  EXPECT_NE(bound.channel()->local_address()->inet().port(), 0);
  EXPECT_FALSE(bound.channel()->remote_address());
  bound.channel()->close().sync();
  group.shutdown_gracefully();
}

// A channel held past its group: every outbound operation completes with channel_closed on
// the calling thread, and nothing touches the dead loop (AddressSanitizer watches).
TEST_P(ThreadingTest, ChannelThatOutlivesItsGroupFailsCleanly) {
  TestServer server(options(), 1);
  SocketAddress addr = serve_echo(server);

  std::shared_ptr<Channel> idle;  // nothing of it in the kernel: AUTO_READ off
  std::shared_ptr<Channel> reading;
  std::optional<ChannelHandlerContext*> ctx;
  {
    ActiveClient client(options(), addr, "reader");
    reading = client.channel;
    ctx = client.ctx;
    Bootstrap quiet;
    quiet.group(client.group).option(channel_option::auto_read, false).handler(init([](Channel&) {
    }));
    idle = quiet.connect(addr).sync().channel();
    client.group.shutdown_gracefully();
  }  // the group and its loops are destroyed here

  for (auto* ch : {idle.get(), reading.get()}) {
    auto w = ch->write(text("after"));
    auto wf = ch->write_and_flush(text("after"));
    ch->flush();
    ch->read();
    auto so = ch->shutdown_output();
    auto c = ch->close();
    for (auto* f : {&w, &wf, &so, &c}) {
      ASSERT_TRUE(f->is_done());
      EXPECT_EQ(f->cause(), transport::Errc::channel_closed);
    }
    EXPECT_FALSE(ch->in_event_loop());
    EXPECT_THROW(ch->close().sync(), std::system_error);
    // Listeners added now run at once on this thread: no loop is left to run them.
    bool ran = false;
    ChannelFuture(c).add_listener([&](const std::error_code&) { ran = true; });
    EXPECT_TRUE(ran);
  }
  // The pipeline's own context too (its channel was closed when the loop went down).
  auto late = (*ctx)->write_and_flush(text("late"));
  EXPECT_TRUE(late.is_done());
  EXPECT_FALSE(late.is_success());
  idle.reset();
  reading.reset();
}

// A handler whose exception_caught() throws has its channel closed: otherwise it would leave a
// connection that nothing handles any more.
TEST(ThreadingContract, HandlerThrowingFromExceptionCaughtClosesTheChannel) {
  auto h = std::make_shared<LambdaHandler>();
  h->on_read = [](ChannelHandlerContext&, Message) { throw std::runtime_error("bad input"); };
  std::string seen;
  h->on_exception = [&](ChannelHandlerContext&, std::exception_ptr e) {
    seen = exception_message(e);
    throw std::runtime_error("and the handler fails too");
  };
  EmbeddedChannel ch{h};
  ASSERT_TRUE(ch.is_open());
  ch.write_inbound(text("x"));
  EXPECT_EQ(seen, "bad input");
  EXPECT_FALSE(ch.is_open());
  EXPECT_FALSE(ch.write_and_flush(text("y")).is_success());
}

TEST(ThreadingContract, ExceptionMessageNeedsNoRethrow) {
  EXPECT_EQ(exception_message(std::make_exception_ptr(std::runtime_error("boom"))), "boom");
  EXPECT_EQ(exception_message(std::make_exception_ptr(42)), "(unknown exception)");
  EXPECT_EQ(exception_message(nullptr), "(no exception)");
}

// sync() on an embedded channel's pending future would wait forever (only the calling thread
// runs that executor): refused.
TEST(ThreadingContract, SyncOnAnEmbeddedExecutorIsRefused) {
  EmbeddedChannel ch{std::make_shared<LambdaHandler>()};
  ChannelPromise p = ch.new_promise();
  EXPECT_THROW(p.future().sync(), BlockingOperationException);
  p.set_success();
  EXPECT_NO_THROW(p.future().sync());
}

NIOX_INSTANTIATE_BACKENDS(ThreadingTest);

}  // namespace
