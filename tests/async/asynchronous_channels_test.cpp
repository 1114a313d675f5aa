// AsynchronousSocketChannel, AsynchronousServerSocketChannel and AsynchronousFileChannel on every
// backend: each awaitable, short reads, end of stream, scattering and gathering, error codes,
// cancellation from another thread, timeouts, destroying a suspended task, no allocation per
// operation once warm, and 5,000 connection tasks at once.
#include <niox/async/asynchronous_file_channel.hpp>
#include <niox/async/asynchronous_socket_channel.hpp>
#include <niox/async/spawn.hpp>
#include <niox/async/task.hpp>
#include <niox/async/when_all.hpp>
#include <niox/async/when_any.hpp>
#include <niox/loop/event_loop_group.hpp>

#include "support/backends.hpp"
#include "support/counting_new.hpp"
#include "support/temp_dir.hpp"
#include "support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <stop_token>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

namespace niox {
namespace {

using namespace std::chrono_literals;

std::string text_of(ByteBuffer b) {
  b.flip();
  return std::string(b.string_view());
}

Task<std::int64_t> read_one(AsynchronousSocketChannel& c, ByteBuffer& b) {
  co_return co_await c.read(b);
}

class AsyncSocketTest : public test::BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped()) return;
    EventLoopGroup::Options g;
    g.threads = 1;
    g.loop = options();
    group_.emplace(g);
  }
  EventLoop& loop() { return group_->loop(0); }

  // A connected pair on the loop: {accepted, connected}.
  Task<std::pair<AsynchronousSocketChannel, AsynchronousSocketChannel>> pair(
      const SocketAddress& where, ProtocolFamily family) {
    co_await resume_on(loop());
    auto server = AsynchronousServerSocketChannel::open(loop(), family);
    server.bind(where);
    SocketAddress bound = *server.local_address();
    auto client = AsynchronousSocketChannel::open(loop(), family);
    auto [accepted, connected] = co_await when_all(accept(server), connect(client, bound));
    (void)connected;
    co_return std::pair{std::move(accepted), std::move(client)};
  }
  static Task<AsynchronousSocketChannel> accept(AsynchronousServerSocketChannel& s) {
    co_return co_await s.accept();
  }
  static Task<int> connect(AsynchronousSocketChannel& c, SocketAddress to) {
    co_await c.connect(to);
    co_return 0;
  }

  std::optional<EventLoopGroup> group_;
};

TEST_P(AsyncSocketTest, EchoesOverIpv4Ipv6AndUnixAndReportsEndOfStream) {
  auto unix_path = std::filesystem::temp_directory_path() /
                   ("niox-async-" + std::to_string(::getpid()) + ".sock");
  std::filesystem::remove(unix_path);
  struct Case {
    SocketAddress where;
    ProtocolFamily family;
  };
  std::vector<Case> cases{
      {InetSocketAddress::loopback_v4(0), ProtocolFamily::inet},
      {InetSocketAddress::loopback_v6(0), ProtocolFamily::inet6},
      {UnixDomainSocketAddress(unix_path.string()), ProtocolFamily::unix_domain}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.where.to_string());
    auto body = [&]() -> Task<std::string> {
      auto [a, b] = co_await pair(c.where, c.family);
      EXPECT_TRUE(a.remote_address().has_value() || c.family == ProtocolFamily::unix_domain);
      if (c.family != ProtocolFamily::unix_domain) {
        EXPECT_TRUE(b.local_address().has_value());
      }
      ByteBuffer out = test::text("hello, niox");
      EXPECT_EQ(co_await b.write(out), 11u);
      EXPECT_EQ(out.remaining(), 0u);  // advanced by exactly what was written
      b.shutdown_output();
      ByteBuffer in = ByteBuffer::allocate(64);
      std::string got;
      for (;;) {
        std::int64_t n = co_await a.read(in);
        if (n < 0) break;
        EXPECT_GT(n, 0);
      }
      EXPECT_EQ(co_await a.read(in), -1);  // stays at end of stream
      got = text_of(in);
      co_return got;
    };
    EXPECT_EQ(sync_wait(body()), "hello, niox");
  }
  std::filesystem::remove(unix_path);
}

TEST_P(AsyncSocketTest, ShortReadsReturnWhatArrivedAndScatterGatherAdvanceExactly) {
  auto body = [&]() -> Task<void> {
    auto [a, b] = co_await pair(InetSocketAddress::loopback_v4(0), ProtocolFamily::inet);
    ByteBuffer small = test::text("abc");
    co_await b.write(small);
    ByteBuffer big = ByteBuffer::allocate(1 << 16);
    std::int64_t n = co_await a.read(big);  // only 3 bytes exist: a short read, not a wait
    EXPECT_EQ(n, 3);
    EXPECT_EQ(big.position(), 3u);

    std::array<ByteBuffer, 3> parts{test::text("12"), test::text(""), test::text("3456789")};
    EXPECT_EQ(co_await b.write_all(parts), 9u);
    for (auto& p : parts) EXPECT_EQ(p.remaining(), 0u);

    std::array<ByteBuffer, 2> into{ByteBuffer::allocate(4), ByteBuffer::allocate(10)};
    std::size_t got = 0;
    while (got < 9) got += static_cast<std::size_t>(co_await a.read(into));
    EXPECT_EQ(got, 9u);
    EXPECT_EQ(into[0].position(), 4u);
    EXPECT_EQ(into[1].position(), 5u);
    EXPECT_EQ(text_of(into[0]) + text_of(into[1]), "123456789");

    ByteBuffer full = ByteBuffer::allocate(0);
    EXPECT_EQ(co_await a.read(full), 0);  // no room: 0, not end of stream
  };
  sync_wait(body());
}

TEST_P(AsyncSocketTest, ErrorsThrowOrSetTheErrorCode) {
  auto body = [&]() -> Task<void> {
    co_await resume_on(loop());
    // A port nobody listens on: bind one, close it, connect to it.
    SocketAddress refused = [&] {
      auto s = AsynchronousServerSocketChannel::open(loop());
      s.bind(InetSocketAddress::loopback_v4(0));
      return *s.local_address();
    }();
    auto c1 = AsynchronousSocketChannel::open(loop());
    std::error_code ec;
    co_await c1.connect(refused, ec);
    EXPECT_EQ(ec, std::errc::connection_refused);
    auto c2 = AsynchronousSocketChannel::open(loop());
    bool threw = false;
    try {
      co_await c2.connect(refused);
    } catch (const std::system_error& e) {
      threw = e.code() == std::errc::connection_refused;
    }
    EXPECT_TRUE(threw);
  };
  sync_wait(body());
}

TEST_P(AsyncSocketTest, AStopRequestFromAnotherThreadCancelsAPendingRead) {
  std::stop_source stop;
  std::promise<void> reading;
  auto body = [&]() -> Task<std::string> {
    auto [a, b] = co_await pair(InetSocketAddress::loopback_v4(0), ProtocolFamily::inet);
    ByteBuffer in = ByteBuffer::allocate(1 << 20);  // held by the operation until its CQE
    reading.set_value();
    std::string outcome;
    try {
      co_await a.read(in);  // nothing ever arrives
      outcome = "read returned";
    } catch (const std::system_error& e) {
      outcome = e.code() == operation_aborted() ? "aborted" : e.what();
    }
    EXPECT_TRUE(loop().in_event_loop());
    // The channel still works after a cancelled read (under a token not stopped).
    auto after = [&]() -> Task<std::int64_t> {
      ByteBuffer ping = test::text("x");
      co_await b.write(ping);
      ByteBuffer one = ByteBuffer::allocate(1);
      co_return co_await a.read(one);
    };
    EXPECT_EQ(co_await with_stop_token({}, after()), 1);
    co_return outcome;
  };
  std::thread canceller([&] {
    reading.get_future().wait();
    std::this_thread::sleep_for(5ms);  // not needed for correctness: lets the read reach the kernel
    stop.request_stop();
  });
  std::string outcome;
  try {
    outcome = sync_wait(with_stop_token(stop.get_token(), body()));
  } catch (const std::exception& e) {
    outcome = e.what();
  }
  canceller.join();
  EXPECT_EQ(outcome, "aborted");
}

// A task's one stop callback is lent to each of its operations in turn: a stop from another
// thread lands on whichever read is pending at that moment, after hundreds that completed, and
// the aborted read takes no byte.
TEST_P(AsyncSocketTest, AStopReachesWhicheverOfATasksSuccessiveReadsIsPending) {
  constexpr int total = 400;
  std::stop_source stop;
  std::promise<void> half;
  auto body = [&]() -> Task<int> {
    auto [a, b] = co_await pair(InetSocketAddress::loopback_v4(0), ProtocolFamily::inet);
    // The writer runs beside the reader, in a group the stop does not reach: a byte every 50 µs.
    auto writer = [](AsynchronousSocketChannel& out, EventLoop& loop) -> Task<void> {
      for (int i = 0; i < total; ++i) {
        ByteBuffer one = ByteBuffer::allocate(1);
        one.put(static_cast<std::uint8_t>('a' + i % 26)).flip();
        co_await out.write(one);
        co_await sleep_for(loop, 50us);
      }
    };
    TaskGroup group;
    group.spawn(writer(b, loop()));
    int received = 0;
    bool aborted = false;
    ByteBuffer one = ByteBuffer::allocate(1);
    auto check = [&] {
      EXPECT_EQ(one.get(0), 'a' + received % 26) << received;
      ++received;
    };
    while (received < total) {
      one.clear();
      try {
        if (co_await a.read(one) != 1) break;
      } catch (const std::system_error& e) {
        aborted = e.code() == operation_aborted();
        break;
      }
      check();
      if (received == total / 2) half.set_value();
    }
    EXPECT_TRUE(aborted);
    // The rest of the bytes, in order, under a token never stopped.
    auto rest = [&]() -> Task<void> {
      while (received < total) {
        one.clear();
        if (co_await a.read(one) != 1) co_return;
        check();
      }
    };
    co_await with_stop_token({}, rest());
    co_await with_stop_token({}, group.join());
    co_return received;
  };
  std::thread canceller([&] {
    half.get_future().wait();
    stop.request_stop();
  });
  int received = sync_wait(with_stop_token(stop.get_token(), body()));
  canceller.join();
  EXPECT_EQ(received, total);
}

TEST_P(AsyncSocketTest, ATimeoutRacingACompletionGivesOneOutcome) {
  auto body = [&]() -> Task<void> {
    auto [a, b] = co_await pair(InetSocketAddress::loopback_v4(0), ProtocolFamily::inet);
    // Nothing arrives: the timeout wins and the read is cancelled.
    ByteBuffer in = ByteBuffer::allocate(16);
    bool timed_out = false;
    try {
      co_await with_timeout(loop(), read_one(a, in), 10ms);
    } catch (const std::system_error& e) {
      timed_out = e.code() == std::errc::timed_out;
    }
    EXPECT_TRUE(timed_out);
    // Data and deadline close together, many times: each round ends with exactly one outcome,
    // and no byte is lost to a cancelled read.
    std::size_t received = 0, sent = 0;
    for (int i = 0; i < 50; ++i) {
      ByteBuffer ping = test::text("p");
      co_await b.write(ping);
      ++sent;
      std::chrono::microseconds d(i * 20);
      for (;;) {
        try {
          in.clear();
          received += static_cast<std::size_t>(co_await with_timeout(loop(), read_one(a, in), d));
          break;
        } catch (const std::system_error& e) {
          EXPECT_EQ(e.code(), std::errc::timed_out);
          d = d * 2 + std::chrono::microseconds(50);  // the read wins in the end
        }
      }
    }
    EXPECT_EQ(received, sent);
  };
  sync_wait(body());
}

TEST_P(AsyncSocketTest, DestroyingASuspendedTaskCancelsItsRead) {
  auto body = [&]() -> Task<void> {
    auto [a, b] = co_await pair(InetSocketAddress::loopback_v4(0), ProtocolFamily::inet);
    ByteBuffer in = ByteBuffer::allocate(4096);
    // when_any: the sleeper wins, the reader is cancelled and awaited.
    auto reader = [&]() -> Task<int> {
      co_await a.read(in);
      co_return 0;
    };
    auto sleeper = [&]() -> Task<int> {
      co_await sleep_for(loop(), 5ms);
      co_return 1;
    };
    std::vector<Task<int>> racers;
    racers.push_back(reader());
    racers.push_back(sleeper());
    auto [index, value] = co_await when_any(std::move(racers));
    EXPECT_EQ(index, 1u);
    EXPECT_EQ(value, 1);

    // Started by hand, left suspended in its read, then destroyed: the read is cancelled and
    // the frame is never resumed (AddressSanitizer would see a resumed dead frame).
    bool resumed = false;
    auto abandoned = [&]() -> Task<void> {
      co_await a.read(in);
      resumed = true;
    };
    {
      Task<void> t = abandoned();
      auto awaiter = t.operator co_await();
      awaiter.await_suspend(std::noop_coroutine());  // queued: runs when this task suspends
      co_await sleep_for(loop(), 2ms);               // ... here, up to its read
    }
    ByteBuffer ping = test::text("z");
    co_await b.write(ping);
    ByteBuffer one = ByteBuffer::allocate(1);
    EXPECT_EQ(co_await a.read(one), 1);  // the byte goes to the live read, not the dead one
    EXPECT_FALSE(resumed);
  };
  sync_wait(body());
}

TEST_P(AsyncSocketTest, NoAllocationPerOperationOnceWarm) {
  auto body = [&]() -> Task<std::size_t> {
    auto [a, b] = co_await pair(InetSocketAddress::loopback_v4(0), ProtocolFamily::inet);
    ByteBuffer out = ByteBuffer::allocate(128), in = ByteBuffer::allocate(128);
    auto round = [&]() -> Task<void> {
      out.clear();
      co_await b.write(out);
      in.clear();
      while (in.has_remaining()) co_await a.read(in);
    };
    for (int i = 0; i < 200; ++i) co_await round();  // warms the pools and caches
    test::allocations = 0;
    test::counting = true;  // this thread: the loop's, where every operation runs
    for (int i = 0; i < 1000; ++i) co_await round();
    test::counting = false;
    co_return test::allocations;
  };
  EXPECT_EQ(sync_wait(body()), 0u);
}

// receive(): the loop brings the buffer when bytes arrive; it comes back ready to read, at most
// max_bytes, empty at end of stream; a cancelled receive drops its buffer and the next one gets
// the bytes; once warm, receive and write rounds (and the round's coroutine frame) allocate
// nothing from operator new.
TEST_P(AsyncSocketTest, ReceiveBringsItsBufferWhenBytesArrive) {
  auto body = [&]() -> Task<std::size_t> {
    auto [a, b] = co_await pair(InetSocketAddress::loopback_v4(0), ProtocolFamily::inet);
    ByteBuffer abc = test::text("abc");
    co_await b.write(abc);
    ByteBuffer got = co_await a.receive(64);
    EXPECT_EQ(got.position(), 0u);
    EXPECT_EQ(text_of(got.duplicate().position(got.limit())), "abc");

    ByteBuffer ten = test::text("0123456789");
    co_await b.write(ten);
    std::string all;
    while (all.size() < 10) {
      ByteBuffer part = co_await a.receive(4);
      EXPECT_LE(part.remaining(), 4u);
      EXPECT_GT(part.remaining(), 0u);
      all += text_of(part.duplicate().position(part.limit()));
    }
    EXPECT_EQ(all, "0123456789");

    auto receiver = [&]() -> Task<int> {
      co_await a.receive(64);
      co_return 0;
    };
    auto sleeper = [&]() -> Task<int> {
      co_await sleep_for(loop(), 5ms);
      co_return 1;
    };
    std::vector<Task<int>> racers;
    racers.push_back(receiver());
    racers.push_back(sleeper());
    auto [index, value] = co_await when_any(std::move(racers));
    EXPECT_EQ(index, 1u);
    ByteBuffer z = test::text("z");
    co_await b.write(z);
    ByteBuffer after = co_await a.receive(64);
    EXPECT_EQ(after.remaining(), 1u);

    ByteBuffer out = ByteBuffer::allocate(128);
    auto round = [&]() -> Task<void> {
      out.clear();
      co_await b.write(out);
      std::size_t n = 0;
      while (n < 128) n += (co_await a.receive(4096)).remaining();
    };
    for (int i = 0; i < 200; ++i) co_await round();  // warms the pools and caches
    test::allocations = 0;
    test::counting = true;  // this thread: the loop's, where every operation runs
    for (int i = 0; i < 1000; ++i) co_await round();
    test::counting = false;
    const std::size_t allocations = test::allocations;

    b.shutdown_output();
    std::error_code ec;
    ByteBuffer end = co_await a.receive(64, ec);
    EXPECT_FALSE(ec);
    EXPECT_FALSE(end.has_remaining());  // empty: end of stream
    co_return allocations;
  };
  EXPECT_EQ(sync_wait(body()), 0u);
}

// receive() keeps one receive armed in the kernel between calls: bytes that arrive while no
// receive waits are kept for the next ones, in order, but only up to a bound. A coroutine that
// stops receiving stops the loop reading, so the peer's socket fills up and its sends block:
// TCP's flow control reaches the peer, and nothing is lost when the receiving resumes.
TEST_P(AsyncSocketTest, ReceiveStopsReadingWhileItsCallerDoesNotReceive) {
  auto body = [&]() -> Task<void> {
    auto [a, b] = co_await pair(InetSocketAddress::loopback_v4(0), ProtocolFamily::inet);
    ByteBuffer first = test::text("x");
    co_await b.write(first);
    ByteBuffer got = co_await a.receive(64);  // arms the receive, which stays armed
    EXPECT_EQ(got.remaining(), 1u);

    // b's sends go straight to its socket, a byte pattern numbered by offset, until the kernel
    // refuses more. Every turn in between lets a's loop read as much as it will.
    constexpr std::size_t limit = 256u << 20;
    std::vector<std::uint8_t> chunk(64 * 1024);
    std::size_t sent = 0;
    int refused = 0;
    while (sent < limit && refused < 50) {
      for (std::size_t i = 0; i < chunk.size(); ++i)
        chunk[i] = static_cast<std::uint8_t>((sent + i) % 251);
      const ssize_t n = ::send(b.native_handle(), chunk.data(), chunk.size(), MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
        refused = 0;
      } else {
        ++refused;
      }
      co_await sleep_for(loop(), 1ms);
    }
    EXPECT_LT(sent, limit) << "the loop kept reading for a coroutine that did not receive";

    std::size_t received = 0;
    bool in_order = true;
    while (received < sent) {
      ByteBuffer part = co_await a.receive(64 * 1024);
      if (!part.has_remaining()) break;  // end of stream: too early, as the count says
      for (std::size_t i = 0; i < part.remaining(); ++i) {
        in_order = in_order &&
                   part.get(part.position() + i) == static_cast<std::uint8_t>((received + i) % 251);
      }
      received += part.remaining();
    }
    EXPECT_TRUE(in_order);
    EXPECT_EQ(received, sent);
  };
  sync_wait(body());
}

// read() on a channel whose receive() is armed takes from the same stream, so the two can be
// mixed and the bytes keep their order; end of stream reaches both.
TEST_P(AsyncSocketTest, ReadAndReceiveMixedKeepTheOrder) {
  auto body = [&]() -> Task<void> {
    auto [a, b] = co_await pair(InetSocketAddress::loopback_v4(0), ProtocolFamily::inet);
    ByteBuffer six = test::text("abcdef");
    co_await b.write(six);
    ByteBuffer ab = co_await a.receive(2);
    EXPECT_EQ(std::string(ab.string_view()), "ab");
    ByteBuffer three = ByteBuffer::allocate(3);
    std::int64_t n = co_await a.read(three);
    EXPECT_EQ(n, 3);
    EXPECT_EQ(text_of(three), "cde");
    ByteBuffer f = co_await a.receive(64);
    EXPECT_EQ(std::string(f.string_view()), "f");

    // A read that waits gets what arrives next, scattered over its buffers.
    auto later = [&]() -> Task<void> {
      co_await sleep_for(loop(), 2ms);
      ByteBuffer ghij = test::text("ghij");
      co_await b.write(ghij);
      b.shutdown_output();
    };
    std::array<ByteBuffer, 2> two{ByteBuffer::allocate(1), ByteBuffer::allocate(8)};
    auto reader = [&]() -> Task<std::int64_t> { co_return co_await a.read(two); };
    auto [none, got] = co_await when_all(later(), reader());
    (void)none;
    EXPECT_EQ(got, 4);
    EXPECT_EQ(text_of(two[0]) + text_of(two[1]), "ghij");
    ByteBuffer rest = ByteBuffer::allocate(8);
    std::int64_t end = co_await a.read(rest);
    EXPECT_EQ(end, -1);
  };
  sync_wait(body());
}

// Receives and reads of one channel waiting at the same time are served in the order they
// began, each with its own bytes; one cancelled among them leaves the others in their places.
TEST_P(AsyncSocketTest, WaitingReceivesAreServedInOrder) {
  auto body = [&]() -> Task<void> {
    auto [a, b] = co_await pair(InetSocketAddress::loopback_v4(0), ProtocolFamily::inet);
    std::stop_source cancel_second;
    auto receiver = [&]() -> Task<std::string> {
      ByteBuffer got = co_await a.receive(64);
      co_return std::string(got.string_view());
    };
    auto reader = [&]() -> Task<std::string> {
      ByteBuffer got = ByteBuffer::allocate(64);
      co_await a.read(got);
      co_return text_of(got);
    };
    auto cancelled = [&]() -> Task<std::string> {
      std::error_code ec;
      co_await a.receive(64, ec);
      co_return ec == operation_aborted() ? "aborted" : "not aborted";
    };
    auto writer = [&]() -> Task<void> {
      co_await sleep_for(loop(), 2ms);  // every wait has begun
      cancel_second.request_stop();
      for (const char* text : {"one", "two", "three"}) {
        ByteBuffer t = test::text(text);
        co_await b.write(t);
        co_await sleep_for(loop(), 2ms);  // each its own arrival
      }
    };
    Task<std::string> t1 = receiver();
    Task<std::string> t2 = with_stop_token(cancel_second.get_token(), cancelled());
    Task<std::string> t3 = reader();
    Task<std::string> t4 = receiver();
    Task<void> t5 = writer();
    auto [first, second, third, fourth, none] = co_await when_all(
        std::move(t1), std::move(t2), std::move(t3), std::move(t4), std::move(t5));
    (void)none;
    EXPECT_EQ(first, "one");
    EXPECT_EQ(second, "aborted");
    EXPECT_EQ(third, "two");
    EXPECT_EQ(fourth, "three");
  };
  sync_wait(body());
}

// The same from a thread that is not the channel's loop's: the operations start there, and
// the coroutine continues there.
TEST_P(AsyncSocketTest, ReadAfterReceiveFromAnotherThread) {
  EventLoopGroup::Options g;
  g.threads = 1;
  g.loop = options();
  EventLoopGroup other(g);
  auto body = [&]() -> Task<void> {
    auto [a, b] = co_await pair(InetSocketAddress::loopback_v4(0), ProtocolFamily::inet);
    ByteBuffer six = test::text("abcdef");
    co_await b.write(six);
    co_await resume_on(other.loop(0));
    ByteBuffer ab = co_await a.receive(2);  // continues on a's loop
    EXPECT_EQ(std::string(ab.string_view()), "ab");
    co_await resume_on(other.loop(0));
    ByteBuffer four = ByteBuffer::allocate(4);
    std::int64_t n = co_await a.read(four);
    EXPECT_EQ(n, 4);
    EXPECT_EQ(text_of(four), "cdef");
    b.shutdown_output();
    co_await resume_on(other.loop(0));
    ByteBuffer rest = ByteBuffer::allocate(8);
    std::int64_t end = co_await a.read(rest);
    EXPECT_EQ(end, -1);
    co_await resume_on(loop());  // the channels close on their loop
  };
  sync_wait(body());
  other.shutdown_gracefully();
}

// A write that the socket takes at once finishes without the loop; one that finds a write of
// the same channel still pending waits behind it. Two tasks writing at once: each one's bytes
// arrive whole and in the order the writes were made.
TEST_P(AsyncSocketTest, WritesStayInOrderWhenOneIsPending) {
  auto body = [&]() -> Task<void> {
    auto [a, b] = co_await pair(InetSocketAddress::loopback_v4(0), ProtocolFamily::inet);
    ByteBuffer big = ByteBuffer::allocate(8u << 20);  // more than the socket takes at once
    for (std::size_t i = 0; i < big.capacity(); ++i)
      big.put(i, static_cast<std::uint8_t>('a' + i % 26));
    ByteBuffer tail = test::text("<tail>");
    auto write_big = [&]() -> Task<std::size_t> { co_return co_await b.write(big); };
    auto write_tail = [&]() -> Task<std::size_t> { co_return co_await b.write(tail); };
    auto read_all = [&]() -> Task<std::string> {
      std::string all;
      while (all.size() < (8u << 20) + 6) {
        ByteBuffer part = co_await a.receive(256 * 1024);
        if (!part.has_remaining()) break;
        all.append(reinterpret_cast<const char*>(part.bytes().data()), part.remaining());
      }
      co_return all;
    };
    auto [n_big, n_tail, all] = co_await when_all(write_big(), write_tail(), read_all());
    EXPECT_EQ(n_big, 8u << 20);
    EXPECT_EQ(n_tail, 6u);
    EXPECT_EQ(all.size(), (8u << 20) + 6);
    if (all.size() != (8u << 20) + 6) co_return;
    EXPECT_EQ(all.substr(all.size() - 6), "<tail>");
    bool whole = true;
    for (std::size_t i = 0; i < (8u << 20); ++i)
      whole = whole && all[i] == static_cast<char>('a' + i % 26);
    EXPECT_TRUE(whole);
  };
  sync_wait(body());
}

// The body of niox-coroutine-echo-server's echo(), kept the same so that its frame is too.
Task<void> idle_echo(AsynchronousSocketChannel ch) {
  std::error_code ec;
  ch.set_option(StandardSocketOptions::tcp_nodelay, true, ec);
  for (;;) {
    ByteBuffer buf = co_await ch.receive(64 * 1024, ec);
    if (ec || !buf.has_remaining()) break;
    co_await ch.write(buf, ec);
    if (ec) break;
  }
}

// What an idle coroutine connection costs is mostly its frame, which holds the awaiters of the
// pending receive and of the write: the echo frame must come from the block cache's 512 B class
// or a smaller one (the next class is 1 KiB, which put an idle connection at about 1.9 KB).
TEST_P(AsyncSocketTest, AnEchoCoroutineFrameFitsInHalfAKibibyte) {
  auto body = [&]() -> Task<std::size_t> {
    auto [a, b] = co_await pair(InetSocketAddress::loopback_v4(0), ProtocolFamily::inet);
    // One free block of every class up to 4 KiB on this thread, so that the frame takes a
    // cached one and the cache's free bytes fall by exactly its block's size.
    for (std::size_t size = 64; size <= 4096; size *= 2) {
      detail::free_cached_object(detail::allocate_cached_object(size), size);
    }
    const std::size_t before = BufferPool::for_this_thread().stats().cached_bytes;
    Task<void> echo = idle_echo(std::move(a));  // lazy: allocates the frame, runs nothing
    const std::size_t after = BufferPool::for_this_thread().stats().cached_bytes;
    ByteBuffer ping = test::text("ping");
    co_await b.write(ping);
    b.shutdown_output();
    co_await std::move(echo);  // echoes, then ends at end of stream
    echo = Task<void>();       // the frame, and with it the connection, goes
    ByteBuffer back = ByteBuffer::allocate(8);
    while (co_await b.read(back) > 0) {
    }
    EXPECT_EQ(text_of(back), "ping");
    co_return before - after;
  };
  const std::size_t frame_block = sync_wait(body());
  EXPECT_GT(frame_block, 0u);
  EXPECT_LE(frame_block, 512u);
}

// 5,000 connection tasks at once: 10,000 descriptors in this process, each client task
// connecting, writing and reading its echo concurrently with all the others.
TEST_P(AsyncSocketTest, FiveThousandConcurrentConnectionTasks) {
  constexpr int n = 5000;
  rlimit lim{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_cur < 2 * n + 200) {
    lim.rlim_cur = std::min<rlim_t>(lim.rlim_max, 2 * n + 200);
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
  if (lim.rlim_cur < 2 * n + 200) GTEST_SKIP() << "RLIMIT_NOFILE " << lim.rlim_cur << " < 10,200";
  auto body = [&]() -> Task<std::size_t> {
    co_await resume_on(loop());
    auto server = AsynchronousServerSocketChannel::open(loop());
    server.bind(InetSocketAddress::loopback_v4(0), 4096);
    const SocketAddress at = *server.local_address();
    TaskGroup echoes;
    auto echo = [](AsynchronousSocketChannel ch) -> Task<void> {
      ByteBuffer buf = ByteBuffer::allocate(64);
      std::error_code ec;
      while (co_await ch.read(buf, ec) > 0) {
        buf.flip();
        co_await ch.write(buf, ec);
        buf.clear();
      }
    };
    auto acceptor = [&]() -> Task<void> {
      for (int i = 0; i < n; ++i) echoes.spawn(echo(co_await server.accept()));
    };
    auto client = [&](int i) -> Task<std::size_t> {
      auto ch = AsynchronousSocketChannel::open(loop());
      co_await ch.connect(at);
      std::string msg = "connection " + std::to_string(i);
      ByteBuffer out = test::text(msg);
      co_await ch.write(out);
      ch.shutdown_output();
      ByteBuffer in = ByteBuffer::allocate(64);
      while (co_await ch.read(in) > 0) {
      }
      co_return text_of(in) == msg ? 1 : 0;
    };
    std::vector<Task<std::size_t>> clients;
    for (int i = 0; i < n; ++i) clients.push_back(client(i));
    echoes.spawn(acceptor());
    std::vector<std::size_t> ok = co_await when_all(std::move(clients));
    co_await echoes.join();
    std::size_t sum = 0;
    for (std::size_t v : ok) sum += v;
    co_return sum;
  };
  EXPECT_EQ(sync_wait(body()), static_cast<std::size_t>(n));
}

TEST_P(AsyncSocketTest, FileChannelReadsAndWritesAtPositions) {
  test::TempDir dir;
  const auto path = dir.path() / "async-file.bin";
  auto body = [&]() -> Task<void> {
    co_await resume_on(loop());
    auto f = AsynchronousFileChannel::open(
        loop(), path, OpenOption::read | OpenOption::write | OpenOption::create);
    ByteBuffer hello = test::text("hello ");
    std::array<ByteBuffer, 2> tail{test::text("asynchronous "), test::text("world")};
    EXPECT_EQ(co_await f.write(hello, 0), 6);
    EXPECT_EQ(co_await f.write(tail, 6), 18);  // gathering
    EXPECT_EQ(hello.remaining() + tail[0].remaining() + tail[1].remaining(), 0u);
    EXPECT_EQ(f.size(), 24u);
    std::array<ByteBuffer, 2> into{ByteBuffer::allocate(6), ByteBuffer::allocate(100)};
    EXPECT_EQ(co_await f.read(into, 0), 24);  // scattering; short at the end of the file
    EXPECT_EQ(text_of(into[0]), "hello ");
    EXPECT_EQ(text_of(into[1]), "asynchronous world");
    ByteBuffer past = ByteBuffer::allocate(8);
    EXPECT_EQ(co_await f.read(past, 24), -1);  // at the end
    EXPECT_EQ(co_await f.read(past, 1000), -1);
    ByteBuffer mid = ByteBuffer::allocate(5);
    EXPECT_EQ(co_await f.read(mid, 19), 5);
    EXPECT_EQ(text_of(mid), "world");
    f.close();
    std::error_code ec;
    ByteBuffer again = ByteBuffer::allocate(1);
    co_await f.read(again, 0, ec);  // a closed channel: EBADF, no exception
    EXPECT_TRUE(ec);
  };
  sync_wait(body());
}

TEST_P(AsyncSocketTest, FileTransfersRunOnTheEngineAndReportTheirPath) {
  test::TempDir dir;
  auto body = [&]() -> Task<void> {
    auto [a, b] = co_await pair(InetSocketAddress::loopback_v4(0), ProtocolFamily::inet);
    const auto data = test::pseudo_random_bytes(3 << 20, 77);
    auto src = AsynchronousFileChannel::open(
        loop(), dir.path() / "src.bin", OpenOption::read | OpenOption::write | OpenOption::create);
    ByteBuffer whole = ByteBuffer::wrap(std::span<const std::byte>(data));
    co_await src.write(whole, 0);
    auto dst = AsynchronousFileChannel::open(
        loop(), dir.path() / "dst.bin", OpenOption::read | OpenOption::write | OpenOption::create);
    // file -> socket (sendfile) and, at the same time, socket -> file (splice).
    auto send = [&]() -> Task<TransferResult> {
      co_return co_await src.transfer_to(0, data.size(), b);
    };
    auto receive = [&]() -> Task<TransferResult> {
      co_return co_await dst.transfer_from(a, 0, data.size());
    };
    auto [sent, received] = co_await when_all(send(), receive());
    EXPECT_EQ(sent.bytes, data.size());
    EXPECT_EQ(sent.path, TransferPath::sendfile);
    EXPECT_FALSE(sent.end_of_input);
    EXPECT_EQ(received.bytes, data.size());
    EXPECT_EQ(received.path, TransferPath::splice);
    ByteBuffer back = ByteBuffer::allocate(data.size());
    while (back.has_remaining()) {
      std::int64_t n = co_await dst.read(back, back.position());
      if (n < 0) break;
    }
    back.flip();
    EXPECT_TRUE(std::equal(data.begin(), data.end(), back.bytes().begin()));
    // The stream ends before the count: end_of_input, with what arrived stored.
    ByteBuffer tail = test::text("tail");
    co_await b.write(tail);
    b.shutdown_output();
    TransferResult short_one = co_await dst.transfer_from(a, 0, 100);
    EXPECT_EQ(short_one.bytes, 4u);
    EXPECT_TRUE(short_one.end_of_input);
  };
  sync_wait(body());
}

// A file the program opened itself (here an unnamed O_TMPFILE, as a receiver that names its file
// only once verified makes it) is the channel's to use and close.
TEST_P(AsyncSocketTest, AdoptedFileTakesATransferAndIsReadBack) {
  test::TempDir dir;
  FileDescriptor fd(::open(dir.path().c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0644));
  if (!fd) {
    GTEST_SKIP() << "no O_TMPFILE on the test file system";
  }
  auto body = [&]() -> Task<void> {
    auto [a, b] = co_await pair(InetSocketAddress::loopback_v4(0), ProtocolFamily::inet);
    auto file = AsynchronousFileChannel::adopt(loop(), std::move(fd));
    EXPECT_TRUE(file.is_open());
    ByteBuffer out = test::text("adopted and spliced");
    co_await b.write(out);
    b.shutdown_output();
    TransferResult r = co_await file.transfer_from(a, 7, 100);
    EXPECT_EQ(r.bytes, 19u);
    EXPECT_TRUE(r.end_of_input);
    EXPECT_EQ(file.size(), 26u);
    ByteBuffer back = ByteBuffer::allocate(19);
    EXPECT_EQ(co_await file.read(back, 7), 19);
    EXPECT_EQ(text_of(back), "adopted and spliced");
    file.close();
    EXPECT_FALSE(file.is_open());
  };
  sync_wait(body());
}

NIOX_INSTANTIATE_BACKENDS(AsyncSocketTest);

}  // namespace
}  // namespace niox
