// receive_multishot: one receive that hands over each arrival until it is stopped. On every
// backend the stream arrives whole and in order and a stop loses nothing; on io_uring with a
// buffer ring, a slow consumer that empties the ring, a multishot the kernel ended and re-armed,
// and the per-connection bound that keeps one greedy connection from taking the whole ring.
#include <niox/buffer/byte_buffer.hpp>
#include <niox/loop/event_loop.hpp>
#include <niox/loop/loop_counters.hpp>

#include "support/backends.hpp"
#include "support/loop_sockets.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace niox {
namespace {

using test::run_until;
using namespace std::chrono_literals;

// FNV-1a over a stream, fed piece by piece.
struct StreamHash {
  std::uint64_t h = 1469598103934665603ull;
  std::size_t size = 0;
  void add(const char* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
      h = (h ^ static_cast<unsigned char>(p[i])) * 1099511628211ull;
    size += n;
  }
  void add(const ByteBuffer& filled) {  // [0, position)
    ByteBuffer b = filled.duplicate();
    b.flip();
    auto s = b.bytes();
    add(reinterpret_cast<const char*>(s.data()), s.size());
  }
  friend bool operator==(const StreamHash&, const StreamHash&) = default;
};

std::string stream_pattern(std::size_t from, std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (from + i) * 7 % 251);
  return s;
}

// A blocking writer of `total` pattern bytes in `chunk`-byte sends, then FIN; its hash.
class Writer {
 public:
  Writer(int fd, std::size_t total, std::size_t chunk, std::chrono::microseconds pause = {})
      : thread_([this, fd, total, chunk, pause] {
          for (std::size_t off = 0; off < total; off += chunk) {
            std::string c = stream_pattern(off, std::min(chunk, total - off));
            if (::send(fd, c.data(), c.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(c.size()))
              return;
            sent.add(c.data(), c.size());
            if (pause.count() > 0) std::this_thread::sleep_for(pause);
          }
          ::shutdown(fd, SHUT_WR);
        }) {}
  ~Writer() { join(); }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  StreamHash sent;

 private:
  std::thread thread_;
};

class ReceiveMultishotTest : public test::BackendTest {};

// Every arrival in its own call, in order, then exactly one call with the end of the stream.
TEST_P(ReceiveMultishotTest, EveryArrivalInOrderThenTheEndOfTheStream) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  ASSERT_EQ(::fcntl(a.get(), F_SETFL, 0), 0);
  constexpr std::size_t total = 4 << 20;
  Writer writer(a.get(), total, 3000);
  StreamHash got;
  int ends = 0, calls_after_end = 0;
  std::error_code end_ec;
  loop.receive_multishot(b.get(), 8192, [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
    if (ends > 0) ++calls_after_end;
    if (ec || n == 0) {
      ++ends;
      end_ec = ec;
      EXPECT_EQ(buf.capacity(), 0u);
      return;
    }
    EXPECT_EQ(buf.position(), n);
    got.add(buf);
  });
  ASSERT_TRUE(run_until(
      loop, [&] { return ends > 0; }, 60s));
  writer.join();
  for (int i = 0; i < 5; ++i) loop.run_once(1ms);
  EXPECT_FALSE(end_ec) << end_ec.message();
  EXPECT_EQ(ends, 1);
  EXPECT_EQ(calls_after_end, 0);
  EXPECT_EQ(got.size, total);
  EXPECT_TRUE(got == writer.sent) << "the stream came back reordered or corrupted";
  EXPECT_EQ(loop.pending(), 0u);
}

// A handler that asks for no more still gets every byte the receive had taken, then
// operation_aborted; the bytes it never took are still in the socket, so nothing is lost.
TEST_P(ReceiveMultishotTest, StoppingLosesNoByte) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  const std::string first = stream_pattern(0, 5000);
  ASSERT_EQ(::write(a.get(), first.data(), first.size()), static_cast<ssize_t>(first.size()));
  std::string got;
  std::error_code end_ec;
  bool ended = false;
  int calls = 0;
  loop.receive_multishot(b.get(), 1024, [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
    ++calls;
    if (ec || n == 0) {
      ended = true;
      end_ec = ec;
      return false;
    }
    buf.flip();
    got.append(reinterpret_cast<const char*>(buf.bytes().data()), buf.remaining());
    return false;  // the first arrival is enough
  });
  ASSERT_TRUE(run_until(loop, [&] { return ended; }));
  EXPECT_EQ(end_ec, operation_aborted());
  EXPECT_GE(calls, 2);
  // What the receive did not take is still the socket's, right behind what it did.
  char rest[8192];
  ssize_t k = ::recv(b.get(), rest, sizeof rest, MSG_DONTWAIT);
  if (k > 0) got.append(rest, static_cast<std::size_t>(k));
  EXPECT_EQ(got, first);
}

// cancel() from outside the handler: the same, and a new receive_multishot goes on where the
// stopped one left off.
TEST_P(ReceiveMultishotTest, CancelThenReceiveAgainContinuesTheStream) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  ASSERT_EQ(::fcntl(a.get(), F_SETFL, 0), 0);
  constexpr std::size_t total = 1 << 20;
  Writer writer(a.get(), total, 1000);
  StreamHash got;
  bool ended = false, eof = false;
  OperationHandle h;
  auto handler = [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
    if (ec) {
      EXPECT_EQ(ec, operation_aborted());
      ended = true;
      return;
    }
    if (n == 0) {
      eof = true;
      return;
    }
    got.add(buf);
  };
  h = loop.receive_multishot(b.get(), 4096, handler);
  ASSERT_TRUE(run_until(
      loop, [&] { return got.size >= total / 4; }, 30s));
  EXPECT_TRUE(loop.cancel(h));
  ASSERT_TRUE(run_until(loop, [&] { return ended; }));
  loop.receive_multishot(b.get(), 4096, handler);
  ASSERT_TRUE(run_until(
      loop, [&] { return eof; }, 60s));
  writer.join();
  EXPECT_EQ(got.size, total);
  EXPECT_TRUE(got == writer.sent);
}

// A bulk stream (bursts larger than a ring buffer, max_bytes larger still): once the loop has
// seen one, a burst comes in one arrival, not a ring buffer at a time (a completion and a pass
// of the handler each). Then small arrivals go back to the ring.
TEST_P(ReceiveMultishotTest, ABulkStreamsBurstComesInOneArrival) {
  constexpr std::size_t max_bytes = 64 * 1024, burst = 48 * 1024;
  std::string got, sent;
  std::vector<std::size_t> arrivals;
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  loop.receive_multishot(b.get(), max_bytes,
                         [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
                           if (ec || n == 0) return;
                           arrivals.push_back(n);
                           buf.flip();
                           auto bytes = buf.bytes();
                           got.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
                         });
  auto send_and_receive = [&](std::size_t n) {
    const std::string part = stream_pattern(sent.size(), n);
    sent += part;
    arrivals.clear();
    ASSERT_EQ(::write(a.get(), part.data(), part.size()), static_cast<ssize_t>(part.size()));
    ASSERT_TRUE(run_until(loop, [&] { return got.size() == sent.size(); }));
  };
  for (int i = 0; i < 3; ++i) send_and_receive(burst);
  EXPECT_EQ(arrivals, std::vector<std::size_t>{burst}) << "the third burst came in pieces";
  const std::uint64_t rings_before = loop.counters().ring_receives;
  for (int i = 0; i < 3; ++i) send_and_receive(100);
  EXPECT_EQ(got, sent);
  if (loop.has_multishot_receive()) {
    EXPECT_GE(loop.counters().bulk_receives, 1u) << fmt::format("{}", loop.counters());
    EXPECT_GT(loop.counters().ring_receives, rings_before)
        << "small arrivals after the bulk stream did not go back to the ring";
  }
}

NIOX_INSTANTIATE_BACKENDS(ReceiveMultishotTest);

// ---- io_uring with a buffer ring ---------------------------------------------------------

class ReceiveMultishotRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = test::backend_skip_reason(BackendKind::io_uring)) GTEST_SKIP() << *why;
  }
  static EventLoop::Options ring_of(unsigned entries, unsigned per_connection) {
    EventLoop::Options o;
    o.backend = BackendKind::io_uring;
    o.receive_ring_entries = entries;
    o.receive_ring_per_connection = per_connection;
    o.multishot_receive = true;
    return o;
  }
};

#define NIOX_REQUIRE_MULTISHOT(loop)   \
  if (!(loop).has_multishot_receive()) \
  GTEST_SKIP()                         \
      << "no multishot receive in this loop (Options::multishot_receive off, or no buffer rings)"

// A ring of four buffers, 16 MiB sent, a consumer that keeps the last 64 buffers it was given
// (so ring buffers come back long after they were filled): the ring runs dry again and again,
// the multishot is re-armed each time it can be, and the stream is whole and in order.
TEST_F(ReceiveMultishotRingTest, ASlowConsumerExhaustsTheRingAndEveryByteArrivesInOrder) {
  EventLoop loop(ring_of(4, 4));  // per connection = the ring: only the ring itself bounds it
  NIOX_REQUIRE_MULTISHOT(loop);
  auto [a, b] = test::loop_socket_pair();
  ASSERT_EQ(::fcntl(a.get(), F_SETFL, 0), 0);
  constexpr std::size_t total = 16 << 20;
  Writer writer(a.get(), total, 64 * 1024);
  StreamHash got;
  std::deque<ByteBuffer> kept;
  bool eof = false;
  loop.receive_multishot(b.get(), 16384, [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
    ASSERT_FALSE(ec) << ec.message();
    if (n == 0) {
      eof = true;
      return;
    }
    got.add(buf);
    kept.push_back(std::move(buf));
    if (kept.size() > 64) kept.pop_front();
  });
  ASSERT_TRUE(run_until(
      loop, [&] { return eof; }, 120s));
  writer.join();
  EXPECT_EQ(got.size, total);
  EXPECT_TRUE(got == writer.sent) << "the stream came back reordered or corrupted";
  const LoopCounters c = loop.counters();
  EXPECT_GE(c.ring_exhausted, 1u) << fmt::format("{}", c);
  EXPECT_GE(c.multishot_arms, 2u) << fmt::format("{}", c);
  EXPECT_GE(c.ring_fallbacks, 1u) << fmt::format("{}", c);
}

// The ring runs out under a multishot (its handler keeps every buffer): the kernel ends it, the
// bytes after that come through pooled buffers; once the buffers are released the receive is
// back on the ring as a multishot again, and the stream goes on in order.
TEST_F(ReceiveMultishotRingTest, AMultishotEndedByTheKernelIsRearmedAndBytesContinueInOrder) {
  EventLoop loop(ring_of(4, 4));
  NIOX_REQUIRE_MULTISHOT(loop);
  auto [a, b] = test::loop_socket_pair();
  std::vector<ByteBuffer> kept;
  StreamHash got, sent;
  std::size_t ring_buffers_seen = 0;
  loop.receive_multishot(b.get(), 1000, [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
    if (ec == operation_aborted()) return;  // the loop closing at the end of the test
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_GT(n, 0u);
    got.add(buf);
    if (buf.capacity() == 16 * 1024) ++ring_buffers_seen;
    kept.push_back(std::move(buf));
  });
  for (int k = 0; k < 3; ++k) loop.run_once(0ms);  // armed, waiting in the kernel
  auto send_some = [&](std::size_t from, std::size_t n) {
    std::size_t off = 0;
    while (off < n) {
      std::string c = stream_pattern(from + off, std::min<std::size_t>(8192, n - off));
      ssize_t w = ::send(a.get(), c.data(), c.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w > 0) {
        sent.add(c.data(), static_cast<std::size_t>(w));
        off += static_cast<std::size_t>(w);
      } else {
        loop.run_once(1ms);  // the socket is full: let the loop read
      }
    }
  };
  // Phase 1: more than the four ring buffers hold, sent while the handler keeps everything.
  send_some(0, 256 * 1024);
  ASSERT_TRUE(run_until(
      loop, [&] { return got.size == sent.size; }, 30s));
  const LoopCounters mid = loop.counters();
  EXPECT_GE(mid.ring_exhausted, 1u) << fmt::format("{}", mid);
  EXPECT_LE(ring_buffers_seen, 4u);
  // Phase 2: the ring buffers come back; the next arrivals re-arm the multishot on the ring.
  kept.clear();
  const std::size_t seen_before = ring_buffers_seen;
  send_some(256 * 1024, 256 * 1024);
  ASSERT_TRUE(run_until(
      loop, [&] { return got.size == sent.size; }, 30s));
  EXPECT_TRUE(got == sent) << "the stream came back reordered or corrupted";
  const LoopCounters end = loop.counters();
  EXPECT_GT(end.multishot_arms, mid.multishot_arms) << fmt::format("{}", end);
  EXPECT_GT(ring_buffers_seen, seen_before);
}

// Two connections on one loop, a ring of 16 and a bound of 2 per connection: the first one's
// handler keeps every buffer and its peer keeps sending. Its multishot is stopped at the bound
// and its reads go on with pooled buffers, so the ring still serves the second connection.
// (Without the bound the first one takes the whole ring, and the second reads into a pooled
// buffer.)
TEST_F(ReceiveMultishotRingTest, OneGreedyConnectionDoesNotStarveAnother) {
  EventLoop loop(ring_of(16, 2));
  NIOX_REQUIRE_MULTISHOT(loop);
  auto [a1, b1] = test::loop_socket_pair();
  auto [a2, b2] = test::loop_socket_pair();
  ASSERT_EQ(::fcntl(a1.get(), F_SETFL, 0), 0);
  constexpr std::size_t total = 2 << 20;
  std::vector<ByteBuffer> greedy;
  StreamHash greedy_got;
  bool greedy_eof = false;
  loop.receive_multishot(b1.get(), 1000, [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
    ASSERT_FALSE(ec) << ec.message();
    if (n == 0) {
      greedy_eof = true;
      return;
    }
    greedy_got.add(buf);
    greedy.push_back(std::move(buf));
  });
  std::size_t other_capacity = 0;
  std::string other;
  loop.receive_multishot(b2.get(), 1000, [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
    if (ec || n == 0) return;
    other_capacity = buf.capacity();
    buf.flip();
    other.append(reinterpret_cast<const char*>(buf.bytes().data()), buf.remaining());
  });
  for (int k = 0; k < 3; ++k) loop.run_once(0ms);
  // Paced, as a peer on a network sends: each burst the kernel sees is a buffer or two.
  Writer writer(a1.get(), total, 16 * 1024, 200us);
  ASSERT_TRUE(run_until(
      loop, [&] { return greedy_got.size >= total / 2; }, 60s));
  ASSERT_EQ(::write(a2.get(), "hello", 5), 5);
  ASSERT_TRUE(run_until(loop, [&] { return other == "hello"; }));
  EXPECT_EQ(other_capacity, 16u * 1024) << "the second connection found the ring empty";
  ASSERT_TRUE(run_until(
      loop, [&] { return greedy_eof; }, 60s));
  writer.join();
  EXPECT_TRUE(greedy_got == writer.sent);
  const LoopCounters c = loop.counters();
  EXPECT_GE(c.receive_bound_stops, 1u) << fmt::format("{}", c);
}

// A connection over its share of the ring reads on into pooled buffers. Its arrivals are small,
// so those take a ring buffer's size, not the 64 KiB the receive allows (the transport asks for
// its largest guess): a kept 100-byte message does not pin 64 KiB.
TEST_F(ReceiveMultishotRingTest, SmallArrivalsOffTheRingTakeNoMoreThanARingBuffer) {
  EventLoop loop(ring_of(16, 2));
  NIOX_REQUIRE_MULTISHOT(loop);
  auto [a, b] = test::loop_socket_pair();
  std::vector<ByteBuffer> kept;
  std::string got, sent;
  loop.receive_multishot(
      b.get(), 64 * 1024, [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
        if (ec || n == 0) return;
        ByteBuffer view = buf.duplicate();
        view.flip();
        got.append(reinterpret_cast<const char*>(view.bytes().data()), view.remaining());
        kept.push_back(std::move(buf));  // the ring's share runs out
      });
  for (int i = 0; i < 8; ++i) {
    const std::string part = stream_pattern(sent.size(), 100);
    sent += part;
    ASSERT_EQ(::write(a.get(), part.data(), part.size()), 100);
    ASSERT_TRUE(run_until(loop, [&] { return got.size() == sent.size(); }));
  }
  EXPECT_EQ(got, sent);
  const LoopCounters c = loop.counters();
  EXPECT_GE(c.receive_bound_stops, 1u) << fmt::format("{}", c);
  for (const ByteBuffer& k : kept)
    EXPECT_LE(k.capacity(), 16u * 1024) << "a 100-byte arrival in a buffer of " << k.capacity();
  EXPECT_GE(kept.size(), 8u);
}

}  // namespace
}  // namespace niox
