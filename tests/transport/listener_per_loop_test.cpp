// ServerBootstrap's ways of accepting, on every backend: a boss loop handing connections out,
// one group whose loop accepts for itself, and one SO_REUSEPORT listener per worker loop
// (channel_option::listener_per_loop). Every connection is accepted exactly once, and no
// listener outlives close() or shutdown.
#include <niox/transport/bootstrap.hpp>

#include "../support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <future>
#include <latch>
#include <map>
#include <mutex>
#include <thread>

using namespace niox;
using namespace niox::test;

namespace {

class ListenerPerLoopTest : public DescriptorCheckedTest {};

constexpr std::size_t kWorkers = 4;

// What the server saw: how often each client id arrived, and on which worker loop.
struct Accepted {
  std::mutex mutex;
  std::map<std::uint64_t, int> per_id;
  std::vector<int> per_loop = std::vector<int>(kWorkers);
};

// Each connection sends its 8-byte id; the server records it with its loop and echoes it.
void serve_ids(TestServer& server, const std::shared_ptr<Accepted>& seen) {
  EventLoopGroup* workers = &server.workers();
  server.bootstrap().child_handler(init([seen, workers](Channel& ch) {
    auto h = std::make_shared<LambdaHandler>();
    auto got = std::make_shared<std::vector<std::byte>>();
    h->on_read = [seen, workers, got](ChannelHandlerContext& ctx, Message&& m) {
      const ByteBuffer* b = m.get_if<ByteBuffer>();
      ASSERT_NE(b, nullptr);
      auto bytes = b->bytes();
      got->insert(got->end(), bytes.begin(), bytes.end());
      if (got->size() < 8) return;
      std::uint64_t id;
      std::memcpy(&id, got->data(), 8);
      auto& loop = static_cast<LoopSocketChannel&>(ctx.channel()).event_loop();
      {
        std::lock_guard lock(seen->mutex);
        ++seen->per_id[id];
        for (std::size_t i = 0; i < kWorkers; ++i) {
          if (&workers->loop(i) == &loop) ++seen->per_loop[i];
        }
      }
      ctx.write_and_flush(Message(ByteBuffer::wrap(std::span<const std::byte>(*got)).duplicate()));
      got->clear();
    };
    ch.pipeline().add_last(h);
  }));
}

// `n` clients each send their id and wait for its echo; all stay connected until the end.
void connect_clients(const SocketAddress& addr, std::uint64_t n) {
  std::vector<std::unique_ptr<PeerSocket>> clients;
  for (std::uint64_t id = 1; id <= n; ++id) {
    clients.push_back(std::make_unique<PeerSocket>(addr));
    std::byte b[8];
    std::memcpy(b, &id, 8);
    clients.back()->send_all(std::span<const std::byte>(b, 8));
  }
  for (std::uint64_t id = 1; id <= n; ++id) {
    auto back = clients[id - 1]->recv_exact(8);
    ASSERT_EQ(back.size(), 8u) << "client " << id << " got no answer";
    std::uint64_t echoed;
    std::memcpy(&echoed, back.data(), 8);
    ASSERT_EQ(echoed, id);
  }
}

void expect_each_accepted_once(Accepted& seen, std::uint64_t n) {
  std::lock_guard lock(seen.mutex);
  ASSERT_EQ(seen.per_id.size(), n);
  for (const auto& [id, count] : seen.per_id) {
    EXPECT_EQ(count, 1) << "connection " << id;
  }
}

constexpr std::uint64_t kClients = 256;

TEST_P(ListenerPerLoopTest, BossLoopAcceptsEachConnectionOnceWithOneListener) {
  TestServer server(options(), kWorkers);
  auto seen = std::make_shared<Accepted>();
  serve_ids(server, seen);
  const int before = open_fd_count();
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  EXPECT_EQ(open_fd_count(), before + 1);  // one listening socket
  connect_clients(addr, kClients);
  expect_each_accepted_once(*seen, kClients);
}

// One loop both accepts and serves: each child is set up (its handlers added, active) within
// the accept that produced it, with no hop through the loop's task queue, as Netty registers a
// channel of the registering loop.
TEST_P(ListenerPerLoopTest, OneLoopSetsUpEachChildWithinItsAccept) {
  EventLoopGroup group(TestServer::group_options(options(), 1));
  auto accepted = std::make_shared<std::atomic<int>>(0);
  auto set_up_late = std::make_shared<std::atomic<int>>(0);
  auto watcher = std::make_shared<LambdaHandler>();
  watcher->on_read = [accepted, set_up_late](ChannelHandlerContext& ctx, Message&& m) {
    auto* child = m.get_if<std::shared_ptr<LoopSocketChannel>>();
    std::shared_ptr<LoopSocketChannel> c = child != nullptr ? *child : nullptr;
    ctx.fire_channel_read(std::move(m));
    if (!c) return;
    ++*accepted;
    if (c->is_open() && !c->is_active()) ++*set_up_late;
  };
  ServerBootstrap b;
  b.group(group).handler(watcher).child_handler(init([](Channel& ch) {
    auto h = std::make_shared<LambdaHandler>();
    h->on_read = [](ChannelHandlerContext& ctx, Message&& m) { ctx.write_and_flush(std::move(m)); };
    ch.pipeline().add_last(h);
  }));
  auto f = b.bind(InetSocketAddress::loopback_v4(0));
  ASSERT_FALSE(await_for(f));
  auto server = f.channel();
  connect_clients(*server->local_address(), 64);
  EXPECT_EQ(accepted->load(), 64);
  EXPECT_EQ(set_up_late->load(), 0) << "children left to a later turn of the loop";
  await_for(server->close());
  group.shutdown_gracefully();
}

TEST_P(ListenerPerLoopTest, EachWorkerLoopListensAndAcceptsEachConnectionOnce) {
  TestServer server(options(), kWorkers);
  server.bootstrap().option(channel_option::listener_per_loop, true);
  auto seen = std::make_shared<Accepted>();
  serve_ids(server, seen);
  const int before = open_fd_count();
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  EXPECT_NE(addr.inet().port(), 0);
  EXPECT_EQ(open_fd_count(), before + static_cast<int>(kWorkers));  // one listener per loop
  connect_clients(addr, kClients);
  expect_each_accepted_once(*seen, kClients);
  // The kernel hashes each connection to one of the listeners: with 256 connections over 4
  // listeners every loop gets some (a loop left out has a chance of about 4 * 0.75^256).
  std::lock_guard lock(seen->mutex);
  for (std::size_t i = 0; i < kWorkers; ++i) {
    EXPECT_GT(seen->per_loop[i], 0) << "worker loop " << i << " accepted nothing";
  }
}

TEST_P(ListenerPerLoopTest, ClosingTheChannelClosesEveryListener) {
  TestServer server(options(), kWorkers);
  server.bootstrap().option(channel_option::listener_per_loop, true);
  auto seen = std::make_shared<Accepted>();
  serve_ids(server, seen);
  const int before = open_fd_count();
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  connect_clients(addr, 16);
  ASSERT_FALSE(await_for(server.channel()->close()));
  // The other listeners close through their own loops once the first has: wait for that.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (open_fd_count() != before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(open_fd_count(), before) << "a listener (or connection) is still open";
  FileDescriptor probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_storage ss{};
  socklen_t len = addr.to_native(ss);
  EXPECT_NE(::connect(probe.get(), reinterpret_cast<sockaddr*>(&ss), len), 0);
  EXPECT_EQ(errno, ECONNREFUSED);
}

// The groups shut down with the listeners never closed by hand: DescriptorCheckedTest's
// count after the test finds none of them left.
TEST_P(ListenerPerLoopTest, ShutdownLeavesNoListenerOpen) {
  EventLoopGroup workers(TestServer::group_options(options(), kWorkers));
  ServerBootstrap sb;
  sb.group(workers)
      .option(channel_option::listener_per_loop, true)
      .child_handler(
          init([](Channel& ch) { ch.pipeline().add_last(std::make_shared<EchoHandler>()); }));
  auto bound = sb.bind(InetSocketAddress::loopback_v4(0));
  ASSERT_FALSE(await_for(bound));
  PeerSocket client(*bound.channel()->local_address());
  auto back = client.exchange(text_bytes("ping"), 4);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(back.data()), back.size()), "ping");
  client.close();
  workers.shutdown_gracefully();
  EXPECT_FALSE(bound.channel()->is_open());
}

// Binds `server` with every worker loop held until the future has a listener of this test's
// first: that listener runs as the bind fails, before whoever waits on the future can look, and
// counts the descriptors open at that moment.
struct FailedBind {
  std::error_code error;
  int fds_open = -1;
};
FailedBind bind_and_count_at_failure(TestServer& server, const SocketAddress& local) {
  std::latch go(1);
  for (std::size_t i = 0; i < kWorkers; ++i) {
    server.workers().loop(i).execute([&go] { go.wait(); });
  }
  auto bound = server.bootstrap().bind(local);
  auto counted = std::make_shared<std::promise<FailedBind>>();
  auto result = counted->get_future();
  bound.add_listener([counted](const std::error_code& ec) {
    counted->set_value(FailedBind{ec, open_fd_count()});
  });
  go.count_down();
  if (result.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "the bind never completed";
    return {};
  }
  return result.get();
}

TEST_P(ListenerPerLoopTest, PortTakenFailsTheBindAndLeavesNothingOpen) {
  FileDescriptor taken(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(taken.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(taken.get(), 1), 0);  // without SO_REUSEPORT: nobody may share the port
  socklen_t len = sizeof a;
  ::getsockname(taken.get(), reinterpret_cast<sockaddr*>(&a), &len);

  TestServer server(options(), kWorkers);
  server.bootstrap()
      .option(channel_option::listener_per_loop, true)
      .child_handler(init([](Channel&) {}));
  const int before = open_fd_count();
  FailedBind failed =
      bind_and_count_at_failure(server, InetSocketAddress::loopback_v4(ntohs(a.sin_port)));
  EXPECT_EQ(failed.error, std::errc::address_in_use);
  EXPECT_EQ(failed.fds_open, before) << "the bind failed with its socket still open";
}

// The first listener binds, a later one fails: the bind fails only once the first (and every
// other) listener is closed, so that nobody who sees the failure finds a listener still open.
TEST_P(ListenerPerLoopTest, ALaterListenerFailingClosesTheOthersBeforeTheBindFails) {
  class FailsOnSecondPipeline : public ChannelHandler {
   public:
    void handler_added(ChannelHandlerContext&) override {
      if (added_.fetch_add(1) == 1) throw std::runtime_error("second listener refused");
    }

   private:
    std::atomic<int> added_{0};
  };
  TestServer server(options(), kWorkers);
  server.bootstrap()
      .option(channel_option::listener_per_loop, true)
      .handler(std::make_shared<FailsOnSecondPipeline>())
      .child_handler(init([](Channel&) {}));
  const int before = open_fd_count();
  FailedBind failed = bind_and_count_at_failure(server, InetSocketAddress::loopback_v4(0));
  EXPECT_EQ(failed.error, transport::Errc::handler_failed);
  EXPECT_EQ(failed.fds_open, before) << "the bind failed with a listener still open";
}

TEST_P(ListenerPerLoopTest, UnixDomainAddressIsRefused) {
  TestServer server(options(), 2);
  server.bootstrap()
      .option(channel_option::listener_per_loop, true)
      .child_handler(init([](Channel&) {}));
  TempDir dir;
  auto bound =
      server.bootstrap().bind(UnixDomainSocketAddress((dir.path() / "listen.sock").string()));
  EXPECT_EQ(await_for(bound), std::errc::address_family_not_supported);
}

NIOX_INSTANTIATE_BACKENDS(ListenerPerLoopTest);

}  // namespace
