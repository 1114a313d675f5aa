// Task, sync_wait, co_spawn, resume_on, sleep_for and when_all; the loop-backed ones on every
// backend.
#include <niox/async/spawn.hpp>
#include <niox/async/task.hpp>
#include <niox/async/when_all.hpp>
#include <niox/async/when_any.hpp>
#include <niox/base/log.hpp>
#include <niox/loop/event_loop_group.hpp>

#include "support/backends.hpp"
#define NIOX_TEST_DEFINE_COUNTING_NEW
#include "support/counting_new.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <mutex>
#include <new>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace niox {
namespace {

using test::allocations;
using test::counting;

using namespace std::chrono_literals;

Task<int> answer(int* started) {
  ++*started;
  co_return 42;
}

TEST(Task, IsLazyAndReturnsItsValue) {
  int started = 0;
  Task<int> t = answer(&started);
  EXPECT_EQ(started, 0);  // nothing ran yet
  EXPECT_EQ(sync_wait(std::move(t)), 42);
  EXPECT_EQ(started, 1);
  Task<int> never = answer(&started);  // destroyed without being awaited: the frame goes
  EXPECT_EQ(started, 1);
}

Task<int> level3() {
  throw std::runtime_error("from level 3");
  co_return 0;
}
Task<int> level2() { co_return 1 + co_await level3(); }
Task<void> level1(std::string* seen) {
  try {
    co_await level2();
  } catch (const std::logic_error&) {
    *seen = "wrong type";
  }
  *seen = "not reached";
}

TEST(Task, ExceptionsCrossThreeLevelsOfAwaits) {
  std::string seen;
  try {
    sync_wait(level1(&seen));
    FAIL() << "expected the exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "from level 3");
  }
  EXPECT_EQ(seen, "");
}

Task<int> ready(int v) { co_return v; }

Task<long> sum_of_ready(int n) {
  long sum = 0;
  for (int i = 0; i < n; ++i) sum += co_await ready(i & 7);
  co_return sum;
}

Task<long> depth(int n) {
  if (n == 0) co_return 0;
  co_return 1 + co_await depth(n - 1);
}

// A million awaits that complete at once, in a row and nested a million deep, do not grow the
// stack, whatever the optimisation level (frames live on the heap; control goes through the
// thread's drain loop, not through nested calls).
TEST(Task, AMillionSynchronousAwaitsDoNotOverflowTheStack) {
  EXPECT_EQ(sync_wait(sum_of_ready(1'000'000)), 3'500'000L);
  EXPECT_EQ(sync_wait(depth(1'000'000)), 1'000'000L);
}

// Once the thread's block cache is warm, a task and its awaits allocate nothing.
TEST(Task, FramesComeFromTheBlockCacheOnceWarm) {
  for (int i = 0; i < 100; ++i) sync_wait(sum_of_ready(10));
  counting = true;
  allocations = 0;
  long total = 0;
  for (int i = 0; i < 1000; ++i) total += sync_wait(sum_of_ready(10));
  counting = false;
  EXPECT_EQ(total, 1000 * 29L);
  EXPECT_EQ(allocations, 0u);
}

TEST(Task, WhenAllRunsEveryTaskAndCollectsTheirResults) {
  auto t = []() -> Task<void> {
    auto [a, b, c] = co_await when_all(ready(1), ready(2), []() -> Task<void> { co_return; }());
    EXPECT_EQ(a, 1);
    EXPECT_EQ(b, 2);
    (void)c;
    std::vector<Task<int>> many;
    for (int i = 0; i < 10; ++i) many.push_back(ready(i));
    auto all = co_await when_all(std::move(many));
    EXPECT_EQ(all, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  };
  sync_wait(t());
}

TEST(Task, WhenAllRethrowsTheFirstFailureAfterEveryTaskFinished) {
  std::atomic<int> finished{0};
  auto ok = [&]() -> Task<int> {
    ++finished;
    co_return 1;
  };
  auto t = [&]() -> Task<void> { co_await when_all(ok(), level3(), ok()); };
  EXPECT_THROW(sync_wait(t()), std::runtime_error);
  EXPECT_EQ(finished.load(), 2);
}

class AsyncLoopTest : public test::BackendTest {};

// loop.pending() of a loop running on a thread of its group, asked there.
std::size_t pending_on(EventLoop& loop) {
  std::promise<std::size_t> pending;
  loop.execute([&] { pending.set_value(loop.pending()); });
  return pending.get_future().get();
}

TEST_P(AsyncLoopTest, ResumeOnHopsBetweenLoopsAndSleepForWaitsWithoutBlocking) {
  EventLoopGroup group(group_options(2));
  EventLoop& a = group.loop(0);
  EventLoop& b = group.loop(1);
  auto t = [&]() -> Task<int> {
    EXPECT_FALSE(a.in_event_loop());
    co_await resume_on(a);
    EXPECT_TRUE(a.in_event_loop());
    auto before = std::chrono::steady_clock::now();
    co_await sleep_for(a, 20ms);
    EXPECT_TRUE(a.in_event_loop());
    EXPECT_GE(std::chrono::steady_clock::now() - before, 20ms);
    co_await resume_on(b);
    EXPECT_TRUE(b.in_event_loop());
    co_await resume_on(b);  // already there: no hop
    co_return 7;
  };
  EXPECT_EQ(sync_wait(t()), 7);
}

TEST_P(AsyncLoopTest, SyncWaitOnALoopThreadThrowsBlockingOperationException) {
  EventLoopGroup group(group_options(1));
  std::promise<std::string> seen;
  group.next().execute([&] {
    try {
      sync_wait(ready(1));
      seen.set_value("returned");
    } catch (const BlockingOperationException&) {
      seen.set_value("BlockingOperationException");
    }
  });
  auto f = seen.get_future();
  ASSERT_EQ(f.wait_for(20s), std::future_status::ready);
  EXPECT_EQ(f.get(), "BlockingOperationException");
}

TEST_P(AsyncLoopTest, CoSpawnRunsOnTheLoopAndReportsTheOutcome) {
  EventLoopGroup group(group_options(1));
  EventLoop& loop = group.next();
  std::promise<std::pair<bool, int>> done;
  // A coroutine lambda's captures live in the lambda, not in the frame: it must outlive the task.
  auto body = [&]() -> Task<int> {
    co_await sleep_for(loop, 1ms);
    co_return loop.in_event_loop() ? 5 : -1;
  };
  co_spawn(loop, body(), [&](std::exception_ptr e, int v) {
    done.set_value({e == nullptr && loop.in_event_loop(), v});
  });
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(20s), std::future_status::ready);
  EXPECT_EQ(f.get(), (std::pair<bool, int>{true, 5}));

  // Detached: the failure reaches the log sink.
  std::promise<std::string> logged;
  std::once_flag once;
  auto previous = set_log_sink([&](LogLevel, std::string_view m) {
    if (m.find("detached task failed") != std::string_view::npos) {
      std::call_once(once, [&] { logged.set_value(std::string(m)); });
    }
  });
  co_spawn(loop, level2());
  auto g = logged.get_future();
  ASSERT_EQ(g.wait_for(20s), std::future_status::ready);
  set_log_sink(std::move(previous));
  EXPECT_NE(g.get().find("from level 3"), std::string::npos);
}

// A task destroyed while it sleeps cancels its timer: the loop never resumes the freed frame
// (AddressSanitizer would see it), and nothing is left pending.
TEST_P(AsyncLoopTest, DestroyingASuspendedTaskCancelsItsTimer) {
  EventLoop loop(options());
  loop.run_once();  // bound to this thread
  bool resumed = false;
  {
    auto sleeper = [&]() -> Task<void> {
      co_await sleep_for(loop, 10ms);
      resumed = true;
    };
    auto outer = [&]() -> Task<void> { co_await sleeper(); };
    Task<void> t = outer();
    // Run the body to its first suspension (in sleep_for), as an awaiter starts it, then drop
    // the task: the frames of outer and sleeper go, and with them sleep_for's timer.
    auto awaiter = t.operator co_await();
    awaiter.await_suspend(std::noop_coroutine());
    ASSERT_FALSE(resumed);
  }
  for (int i = 0; i < 5; ++i) loop.run_once(20ms);
  EXPECT_FALSE(resumed);
  EXPECT_EQ(loop.pending(), 0u);
}

// A stop request from another thread ends a sleep at once, on the loop, with
// operation_aborted; the timer is gone with it.
TEST_P(AsyncLoopTest, AStopRequestFromAnotherThreadCancelsASleep) {
  EventLoopGroup group(group_options(1));
  EventLoop& loop = group.next();
  std::stop_source stop;
  auto sleeper = [&]() -> Task<std::string> {
    try {
      co_await sleep_for(loop, 1h);
    } catch (const std::system_error& e) {
      co_return std::string(e.code() == operation_aborted() ? "aborted" : "other") +
          (loop.in_event_loop() ? " on the loop" : " elsewhere");
    }
    co_return "slept";
  };
  std::thread stopper([&] {
    std::this_thread::sleep_for(10ms);
    stop.request_stop();
  });
  EXPECT_EQ(sync_wait(with_stop_token(stop.get_token(), sleeper())), "aborted on the loop");
  stopper.join();
  // Already stopped: the next sleep does not even start.
  EXPECT_THROW(sync_wait(with_stop_token(stop.get_token(),
                                         [&]() -> Task<void> { co_await sleep_for(loop, 1h); }())),
               std::system_error);
  EXPECT_EQ(pending_on(loop), 0u);
}

Task<int> nap(EventLoop& loop, std::chrono::milliseconds d, int v) {
  co_await sleep_for(loop, d);
  co_return v;
}

TEST_P(AsyncLoopTest, WithTimeoutStopsTheTaskAndReportsTimedOut) {
  EventLoopGroup group(group_options(1));
  EventLoop& loop = group.next();
  try {
    sync_wait(with_timeout(loop, nap(loop, 1h, 1), 20ms));
    FAIL() << "expected timed_out";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::timed_out);
  }
  EXPECT_EQ(sync_wait(with_timeout(loop, nap(loop, 1ms, 2), 1h)), 2);
  // A timeout racing a completion: one of the two outcomes, every time, and nothing left over.
  int completed = 0, timed_out = 0;
  for (int i = 0; i < 200; ++i) {
    try {
      completed += sync_wait(with_timeout(loop, nap(loop, 1ms, 1), 1ms));
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), std::errc::timed_out);
      ++timed_out;
    }
  }
  EXPECT_EQ(completed + timed_out, 200);
  EXPECT_EQ(pending_on(loop), 0u);
}

// when_any: the first to finish wins; the others are stopped and have ended by then.
TEST_P(AsyncLoopTest, WhenAnyTakesTheFirstAndStopsTheOthers) {
  EventLoopGroup group(group_options(1));
  EventLoop& loop = group.next();
  auto race = [&]() -> Task<std::pair<std::size_t, int>> {
    std::vector<Task<int>> tasks;
    tasks.push_back(nap(loop, 1h, 1));
    tasks.push_back(nap(loop, 5ms, 2));
    tasks.push_back(nap(loop, 1h, 3));
    co_return co_await when_any(std::move(tasks));
  };
  EXPECT_EQ(sync_wait(race()), (std::pair<std::size_t, int>{1, 2}));
  auto failing = [&]() -> Task<int> {
    co_await sleep_for(loop, 2ms);
    throw std::runtime_error("first and failed");
  };
  auto race_failure = [&]() -> Task<void> {
    std::vector<Task<int>> tasks;
    tasks.push_back(nap(loop, 1h, 1));
    tasks.push_back(failing());
    co_await when_any(std::move(tasks));
  };
  EXPECT_THROW(sync_wait(race_failure()), std::runtime_error);
  EXPECT_EQ(pending_on(loop), 0u);
}

// A TaskGroup joins its children; the first failure stops the rest and is rethrown.
TEST_P(AsyncLoopTest, TaskGroupJoinsItsChildrenAndPropagatesTheFirstFailure) {
  EventLoopGroup group(group_options(1));
  EventLoop& loop = group.next();
  std::atomic<int> stopped{0};
  auto sleeper = [&]() -> Task<void> {
    try {
      co_await sleep_for(loop, 1h);
    } catch (const std::system_error&) {
      ++stopped;
      throw;
    }
  };
  auto failing = [&]() -> Task<void> {
    co_await sleep_for(loop, 5ms);
    throw std::runtime_error("child failed");
  };
  auto nursery = [&]() -> Task<void> {
    co_await resume_on(loop);
    TaskGroup g;
    for (int i = 0; i < 3; ++i) g.spawn(sleeper());
    g.spawn(failing());
    EXPECT_EQ(g.running(), 4u);
    co_await g.join();
  };
  try {
    sync_wait(nursery());
    FAIL() << "expected the child's failure";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "child failed");
  }
  EXPECT_EQ(stopped.load(), 3);

  // Stopped from outside: the children end with operation_aborted, which join() does not
  // count as a failure.
  std::stop_source stop;
  auto server = [&]() -> Task<int> {
    co_await resume_on(loop);
    TaskGroup g;
    for (int i = 0; i < 5; ++i) g.spawn(sleeper());
    co_await g.join();
    co_return 5;
  };
  std::thread stopper([&] {
    std::this_thread::sleep_for(10ms);
    stop.request_stop();
  });
  EXPECT_EQ(sync_wait(with_stop_token(stop.get_token(), server())), 5);
  stopper.join();
  EXPECT_EQ(stopped.load(), 8);
}

NIOX_INSTANTIATE_BACKENDS(AsyncLoopTest);

}  // namespace
}  // namespace niox
