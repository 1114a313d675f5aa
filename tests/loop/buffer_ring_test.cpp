// The io_uring backend's receive buffer ring: receives take ring buffers when bytes arrive, a
// ring emptied by a slow consumer or by more arrivals than buffers falls back to pooled
// buffers without losing or reordering a byte, and ring buffers come back from any thread,
// even after their loop is gone. io_uring only; skipped where the kernel has no buffer rings.
#include <niox/buffer/byte_buffer.hpp>
#include <niox/loop/event_loop.hpp>

#include "support/backends.hpp"
#include "support/loop_sockets.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <cstring>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace niox {
namespace {

using test::run_until;
using namespace std::chrono_literals;

using test::filled;

class BufferRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = test::backend_skip_reason(BackendKind::io_uring)) GTEST_SKIP() << *why;
  }
  static EventLoop::Options ring_of(unsigned entries) {
    EventLoop::Options o;
    o.backend = BackendKind::io_uring;
    o.receive_ring_entries = entries;
    return o;
  }
  // One receive of "probe" to learn whether this kernel registered the ring.
  static bool has_ring(EventLoop& loop) {
    auto [a, b] = test::loop_socket_pair();
    bool done = false;
    EXPECT_EQ(::write(a.get(), "probe", 5), 5);
    loop.receive(b.get(), 64, [&](std::error_code, std::size_t, ByteBuffer) { done = true; });
    run_until(loop, [&] { return done; });
    return loop.counters().ring_receives > 0;
  }
};

std::string ring_pattern(std::size_t from, std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (from + i) % 23);
  return s;
}

// The consumer keeps every buffer it was given until the end of the stream: the ring empties
// after a few receives, the rest read into pooled buffers, and the stream is whole.
TEST_F(BufferRingTest, ASlowConsumerEmptiesTheRingAndEveryByteStillArrivesInOrder) {
  EventLoop loop(ring_of(4));
  if (!has_ring(loop)) GTEST_SKIP() << "this kernel has no io_uring buffer rings";
  auto [a, b] = test::loop_socket_pair();
  ASSERT_EQ(::fcntl(a.get(), F_SETFL, 0), 0);  // the writer blocks when the socket is full
  constexpr std::size_t total = 1 << 20;
  std::thread writer([fd = a.get()] {
    for (std::size_t off = 0; off < total; off += 1000) {
      std::string chunk = ring_pattern(off, std::min<std::size_t>(1000, total - off));
      if (::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(chunk.size()))
        return;
    }
    ::shutdown(fd, SHUT_WR);
  });
  const auto ring_before = loop.counters().ring_receives;
  std::vector<ByteBuffer> held;
  bool eof = false;
  std::function<void()> next = [&] {
    loop.receive(b.get(), 4096, [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
      ASSERT_FALSE(ec) << ec.message();
      if (n == 0) {
        eof = true;
        return;
      }
      held.push_back(std::move(buf));
      next();
    });
  };
  next();
  ASSERT_TRUE(run_until(
      loop, [&] { return eof; }, 30s));
  writer.join();
  std::string got;
  for (ByteBuffer& h : held) got += filled(std::move(h));
  EXPECT_EQ(got.size(), total);
  EXPECT_TRUE(got == ring_pattern(0, total)) << "the stream came back reordered or corrupted";
  const LoopCounters c = loop.counters();
  EXPECT_GE(c.ring_receives - ring_before, 1u);
  EXPECT_LE(c.ring_receives - ring_before, 4u);  // never more than the ring holds
  EXPECT_GE(c.ring_fallbacks, 1u);

  // Released, the buffers serve receives again.
  held.clear();
  auto [c2, d2] = test::loop_socket_pair();
  const auto ring_mid = loop.counters().ring_receives;
  std::string second;
  ASSERT_EQ(::write(c2.get(), "again", 5), 5);
  loop.receive(d2.get(), 64, [&](std::error_code, std::size_t, ByteBuffer buf) {
    second = filled(std::move(buf));
  });
  ASSERT_TRUE(run_until(loop, [&] { return !second.empty(); }));
  EXPECT_EQ(second, "again");
  EXPECT_EQ(loop.counters().ring_receives, ring_mid + 1);
}

// More sockets wait than the ring has buffers, and all their bytes arrive at once: those the
// kernel finds no buffer for (ENOBUFS) read again into pooled buffers; none loses its bytes.
TEST_F(BufferRingTest, MoreArrivalsThanRingBuffersAllGetTheirOwnBytes) {
  EventLoop loop(ring_of(2));
  if (!has_ring(loop)) GTEST_SKIP() << "this kernel has no io_uring buffer rings";
  constexpr int sockets = 6;
  std::vector<std::pair<FileDescriptor, FileDescriptor>> pairs;
  for (int i = 0; i < sockets; ++i) pairs.push_back(test::loop_socket_pair());
  std::vector<std::string> got(sockets);
  std::vector<ByteBuffer> held;  // nobody returns a buffer until the end
  for (int i = 0; i < sockets; ++i) {
    loop.receive(pairs[i].second.get(), 64,
                 [&, i](std::error_code ec, std::size_t, ByteBuffer buf) {
                   EXPECT_FALSE(ec) << ec.message();
                   ByteBuffer copy = buf.duplicate();
                   got[i] = filled(std::move(copy));
                   held.push_back(std::move(buf));
                 });
  }
  for (int k = 0; k < 3; ++k) loop.run_once(0ms);  // every recv waits in the kernel
  for (int i = 0; i < sockets; ++i) {
    std::string m = "message-" + std::to_string(i);
    ASSERT_EQ(::write(pairs[i].first.get(), m.data(), m.size()), static_cast<ssize_t>(m.size()));
  }
  ASSERT_TRUE(run_until(loop, [&] { return held.size() == sockets; }));
  for (int i = 0; i < sockets; ++i) EXPECT_EQ(got[i], "message-" + std::to_string(i));
  EXPECT_GE(loop.counters().ring_fallbacks, 1u);
}

// A ring buffer dropped on another thread goes back to the ring: far more ring receives than
// the ring has buffers, and none had to fall back.
TEST_F(BufferRingTest, BuffersReleasedOnAnotherThreadGoBackToTheRing) {
  EventLoop loop(ring_of(4));
  if (!has_ring(loop)) GTEST_SKIP() << "this kernel has no io_uring buffer rings";
  auto [a, b] = test::loop_socket_pair();
  const LoopCounters before = loop.counters();
  int received = 0;
  std::function<void()> next = [&] {
    ASSERT_EQ(::write(a.get(), "x", 1), 1);
    loop.receive(b.get(), 64, [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
      EXPECT_FALSE(ec);
      EXPECT_EQ(n, 1u);
      std::thread([buf = std::move(buf)]() mutable { buf = ByteBuffer(); }).join();
      if (++received < 64) next();
    });
  };
  next();
  ASSERT_TRUE(run_until(loop, [&] { return received == 64; }));
  const LoopCounters after = loop.counters();
  EXPECT_EQ(after.ring_receives - before.ring_receives, 64u);
  EXPECT_EQ(after.ring_fallbacks - before.ring_fallbacks, 0u);
}

// A ring buffer kept past its loop still holds its bytes (ASan: its memory is not freed), and
// dropping it then is harmless.
TEST_F(BufferRingTest, ARingBufferOutlivesItsLoop) {
  ByteBuffer kept;
  {
    EventLoop loop(ring_of(4));
    if (!has_ring(loop)) GTEST_SKIP() << "this kernel has no io_uring buffer rings";
    auto [a, b] = test::loop_socket_pair();
    ASSERT_EQ(::write(a.get(), "survives", 8), 8);
    bool done = false;
    loop.receive(b.get(), 64, [&](std::error_code, std::size_t, ByteBuffer buf) {
      kept = std::move(buf);
      done = true;
    });
    ASSERT_TRUE(run_until(loop, [&] { return done; }));
    ASSERT_GT(loop.counters().ring_receives, 1u);  // the probe's and this one
  }
  EXPECT_EQ(filled(kept), "survives");
  std::thread([k = std::move(kept)]() mutable { k = ByteBuffer(); }).join();
}

// The ring's memory belongs to the buffers still out once the loop is gone: released on the
// thread that ran the loop, in any order, the last one frees it (the sanitizers see a use after
// free or a leak otherwise).
TEST_F(BufferRingTest, BuffersOutlivingTheirLoopAreReleasedOnItsThreadInAnyOrder) {
  std::vector<ByteBuffer> kept;
  {
    EventLoop loop(ring_of(4));
    if (!has_ring(loop)) GTEST_SKIP() << "this kernel has no io_uring buffer rings";
    auto [a, b] = test::loop_socket_pair();
    for (const char* word : {"one", "two", "three"}) {
      ASSERT_EQ(::write(a.get(), word, std::strlen(word)), static_cast<ssize_t>(std::strlen(word)));
      bool done = false;
      loop.receive(b.get(), 64, [&](std::error_code, std::size_t, ByteBuffer buf) {
        kept.push_back(std::move(buf));
        done = true;
      });
      ASSERT_TRUE(run_until(loop, [&] { return done; }));
    }
  }
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(filled(kept[0]), "one");
  EXPECT_EQ(filled(kept[2]), "three");
  kept[1] = ByteBuffer();
  EXPECT_EQ(filled(kept[0]), "one");
  kept[0] = ByteBuffer();
  EXPECT_EQ(filled(kept[2]), "three");
  kept.clear();
}

}  // namespace
}  // namespace niox
