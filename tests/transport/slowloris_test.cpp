// Row "slowloris: 1,000 connections sending 1 byte/s": a ReadTimeoutHandler with a short
// timeout closes every one of them, and each connection's memory is released (its channel is
// destroyed). On every backend.
#include <niox/transport/bootstrap.hpp>
#include <niox/transport/idle_state_handler.hpp>

#include "../support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include <sys/resource.h>

using namespace niox;
using namespace niox::test;

namespace {

class SlowlorisTest : public DescriptorCheckedTest {
 protected:
  void SetUp() override {
    DescriptorCheckedTest::SetUp();
    if (IsSkipped()) return;
    // Both ends of every connection live in this process.
    rlimit r{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &r), 0);
    constexpr rlim_t kNeed = 2 * kConnections + 256;
    if (r.rlim_cur != RLIM_INFINITY && r.rlim_cur < kNeed) {
      if (r.rlim_max != RLIM_INFINITY && r.rlim_max < kNeed) {
        GTEST_SKIP() << "RLIMIT_NOFILE hard limit " << r.rlim_max << " is below " << kNeed;
      }
      r.rlim_cur = kNeed;
      ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &r), 0);
    }
  }
  static constexpr int kConnections = 1000;
};

TEST_P(SlowlorisTest, ReadTimeoutClosesAThousandTricklingConnections) {
  struct State {
    std::mutex mu;
    std::vector<std::weak_ptr<Channel>> channels;
    std::atomic<int> active{0}, timeouts{0}, max_received{0};
  };
  auto st = std::make_shared<State>();
  TestServer server(options(), 2);
  server.bootstrap().child_handler(init([st](Channel& ch) {
    {
      std::lock_guard lock(st->mu);
      st->channels.push_back(ch.shared_from_this());
    }
    auto counter = std::make_shared<LambdaHandler>();
    auto received = std::make_shared<int>(0);
    counter->on_active = [st](ChannelHandlerContext&) { ++st->active; };
    counter->on_inactive = [st](ChannelHandlerContext&) { --st->active; };
    counter->on_read = [st, received](ChannelHandlerContext&, Message&& m) {
      *received += static_cast<int>(m.readable_bytes());
      int seen = st->max_received.load();
      while (*received > seen && !st->max_received.compare_exchange_weak(seen, *received)) {
      }
    };
    counter->on_exception = [st](ChannelHandlerContext&, std::exception_ptr e) {
      try {
        std::rethrow_exception(e);
      } catch (const ReadTimeoutException&) {
        ++st->timeouts;
      } catch (...) {
      }
    };
    ch.pipeline()
        .add_last("timeout", std::make_shared<ReadTimeoutHandler>(std::chrono::milliseconds(250)))
        .add_last("counter", counter);
  }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));

  // The peers: each connects and sends one byte, then one more byte per period (longer than
  // the timeout) for as long as the server keeps it open.
  std::vector<std::unique_ptr<PeerSocket>> peers;
  peers.reserve(kConnections);
  std::vector<bool> open(kConnections, true);
  for (int i = 0; i < kConnections; ++i) {
    peers.push_back(std::make_unique<PeerSocket>(addr));
    peers.back()->send_all("x");
  }
  int still_open = kConnections;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto next_byte = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  std::vector<pollfd> fds(kConnections);
  while (still_open > 0 && std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < kConnections; ++i) {
      fds[static_cast<std::size_t>(i)] = {
          open[static_cast<std::size_t>(i)] ? peers[static_cast<std::size_t>(i)]->fd() : -1, POLLIN,
          0};
    }
    ::poll(fds.data(), fds.size(), 50);
    for (int i = 0; i < kConnections; ++i) {
      auto& p = fds[static_cast<std::size_t>(i)];
      if (p.fd < 0 || p.revents == 0) continue;
      char c;
      ssize_t k = ::recv(p.fd, &c, 1, MSG_DONTWAIT);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
        open[static_cast<std::size_t>(i)] = false;  // EOF (or a reset): the server closed it
        peers[static_cast<std::size_t>(i)]->close();
        --still_open;
      }
    }
    if (std::chrono::steady_clock::now() >= next_byte) {
      for (int i = 0; i < kConnections; ++i) {
        if (open[static_cast<std::size_t>(i)])
          ::send(peers[static_cast<std::size_t>(i)]->fd(), "x", 1, MSG_NOSIGNAL);
      }
      next_byte += std::chrono::milliseconds(500);
    }
  }
  EXPECT_EQ(still_open, 0) << "connections the idle timeout did not close";
  // Every server-side channel went inactive and was destroyed: nothing is kept per connection.
  auto gone = [&] {
    std::lock_guard lock(st->mu);
    for (auto& w : st->channels) {
      if (!w.expired()) return false;
    }
    return st->active.load() == 0;
  };
  for (int i = 0; i < 5000 && !gone(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_TRUE(gone());
  {
    std::lock_guard lock(st->mu);
    EXPECT_EQ(st->channels.size(), static_cast<std::size_t>(kConnections));
  }
  EXPECT_EQ(st->timeouts.load(), kConnections);
  EXPECT_GE(st->max_received.load(), 1);
}

NIOX_INSTANTIATE_BACKENDS(SlowlorisTest);

}  // namespace
