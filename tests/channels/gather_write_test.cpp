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

TEST_P(GatherWriteTest, BlockingWritesEverything) {
  const std::size_t count = GetParam();
  auto pair = test::tcp_pair();
  pair.client.set_option(StandardSocketOptions::so_sndbuf, 4096);
  pair.client.set_option(StandardSocketOptions::tcp_nodelay, true);
  Batch b = make_batch(count, 700, count * 31 + 1);
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

TEST_P(GatherWriteTest, NonBlockingWritesWhatTheKernelTakes) {
  const std::size_t count = GetParam();
  auto pair = test::tcp_pair();
  pair.client.set_option(StandardSocketOptions::so_sndbuf, 4096);
  pair.client.set_option(StandardSocketOptions::tcp_nodelay, true);
  pair.client.configure_blocking(false);
  Batch b = make_batch(count, 700, count * 17 + 5);
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
    ASSERT_GE(n, 0);
    total += static_cast<std::size_t>(n);
    expect_prefix_consumed(b, start_pos, total);
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
  ASSERT_EQ(got.size(), b.expected.size());
  EXPECT_TRUE(got == b.expected);
  if (b.expected.size() > (1u << 20)) {
    EXPECT_GT(short_writes, 0);  // more than socket buffers hold: the kernel must have refused some
  }
}

INSTANTIATE_TEST_SUITE_P(Counts, GatherWriteTest,
                         ::testing::Values(1, 2, 3, 17, 1023, 1024, 1025, 2500, 4096));

class GatherEdgeTest : public test::FdLeakCheck {};

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
    std::vector<ByteBuffer> bufs{
        ByteBuffer::wrap(std::span<const std::byte>(base, size / 3 * 2)),
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
