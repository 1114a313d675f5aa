// Steady state allocates nothing: once the loop's pools are warm, starting and completing
// reads, writes, timers, tasks and accepts performs no heap allocation on the loop thread.
#include <niox/buffer/byte_buffer.hpp>
#include <niox/loop/event_loop.hpp>

#include "support/backends.hpp"
#define NIOX_TEST_DEFINE_COUNTING_NEW
#include "support/counting_new.hpp"
#include "support/loop_sockets.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include <unistd.h>

namespace niox {
namespace {

using test::allocated_bytes;
using test::allocations;
using test::counting;

using namespace std::chrono_literals;

class LoopAllocationTest : public test::BackendTest {};

// One 4-byte message A -> B per round; the next round starts when both the write and the read
// of the previous one completed, reusing their buffers.
struct PingPong {
  EventLoop& loop;
  int a, b;
  int rounds = 0;
  int limit = 1 << 30;
  int halves = 0;
  int tasks = 0;
  ByteBuffer out, in;

  void ping() {
    out.clear();
    out.put_int(rounds);
    out.flip();
    loop.write(a, std::move(out), [this](std::error_code ec, std::size_t, ByteBuffer o) {
      EXPECT_FALSE(ec);
      out = std::move(o);
      half_done();
    });
    in.clear();
    loop.read(b, std::move(in), [this](std::error_code ec, std::size_t n, ByteBuffer i) {
      EXPECT_FALSE(ec);
      EXPECT_EQ(n, 4u);
      EXPECT_EQ(i.get_int(0), rounds);
      in = std::move(i);
      // A timer armed and cancelled, and a task, per round as well.
      auto timer = loop.schedule(1h, [] {});
      EXPECT_TRUE(timer.cancel());
      loop.execute([this] { ++tasks; });
      half_done();
    });
  }
  void half_done() {
    if (++halves < 2) return;
    halves = 0;
    if (++rounds < limit) ping();
  }
};

TEST_P(LoopAllocationTest, SteadyStateReadWriteTimerTaskAllocateNothing) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  PingPong pp{loop, a.get(), b.get()};
  pp.out = ByteBuffer::allocate(4);
  pp.in = ByteBuffer::allocate(4);
  pp.limit = 2300;
  pp.ping();
  ASSERT_TRUE(test::run_until(loop, [&] { return pp.rounds >= 300; }));
  counting = true;
  allocations = 0;
  auto end = std::chrono::steady_clock::now() + 20s;
  while (pp.rounds < pp.limit && std::chrono::steady_clock::now() < end) loop.run_once(10ms);
  counting = false;
  EXPECT_EQ(pp.rounds, pp.limit);
  EXPECT_EQ(allocations, 0u);
  // The counter itself works: one allocation is seen.
  counting = true;
  auto probe = std::make_unique<int>(1);
  counting = false;
  EXPECT_EQ(allocations, 1u);
  ASSERT_TRUE(test::run_until(loop, [&] { return loop.pending() == 0; }));
}

// An accept holds its connection in the operation until the handler takes it: that costs no
// allocation either, also on a pooled operation that has only ever read and written before.
TEST_P(LoopAllocationTest, AcceptOnAPooledOperationAllocatesNothing) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  PingPong pp{loop, a.get(), b.get()};
  pp.out = ByteBuffer::allocate(4);
  pp.in = ByteBuffer::allocate(4);
  pp.limit = 300;
  pp.ping();
  ASSERT_TRUE(test::run_until(loop, [&] { return pp.rounds >= pp.limit; }));
  FileDescriptor listener = test::loop_tcp_listener();
  int accepted = 0;
  auto accept_one = [&] {
    loop.accept(listener.get(), [&](std::error_code ec, FileDescriptor fd) {
      EXPECT_FALSE(ec);
      EXPECT_TRUE(fd.valid());
      ++accepted;  // dropped: closed here, the loop never used it
    });
  };
  // One accept first, so that the listener is known to the loop; a read left pending keeps
  // that operation busy, and the next accept runs on one that has never accepted.
  FileDescriptor first = test::loop_tcp_client(listener.get());
  accept_one();
  ASSERT_TRUE(test::run_until(loop, [&] { return accepted == 1; }));
  loop.read(b.get(), ByteBuffer::allocate(4), [](std::error_code, std::size_t, ByteBuffer) {});
  FileDescriptor second = test::loop_tcp_client(listener.get());
  counting = true;
  allocations = 0;
  accept_one();
  auto end = std::chrono::steady_clock::now() + 20s;
  while (accepted < 2 && std::chrono::steady_clock::now() < end) loop.run_once(10ms);
  counting = false;
  EXPECT_EQ(accepted, 2);
  EXPECT_EQ(allocations, 0u);
  loop.release(b);
  ASSERT_TRUE(test::run_until(loop, [&] { return loop.pending() == 0; }));
}

// A pending receive is what every idle connection holds: its pooled operation carries only
// what a receive needs, not the address, msghdr, iovecs, accepted descriptors and transfer
// state of the other families (656 bytes of operation before they moved to a side block), and
// no room for buffers: it has none while it waits (448 bytes with the room for one).
TEST_P(LoopAllocationTest, APendingReceiveCostsOnlyWhatAReceiveNeeds) {
  EventLoop loop(options());
  constexpr int n = 64;
  std::vector<std::pair<FileDescriptor, FileDescriptor>> pairs;
  for (int i = 0; i < n; ++i) pairs.push_back(test::loop_socket_pair());
  int received = 0;
  auto on_receive = [&](std::error_code ec, std::size_t, ByteBuffer) {
    if (!ec) ++received;
  };
  // Each descriptor known to the loop first, one receive at a time.
  for (auto& [a, b] : pairs) {
    loop.receive(b.get(), 64, on_receive);
    ASSERT_EQ(::write(a.get(), "x", 1), 1);
    const int want = received + 1;
    ASSERT_TRUE(test::run_until(loop, [&] { return received == want; }));
  }
  counting = true;
  allocated_bytes = 0;
  for (auto& [a, b] : pairs) loop.receive(b.get(), 64, on_receive);
  loop.run_once(0ms);
  counting = false;
  EXPECT_LE(allocated_bytes / n, 256u) << allocated_bytes << " bytes for " << n << " receives";
  for (auto& [a, b] : pairs) loop.release(b);
  ASSERT_TRUE(test::run_until(loop, [&] { return loop.pending() == 0; }));
}

NIOX_INSTANTIATE_BACKENDS(LoopAllocationTest);

}  // namespace
}  // namespace niox
