#include <niox/loop/event_loop_group.hpp>

#include "support/backends.hpp"
#include "support/loop_sockets.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <set>
#include <thread>

namespace niox {
namespace {

using namespace std::chrono_literals;

class LoopGroupTest : public test::BackendTest {};

TEST_P(LoopGroupTest, RoundRobinOverLoopsOnTheirOwnThreads) {
  EventLoopGroup group(group_options(2));
  ASSERT_EQ(group.size(), 2u);
  EventLoop* first = &group.next();
  EventLoop* second = &group.next();
  EXPECT_NE(first, second);
  EXPECT_EQ(&group.next(), first);
  std::set<std::thread::id> ids;
  for (std::size_t i = 0; i < group.size(); ++i) {
    std::promise<std::thread::id> p;
    auto f = p.get_future();
    group.loop(i).execute([&p, &l = group.loop(i)] {
      EXPECT_TRUE(l.in_event_loop());
      EXPECT_EQ(l.backend(), l.backend());
      p.set_value(std::this_thread::get_id());
    });
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
    ids.insert(f.get());
  }
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 0u);
  EXPECT_EQ(group.loop(0).backend(), GetParam().kind);
}

// Shutdown runs the tasks already queued and completes pending operations (aborted), on
// the loops' threads, before the loops are destroyed.
TEST_P(LoopGroupTest, GracefulShutdownRunsTasksAndAbortsPendingOperations) {
  auto [a, b] = test::loop_socket_pair();
  std::atomic<int> tasks{0}, aborted{0}, timer_ran{0};
  {
    EventLoopGroup group(group_options(2));
    std::promise<void> started;
    EventLoop& loop = group.next();
    loop.execute([&, fd = a.get()] {
      loop.read(fd, ByteBuffer::allocate(16), [&](std::error_code ec, std::size_t, ByteBuffer) {
        if (ec == std::errc::operation_canceled) ++aborted;
      });
      loop.schedule(1h, [&] { ++timer_ran; });  // pending at shutdown: never runs
      started.set_value();
    });
    started.get_future().wait();
    for (int i = 0; i < 100; ++i) group.loop(i % 2).execute([&] { ++tasks; });
    group.shutdown_gracefully();
    EXPECT_EQ(tasks.load(), 100);
    EXPECT_EQ(aborted.load(), 1);
    EXPECT_EQ(timer_ran.load(), 0);
  }
}

TEST_P(LoopGroupTest, PinnedThreads) {
  EventLoopGroup::Options o = group_options(2);
  o.pin_threads = true;
  EventLoopGroup group(o);
  std::promise<int> cpu;
  group.loop(1).execute([&] { cpu.set_value(sched_getcpu()); });
  auto f = cpu.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), static_cast<int>(1 % std::max(1u, std::thread::hardware_concurrency())));
}

NIOX_INSTANTIATE_BACKENDS(LoopGroupTest);

}  // namespace
}  // namespace niox
