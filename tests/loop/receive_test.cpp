// EventLoop::receive: a read whose buffer the loop takes from its thread's pool when bytes can
// be read. Run on every backend this machine has.
#include <niox/buffer/buffer_pool.hpp>
#include <niox/buffer/byte_buffer.hpp>
#include <niox/base/file_descriptor.hpp>
#include <niox/loop/event_loop.hpp>

#include "support/backends.hpp"
#include "support/loop_sockets.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
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

using test::filled;

class ReceiveTest : public test::BackendTest {
 protected:
  // The readiness paths take the buffer when bytes can be read; io_uring proper has the
  // kernel pick a ring buffer when they arrive, or (no buffer rings) submits its recv with a
  // pooled buffer, which then exists while the socket waits.
  bool buffer_taken_after_readiness() const {
    return GetParam().kind == BackendKind::epoll || GetParam().io_uring_readiness_only;
  }
};

// A receive takes at most max_bytes, whatever the buffer's capacity (a pooled buffer of that
// size, or a ring buffer).
TEST_P(ReceiveTest, HandsOverTheBytesAndTakesAtMostTheSizeAsked) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  ASSERT_EQ(::write(a.get(), "0123456789abcdefghijklmnopqrstuvwxyzABCD", 40), 40);
  std::vector<std::string> got;
  std::function<void()> next = [&] {
    loop.receive(b.get(), 16, [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
      EXPECT_FALSE(ec);
      EXPECT_EQ(buf.position(), n);
      EXPECT_GE(buf.capacity(), 16u);
      got.push_back(filled(std::move(buf)));
      if (got.size() < 3) next();
    });
  };
  next();
  ASSERT_TRUE(run_until(loop, [&] { return got.size() == 3; }));
  EXPECT_EQ(got, (std::vector<std::string>{"0123456789abcdef", "ghijklmnopqrstuv", "wxyzABCD"}));
}

// A receive that waits leaves its block in the thread's cache. The block is large (32 KiB) so
// that the library's small cached objects (control blocks, promise states) moving in and out
// of the same cache cannot be taken for it.
TEST_P(ReceiveTest, NoBufferIsHeldWhileTheSocketWaits) {
  constexpr std::size_t size = 32 * 1024;
  auto cached = [] { return BufferPool::for_this_thread().stats().cached_bytes; };
  (void)BufferPool::for_this_thread().allocate(size);  // one block of that class in the cache
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  std::string got;
  const std::size_t before = cached();
  loop.receive(b.get(), size, [&](std::error_code ec, std::size_t, ByteBuffer buf) {
    EXPECT_FALSE(ec);
    got = filled(std::move(buf));
  });
  for (int i = 0; i < 5; ++i) loop.run_once(0ms);
  EXPECT_TRUE(got.empty());
  const std::size_t now = cached();
  const std::size_t held = before > now ? before - now : 0;
  ASSERT_EQ(::write(a.get(), "late", 4), 4);
  ASSERT_TRUE(run_until(loop, [&] { return !got.empty(); }));
  EXPECT_EQ(got, "late");
  if (buffer_taken_after_readiness() || loop.counters().ring_receives > 0) {
    EXPECT_LT(held, size);
  } else {
    EXPECT_GE(held, size);  // a kernel without buffer rings: the recv in the kernel owns it
  }
}

// A bulk stream: after a receive that filled its buffer (on io_uring a 16 KiB ring buffer), the
// next takes all that waits up to the size asked, not another ring buffer's worth.
TEST_P(ReceiveTest, AfterAFullReadTheNextTakesAllThatWaitsUpToTheSizeAsked) {
  constexpr std::size_t asked = 64 * 1024, total = 80 * 1024;
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  const std::string sent = [] {
    std::string s(total, '\0');
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i * 7 + (i >> 10));
    return s;
  }();
  ASSERT_EQ(::write(a.get(), sent.data(), sent.size()), static_cast<ssize_t>(sent.size()));
  std::string got;
  int receives = 0;
  std::function<void()> next = [&] {
    loop.receive(b.get(), asked, [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
      ASSERT_FALSE(ec) << ec.message();
      EXPECT_LE(n, asked);
      got += filled(std::move(buf));
      if (++receives < 2) next();
    });
  };
  next();
  ASSERT_TRUE(run_until(loop, [&] { return receives == 2; }));
  EXPECT_EQ(got.size(), total);  // two receives took it all
  EXPECT_TRUE(got == sent.substr(0, got.size()));
}

// ... and when nothing waits after all, the receive holds no pooled buffer while the socket
// waits (on io_uring the speculative recv finds EAGAIN and goes back to the ring).
TEST_P(ReceiveTest, AFullReadThenAnEmptySocketHoldsNoBuffer) {
  constexpr std::size_t asked = 64 * 1024, first = 16 * 1024;
  auto cached = [] { return BufferPool::for_this_thread().stats().cached_bytes; };
  (void)BufferPool::for_this_thread().allocate(asked);  // one block of that class in the cache
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  ASSERT_EQ(::write(a.get(), std::string(first, 'x').data(), first), static_cast<ssize_t>(first));
  std::string got;
  int receives = 0;
  std::function<void()> next = [&] {
    loop.receive(b.get(), asked, [&](std::error_code ec, std::size_t, ByteBuffer buf) {
      ASSERT_FALSE(ec) << ec.message();
      got += filled(std::move(buf));
      if (++receives < 2) next();
    });
  };
  next();
  ASSERT_TRUE(run_until(loop, [&] { return got.size() == first; }));
  const std::size_t before = cached();
  for (int i = 0; i < 5; ++i) loop.run_once(0ms);
  EXPECT_EQ(receives, 1);
  const std::size_t now = cached();
  EXPECT_LT(before > now ? before - now : 0, asked);
  ASSERT_EQ(::write(a.get(), "late", 4), 4);
  ASSERT_TRUE(run_until(loop, [&] { return receives == 2; }));
  EXPECT_EQ(got, std::string(first, 'x') + "late");
  const LoopCounters c = loop.counters();
  if (c.speculative_receives > 0) {
    EXPECT_EQ(c.speculative_misses, 1u);
  }
}

// A bulk stream between bursts: a socket whose last read drained it after taking more than a
// ring buffer (16 KiB) holds gets its next burst in one receive, on every backend. (On io_uring
// a ring receive would take 16 KiB of it and leave the rest to another.)
TEST_P(ReceiveTest, ABulkStreamsNextBurstComesInOneReceive) {
  constexpr std::size_t asked = 64 * 1024, burst = 48 * 1024;
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  std::string got;
  std::size_t last = 0;
  int receives = 0;
  auto receive = [&] {
    loop.receive(b.get(), asked, [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
      ASSERT_FALSE(ec) << ec.message();
      last = n;
      got += filled(std::move(buf));
      ++receives;
    });
  };
  std::string sent;
  for (char c : {'a', 'b', 'c'}) {
    const std::string part(burst, c);
    sent += part;
    ASSERT_EQ(::write(a.get(), part.data(), part.size()), static_cast<ssize_t>(part.size()));
    // Read the burst whole, in as many receives as it takes; the last one drains the socket.
    while (got.size() < sent.size()) {
      const int before = receives;
      receive();
      ASSERT_TRUE(run_until(loop, [&] { return receives > before; }));
    }
  }
  EXPECT_EQ(got, sent);
  EXPECT_EQ(last, burst) << "the third burst came in pieces";
  if (GetParam().kind == BackendKind::io_uring && !GetParam().io_uring_readiness_only &&
      loop.counters().ring_receives > 0) {
    EXPECT_GE(loop.counters().bulk_receives, 1u) << fmt::format("{}", loop.counters());
  }
}

// receive_now: one recv now. Bytes advance the buffer's position; an empty socket is 0 without
// an error; end of stream is -1; an error is 0 with the error. The loop keeps what it found for
// the next receive: after a read that drained the socket no receive tries it speculatively.
TEST_P(ReceiveTest, ReceiveNowReadsWhatWaitsAndTellsEmptyEndAndError) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  std::error_code ec;
  ByteBuffer dst = ByteBuffer::allocate(8);
  dst.put(std::as_bytes(std::span("ab", 2)));
  EXPECT_EQ(loop.receive_now(b.get(), dst, ec), 0);
  EXPECT_FALSE(ec) << ec.message();
  ASSERT_EQ(::write(a.get(), "0123456789", 10), 10);
  EXPECT_EQ(loop.receive_now(b.get(), dst, ec), 6);  // the room, no more
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(filled(dst), "ab012345");
  ByteBuffer rest = ByteBuffer::allocate(64);
  EXPECT_EQ(loop.receive_now(b.get(), rest, ec), 4);  // drained: less than the room
  EXPECT_EQ(filled(rest), "6789");
  ByteBuffer full = ByteBuffer::allocate(0);
  EXPECT_EQ(loop.receive_now(b.get(), full, ec), 0);  // no room: no recv
  ASSERT_EQ(::write(a.get(), "late", 4), 4);
  std::string got;
  loop.receive(b.get(), 64 * 1024, [&](std::error_code e, std::size_t, ByteBuffer buf) {
    EXPECT_FALSE(e) << e.message();
    got = filled(std::move(buf));
  });
  ASSERT_TRUE(run_until(loop, [&] { return !got.empty(); }));
  EXPECT_EQ(got, "late");
  EXPECT_EQ(loop.counters().speculative_receives, 0u);
  a.reset();
  ByteBuffer end = ByteBuffer::allocate(8);
  EXPECT_EQ(loop.receive_now(b.get(), end, ec), -1);
  EXPECT_FALSE(ec) << ec.message();
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  FileDescriptor r(pipe_fds[0]), w(pipe_fds[1]);
  ASSERT_EQ(::write(w.get(), "x", 1), 1);
  EXPECT_EQ(loop.receive_now(r.get(), end, ec), 0);  // not a socket
  EXPECT_EQ(ec, std::errc::not_a_socket) << ec.message();
}

TEST_P(ReceiveTest, EndOfStreamIsZeroBytesAndNoBuffer) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  ASSERT_EQ(::shutdown(a.get(), SHUT_WR), 0);
  bool done = false;
  loop.receive(b.get(), 64, [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
    EXPECT_FALSE(ec);
    EXPECT_EQ(n, 0u);
    EXPECT_EQ(buf.capacity(), 0u);
    done = true;
  });
  ASSERT_TRUE(run_until(loop, [&] { return done; }));
}

TEST_P(ReceiveTest, CancelledWhileWaitingIsAbortedAndTheNextReceiveGetsTheBytes) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  int calls = 0;
  auto h = loop.receive(b.get(), 64, [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
    EXPECT_EQ(ec, std::errc::operation_canceled);
    EXPECT_EQ(n, 0u);
    EXPECT_EQ(buf.capacity(), 0u);
    ++calls;
  });
  loop.run_once(0ms);
  EXPECT_TRUE(loop.cancel(h));
  ASSERT_TRUE(run_until(loop, [&] { return calls == 1; }));
  ASSERT_EQ(::write(a.get(), "ok", 2), 2);
  std::string got;
  loop.receive(b.get(), 8,
               [&](std::error_code, std::size_t, ByteBuffer buf) { got = filled(std::move(buf)); });
  ASSERT_TRUE(run_until(loop, [&] { return !got.empty(); }));
  EXPECT_EQ(got, "ok");
  EXPECT_EQ(calls, 1);
}

// A stream larger than any one receive arrives whole and in order, one receive after another.
TEST_P(ReceiveTest, ALongStreamArrivesWholeAndInOrder) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  constexpr std::size_t total = 4 << 20;
  auto byte_at = [](std::size_t i) { return static_cast<char>((i * 131 + (i >> 12)) & 0xff); };
  ASSERT_EQ(::fcntl(a.get(), F_SETFL, 0), 0);  // the writer thread blocks when the socket is full
  std::thread writer([&, fd = a.get()] {
    std::string chunk(65536, '\0');
    for (std::size_t off = 0; off < total;) {
      for (std::size_t i = 0; i < chunk.size(); ++i) chunk[i] = byte_at(off + i);
      std::size_t sent = 0;
      while (sent < chunk.size()) {
        ssize_t k = ::send(fd, chunk.data() + sent, chunk.size() - sent, MSG_NOSIGNAL);
        if (k <= 0) return;
        sent += static_cast<std::size_t>(k);
      }
      off += chunk.size();
    }
    ::shutdown(fd, SHUT_WR);
  });
  std::size_t received = 0, wrong = 0;
  bool eof = false;
  std::function<void()> next = [&] {
    loop.receive(b.get(), 3000, [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
      ASSERT_FALSE(ec) << ec.message() << " after " << received << " bytes";
      if (n == 0) {
        eof = true;
        return;
      }
      EXPECT_LE(n, 3000u);
      buf.flip();
      for (std::size_t i = 0; i < n; ++i)
        if (static_cast<char>(buf.get(i)) != byte_at(received + i)) ++wrong;
      received += n;
      next();
    });
  };
  next();
  EXPECT_TRUE(run_until(
      loop, [&] { return eof; }, 30s));
  writer.join();
  EXPECT_EQ(received, total);
  EXPECT_EQ(wrong, 0u);
}

// A read that drains the socket ends the readiness it came with: the next receive waits for
// the next arrival without a syscall that would only find nothing (epoll; io_uring's
// POLL_FIRST has the same effect inside the kernel). The bytes that come next are handed over.
TEST_P(ReceiveTest, AfterADrainingReadTheNextReceiveWaitsForTheNextArrival) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  auto receive_one = [&] {
    auto got = std::make_shared<std::string>();
    loop.receive(b.get(), 64, [got](std::error_code ec, std::size_t, ByteBuffer buf) {
      EXPECT_FALSE(ec);
      *got = filled(std::move(buf));
    });
    return got;
  };
  auto first = receive_one();
  loop.run_once(0ms);  // waits for readiness now
  ASSERT_EQ(::write(a.get(), "abc", 3), 3);
  ASSERT_TRUE(run_until(loop, [&] { return !first->empty(); }));
  EXPECT_EQ(*first, "abc");

  auto second = receive_one();
  const std::uint64_t before = loop.counters().kernel_entries;
  loop.run_once(0ms);
  if (GetParam().kind == BackendKind::epoll) {
    // The loop's one epoll_wait, and no recv.
    EXPECT_EQ(loop.counters().kernel_entries - before, 1u);
  }
  EXPECT_TRUE(second->empty());
  ASSERT_EQ(::write(a.get(), "defg", 4), 4);
  ASSERT_TRUE(run_until(loop, [&] { return !second->empty(); }));
  EXPECT_EQ(*second, "defg");
}

// Bytes and the peer's end that arrive before the loop reads come as one edge: the read of the
// bytes gets less than it could take, and the end still follows.
TEST_P(ReceiveTest, BytesAndTheEndThatArriveTogetherAreBothHandedOver) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  std::vector<std::string> got;
  bool eof = false;
  std::function<void()> next = [&] {
    loop.receive(b.get(), 64, [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
      EXPECT_FALSE(ec);
      if (n == 0) {
        eof = true;
        return;
      }
      got.push_back(filled(std::move(buf)));
      next();
    });
  };
  next();
  loop.run_once(0ms);  // waits for readiness now
  ASSERT_EQ(::write(a.get(), "last", 4), 4);
  ASSERT_EQ(::shutdown(a.get(), SHUT_WR), 0);
  ASSERT_TRUE(run_until(loop, [&] { return eof; }));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], "last");
}

NIOX_INSTANTIATE_BACKENDS(ReceiveTest);

}  // namespace
}  // namespace niox
