// Gathering writes through a socket with a tiny send buffer and a slow reader: the stream must
// be the exact concatenation of the buffers, and every buffer advanced by exactly what was sent.
#include <niox/buffer/gather.hpp>
#include <niox/channels/file_channel.hpp>
#include <niox/channels/pipe.hpp>
#include <niox/channels/selector.hpp>
#include <niox/channels/socket_channel.hpp>

#include "support/channels_support.hpp"

#include <atomic>
#include <csignal>
#include <thread>

#include <pthread.h>

#include <sys/mman.h>

namespace niox {
namespace {

struct Batch {
  std::vector<std::vector<std::byte>> storage;
  std::vector<ByteBuffer> buffers;
  std::vector<std::byte> expected;
};

// `count` buffers of random sizes in [0, max_size], about one in six empty, each with a random
// position offset inside its array (so [position, limit) is what counts, not [0, capacity)).
Batch make_batch(std::size_t count, std::size_t max_size, std::uint64_t seed) {
  test::Xorshift rng(seed);
  Batch b;
  b.storage.resize(count);
  for (auto& s : b.storage) {
    std::size_t size = rng.below(6) == 0 ? 0 : rng.below(max_size + 1);
    std::size_t lead = rng.below(4);
    s.resize(lead + size + rng.below(4));
    rng.fill(s);
    auto buf = ByteBuffer::wrap(std::span<std::byte>(s), lead, size);
    b.buffers.push_back(buf);
    b.expected.insert(b.expected.end(), s.begin() + static_cast<std::ptrdiff_t>(lead),
                      s.begin() + static_cast<std::ptrdiff_t>(lead + size));
  }
  return b;
}

// Reads everything until end of stream in small pieces, yielding between reads.
std::vector<std::byte> slow_drain(SocketChannel& ch) {
  std::vector<std::byte> got;
  auto buf = ByteBuffer::allocate(777);
  for (;;) {
    buf.clear();
    auto n = ch.read(buf);
    if (n < 0) break;
    got.insert(got.end(), buf.array_view().begin(), buf.array_view().begin() + n);
    std::this_thread::yield();
  }
  return got;
}

// Every buffer i < first is fully consumed, buffer `first` by `partial`, later ones untouched.
void expect_prefix_consumed(const Batch& b, const std::vector<std::size_t>& start_pos,
                            std::size_t total) {
  std::size_t left = total;
  for (std::size_t i = 0; i < b.buffers.size(); ++i) {
    std::size_t len = b.buffers[i].limit() - start_pos[i];
    std::size_t used = std::min(left, len);
    ASSERT_EQ(b.buffers[i].position(), start_pos[i] + used) << "buffer " << i;
    left -= used;
  }
  ASSERT_EQ(left, 0u);
}

class GatherWriteTest : public test::FdLeakCheck,
                        public ::testing::WithParamInterface<std::size_t> {};

// One blocking gathering write of the whole batch through a small send buffer to a slow reader:
// it returns the total, consumes every buffer, and the stream is their exact concatenation.
void expect_blocking_write_exact(Batch& b, int sndbuf) {
  auto pair = test::tcp_pair();
  pair.client.set_option(StandardSocketOptions::so_sndbuf, sndbuf);
  pair.client.set_option(StandardSocketOptions::tcp_nodelay, true);
  std::vector<std::byte> got;
  std::thread reader([&] { got = slow_drain(pair.server); });
  auto n = pair.client.write(std::span<ByteBuffer>(b.buffers));
  pair.client.shutdown_output();
  reader.join();
  EXPECT_EQ(n, static_cast<std::int64_t>(b.expected.size()));
  for (std::size_t i = 0; i < b.buffers.size(); ++i) {
    ASSERT_FALSE(b.buffers[i].has_remaining()) << "buffer " << i;
  }
  ASSERT_EQ(got.size(), b.expected.size());
  EXPECT_TRUE(got == b.expected);
}

TEST_P(GatherWriteTest, BlockingWritesEverything) {
  const std::size_t count = GetParam();
  Batch b = make_batch(count, 700, count * 31 + 1);
  expect_blocking_write_exact(b, 4096);
}

// Non-blocking gathering writes of the batch until all is sent: each call returns what the
// kernel took, and after each every buffer's position says exactly that many bytes of the
// concatenation are gone, wherever the cut fell. Returns how many calls went short.
int expect_nonblocking_writes_exact(Batch& b, int sndbuf) {
  auto pair = test::tcp_pair();
  pair.client.set_option(StandardSocketOptions::so_sndbuf, sndbuf);
  pair.client.set_option(StandardSocketOptions::tcp_nodelay, true);
  pair.client.configure_blocking(false);
  std::vector<std::size_t> start_pos;
  for (auto& buf : b.buffers) start_pos.push_back(buf.position());
  std::vector<std::byte> got;
  std::thread reader;  // started only once the kernel has refused bytes, so writes do go short
  auto selector = Selector::open();
  auto& key = pair.client.register_with(selector, SelectionKey::OP_WRITE);
  std::size_t total = 0;
  int short_writes = 0;
  while (total < b.expected.size()) {
    auto n = pair.client.write(std::span<ByteBuffer>(b.buffers));
    EXPECT_GE(n, 0);
    if (n < 0) break;
    total += static_cast<std::size_t>(n);
    expect_prefix_consumed(b, start_pos, total);
    if (::testing::Test::HasFatalFailure()) break;
    if (total < b.expected.size()) {
      ++short_writes;
      if (!reader.joinable()) {
        reader = std::thread([&] { got = slow_drain(pair.server); });
      }
      selector.select(std::chrono::milliseconds(2000));
      selector.selected_keys().clear();
    }
  }
  key.cancel();
  pair.client.shutdown_output();
  if (!reader.joinable()) {
    reader = std::thread([&] { got = slow_drain(pair.server); });
  }
  reader.join();
  EXPECT_EQ(got.size(), b.expected.size());
  EXPECT_TRUE(got == b.expected);
  return short_writes;
}

TEST_P(GatherWriteTest, NonBlockingWritesWhatTheKernelTakes) {
  const std::size_t count = GetParam();
  Batch b = make_batch(count, 700, count * 17 + 5);
  int short_writes = expect_nonblocking_writes_exact(b, 4096);
  if (b.expected.size() > (1u << 20)) {
    EXPECT_GT(short_writes, 0);  // more than socket buffers hold: the kernel must have refused some
  }
}

INSTANTIATE_TEST_SUITE_P(Counts, GatherWriteTest,
                         ::testing::Values(1, 2, 3, 17, 1023, 1024, 1025, 2500, 4096));

// Segments mostly far below the coalescing threshold (many of 0..16 bytes) mixed with ones
// around and above it and a few of 16-32 KiB, so that runs are copied and split by segments
// that go out in place, in writes above and below the whole-write copy limit.
Batch make_mixed_batch(std::size_t count, std::uint64_t seed) {
  test::Xorshift rng(seed);
  Batch b;
  b.storage.resize(count);
  for (auto& s : b.storage) {
    std::size_t kind = rng.below(20);
    std::size_t size = kind < 12   ? rng.below(17)
                       : kind < 16 ? rng.below(2049)
                       : kind < 19 ? 2048 + rng.below(6145)
                                   : 16384 + rng.below(16385);
    std::size_t lead = rng.below(3);
    s.resize(lead + size + rng.below(3));
    rng.fill(s);
    b.buffers.push_back(ByteBuffer::wrap(std::span<std::byte>(s), lead, size));
    b.expected.insert(b.expected.end(), s.begin() + static_cast<std::ptrdiff_t>(lead),
                      s.begin() + static_cast<std::ptrdiff_t>(lead + size));
  }
  return b;
}

class GatherEdgeTest : public test::FdLeakCheck {};

class CoalescedGatherTest : public test::FdLeakCheck,
                            public ::testing::WithParamInterface<std::size_t> {};

// Tiny send buffer, slow reader: nearly every sendmsg is short and many end inside a coalesced
// run. The stream must be exact and every buffer fully consumed.
TEST_P(CoalescedGatherTest, BlockingShortWritesInsideRuns) {
  const std::size_t count = GetParam();
  Batch b = make_mixed_batch(count, count * 7 + 3);
  expect_blocking_write_exact(b, 2048);
}

TEST_P(CoalescedGatherTest, NonBlockingPartialWritesAdvanceExactly) {
  const std::size_t count = GetParam();
  Batch b = make_mixed_batch(count, count * 13 + 1);
  int short_writes = expect_nonblocking_writes_exact(b, 2048);
  if (b.expected.size() > (1u << 20)) {
    EXPECT_GT(short_writes, 0);
  }
}

// The same through a pipe (write/writev with SIGPIPE blocked), non-blocking, with a reader that
// takes odd-sized bites.
TEST_P(CoalescedGatherTest, PipeNonBlockingPartialWrites) {
  const std::size_t count = GetParam();
  auto pipe = Pipe::open();
  pipe.sink().configure_blocking(false);
  Batch b = make_mixed_batch(count, count * 5 + 11);
  std::vector<std::size_t> start_pos;
  for (auto& buf : b.buffers) start_pos.push_back(buf.position());
  std::vector<std::byte> got;
  std::thread reader([&] {
    auto buf = ByteBuffer::allocate(1000);
    for (;;) {
      buf.clear();
      auto n = pipe.source().read(buf);
      if (n < 0) break;
      got.insert(got.end(), buf.array_view().begin(), buf.array_view().begin() + n);
      std::this_thread::yield();
    }
  });
  std::size_t total = 0;
  while (total < b.expected.size()) {
    auto n = pipe.sink().write(std::span<ByteBuffer>(b.buffers));
    ASSERT_GE(n, 0);
    total += static_cast<std::size_t>(n);
    expect_prefix_consumed(b, start_pos, total);
    if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  pipe.sink().close();
  reader.join();
  ASSERT_EQ(got.size(), b.expected.size());
  EXPECT_TRUE(got == b.expected);
}

INSTANTIATE_TEST_SUITE_P(Counts, CoalescedGatherTest, ::testing::Values(2, 9, 200, 1024, 3000));

// A reader gone: the gathering write of tiny segments reports EPIPE as an error when nothing
// moved, takes nothing from the buffers, and raises no SIGPIPE.
TEST_F(GatherEdgeTest, CoalescedWriteToClosedPipeIsEpipeAndLosesNothing) {
  auto pipe = Pipe::open();
  pipe.source().close();
  Batch b = make_batch(50, 12, 77);
  std::vector<std::size_t> start_pos;
  for (auto& buf : b.buffers) start_pos.push_back(buf.position());
  std::error_code ec;
  EXPECT_EQ(pipe.sink().write(std::span<ByteBuffer>(b.buffers), ec), 0);
  EXPECT_EQ(ec, std::errc::broken_pipe);
  expect_prefix_consumed(b, start_pos, 0);
  EXPECT_THROW(pipe.sink().write(std::span<ByteBuffer>(b.buffers)), std::system_error);
}

// The peer closes while tiny segments are being written: every call's count matches the
// buffers' positions, and the writer ends with a clear error, never a lost or doubled byte.
TEST_F(GatherEdgeTest, CoalescedWriteToClosedSocketEndsWithAnError) {
  auto pair = test::tcp_pair();
  pair.client.set_option(StandardSocketOptions::so_sndbuf, 2048);
  pair.client.configure_blocking(false);
  pair.server.close();
  Batch b = make_mixed_batch(400, 4242);
  std::vector<std::size_t> start_pos;
  for (auto& buf : b.buffers) start_pos.push_back(buf.position());
  std::size_t total = 0;
  std::error_code ec;
  for (int i = 0; i < 2000 && !ec && total < b.expected.size(); ++i) {
    auto n = pair.client.write(std::span<ByteBuffer>(b.buffers), ec);
    ASSERT_GE(n, 0);
    total += static_cast<std::size_t>(n);
    expect_prefix_consumed(b, start_pos, total);
    if (n == 0 && !ec) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(ec) << "wrote " << total << " of " << b.expected.size() << " without an error";
  EXPECT_TRUE(ec == std::errc::broken_pipe || ec == std::errc::connection_reset) << ec.message();
}

TEST_F(GatherEdgeTest, AllEmptyAndOffsetLength) {
  auto pair = test::tcp_pair();
  std::vector<ByteBuffer> empties(10, ByteBuffer::allocate(0));
  EXPECT_EQ(pair.client.write(std::span<ByteBuffer>(empties)), 0);
  std::vector<ByteBuffer> bufs{ByteBuffer::wrap(std::string_view("aa")),
                               ByteBuffer::wrap(std::string_view("bbb")),
                               ByteBuffer::wrap(std::string_view("c"))};
  // Java's write(srcs, offset, length): only srcs[1..2].
  EXPECT_EQ(pair.client.write(std::span<ByteBuffer>(bufs), 1, 2), 4);
  EXPECT_EQ(bufs[0].remaining(), 2u);
  EXPECT_THROW(pair.client.write(std::span<ByteBuffer>(bufs), 2, 2), IndexOutOfBoundsException);
  auto in = ByteBuffer::allocate(4);
  while (in.has_remaining()) pair.server.read(in);
  EXPECT_EQ(in.flip().string_view(), "bbbc");
  // Reading into a read-only buffer is a contract violation, not an I/O error.
  std::vector<ByteBuffer> ro{ByteBuffer::allocate(4).as_read_only_buffer()};
  EXPECT_THROW(pair.server.read(std::span<ByteBuffer>(ro)), ReadOnlyBufferException);
}

// More than the kernel moves in one call (2 GiB - 4 KiB) in a single gather: split into several
// calls, never EINVAL, every buffer fully advanced. /dev/null takes each call whole without
// touching the (untouched, never faulted-in) memory.
TEST_F(GatherEdgeTest, GatherBeyondPerCallByteCap) {
  constexpr std::size_t size = std::size_t{3} << 30;
  void* mem = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) {
    GTEST_SKIP() << "cannot reserve 3 GiB of address space";
  }
  {
    auto* base = static_cast<std::byte*>(mem);
    std::vector<ByteBuffer> bufs{ByteBuffer::wrap(std::span<const std::byte>(base, size / 3 * 2)),
                                 ByteBuffer::wrap(std::span<const std::byte>(base, 0)),
                                 ByteBuffer::wrap(std::span<const std::byte>(base, size / 3))};
    auto null = FileChannel::open("/dev/null", OpenOption::write);
    EXPECT_EQ(null.write(std::span<ByteBuffer>(bufs)), static_cast<std::int64_t>(size));
    for (auto& b : bufs) EXPECT_FALSE(b.has_remaining());
  }
  ::munmap(mem, size);
}

// Blocking gathers and scatters interrupted by a storm of signals whose handler is installed
// without SA_RESTART: every EINTR is retried, nothing is lost or duplicated.
TEST_F(GatherEdgeTest, SignalStormWithoutSaRestart) {
  struct sigaction sa {};
  struct sigaction old {};
  sa.sa_handler = [](int) {};
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: blocking calls fail with EINTR
  ASSERT_EQ(::sigaction(SIGUSR1, &sa, &old), 0);
  auto pair = test::tcp_pair();
  pair.client.set_option(StandardSocketOptions::so_sndbuf, 4096);
  Batch b = make_batch(4096, 700, 1234);
  std::vector<std::byte> got;
  std::atomic<bool> done{false};
  std::atomic<bool> reader_ready{false};
  pthread_t reader_thread{};
  std::thread reader([&] {
    reader_thread = pthread_self();
    reader_ready = true;
    got = slow_drain(pair.server);
  });
  while (!reader_ready) std::this_thread::yield();
  const pthread_t writer_thread = pthread_self();
  std::thread storm([&] {
    while (!done) {
      pthread_kill(writer_thread, SIGUSR1);
      pthread_kill(reader_thread, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  auto n = pair.client.write(std::span<ByteBuffer>(b.buffers));
  pair.client.shutdown_output();
  reader.join();
  done = true;
  storm.join();
  ::sigaction(SIGUSR1, &old, nullptr);
  EXPECT_EQ(n, static_cast<std::int64_t>(b.expected.size()));
  ASSERT_EQ(got.size(), b.expected.size());
  EXPECT_TRUE(got == b.expected);
}

TEST_F(GatherEdgeTest, PipeGatherAndScatter) {
  auto pipe = Pipe::open();
  Batch b = make_batch(1500, 50, 99);
  std::vector<std::byte> got;
  std::thread reader([&] {
    std::vector<ByteBuffer> dsts;
    for (int i = 0; i < 2000; ++i) dsts.push_back(ByteBuffer::allocate(13));
    for (;;) {
      for (auto& d : dsts) d.clear();
      auto n = pipe.source().read(std::span<ByteBuffer>(dsts));
      if (n < 0) break;
      for (auto& d : dsts) {
        got.insert(got.end(), d.array_view().begin(), d.array_view().begin() + d.position());
      }
    }
  });
  EXPECT_EQ(pipe.sink().write(std::span<ByteBuffer>(b.buffers)),
            static_cast<std::int64_t>(b.expected.size()));
  pipe.sink().close();
  reader.join();
  EXPECT_TRUE(got == b.expected);
}

}  // namespace
}  // namespace niox
