// docs/reliability.md rows provoked with the syscall fault-injection shim: short counts, EINTR,
// EAGAIN, ECONNRESET and ENOBUFS at chosen calls, through the channels, the loop and the
// transport. The shim sees the calls of the epoll backend and of io_uring's per-operation
// fallback; on io_uring proper the kernel ring does the I/O, so there the same tests run with
// the kernel's own short transfers (tiny socket buffers) or a real reset instead.
#include <niox/channels/datagram_channel.hpp>
#include <niox/channels/server_socket_channel.hpp>
#include <niox/channels/socket_channel.hpp>
#include <niox/loop/event_loop.hpp>
#include <niox/loop/loop_counters.hpp>
#include <niox/transport/bootstrap.hpp>
#include <niox/transport/loop_socket_channel.hpp>

#include "../support/backends.hpp"
#include "../support/fault_injection.hpp"
#include "../support/loop_sockets.hpp"
#include "../support/transport_scenarios.hpp"
#include "../support/transport_sockets.hpp"
#include "shim_fixtures.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

using namespace niox;
using namespace niox::test;
namespace fi = niox::test::fault;

namespace {

// Buffers of random sizes (zero-length ones included) over consecutive slices of `data`.
std::vector<ByteBuffer> random_layout(std::span<const std::byte> data, std::mt19937_64& g) {
  std::vector<ByteBuffer> out;
  std::size_t off = 0;
  while (off < data.size()) {
    std::size_t pick = g() % 8;
    std::size_t n = pick == 0 ? 0 : pick < 4 ? 1 + g() % 16 : 1 + g() % 20000;
    n = std::min(n, data.size() - off);
    out.push_back(ByteBuffer::wrap(data.subspan(off, n)));
    off += n;
  }
  return out;
}

// ---- channels (synchronous; no backend) --------------------------------------------------

class ChannelFaults : public ::testing::Test {
 protected:
  void SetUp() override { fds_before_ = open_fd_count(); }
  void TearDown() override {
    fi::disarm_all();
    EXPECT_EQ(open_fd_count(), fds_before_) << "descriptor leak";
  }
  int fds_before_ = 0;
};

// Reads everything from fd until EOF on another thread.
std::future<std::vector<std::byte>> drain_async(int fd) {
  return std::async(std::launch::async, [fd] {
    std::vector<std::byte> got;
    std::byte buf[65536];
    for (;;) {
      ssize_t k = ::recv(fd, buf, sizeof buf, 0);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) break;
      got.insert(got.end(), buf, buf + k);
    }
    return got;
  });
}

std::pair<SocketChannel, SocketChannel> channel_pair() {
  auto listener = ServerSocketChannel::open();
  listener.bind(InetSocketAddress::loopback_v4(0), 4);
  auto client = SocketChannel::open(*listener.local_address());
  auto server = listener.accept();
  return {std::move(client), std::move(*server)};
}

TEST_F(ChannelFaults, RandomShortGatheringWritesKeepTheExactStreamAndPositions) {
  auto [client, server] = channel_pair();
  auto data = pseudo_random_bytes(3 << 20, 1);
  std::mt19937_64 g(2);
  auto reader = drain_async(server.native_handle());
  {
    fi::Armed shorts({.calls = fi::writes,
                      .fd = client.native_handle(),
                      .times = 0,
                      .random_short = true,
                      .seed = 3});
    std::size_t off = 0;
    while (off < data.size()) {
      std::size_t chunk = std::min<std::size_t>(data.size() - off, 1 + g() % 300000);
      auto bufs = random_layout(std::span<const std::byte>(data).subspan(off, chunk), g);
      std::vector<std::size_t> before;
      for (auto& b : bufs) before.push_back(b.position());
      std::int64_t n = client.write(std::span<ByteBuffer>(bufs));  // blocking: writes everything
      ASSERT_EQ(n, static_cast<std::int64_t>(chunk));
      for (std::size_t i = 0; i < bufs.size(); ++i) {
        ASSERT_EQ(bufs[i].position(), bufs[i].limit()) << "buffer " << i;
        ASSERT_GE(bufs[i].position(), before[i]);
      }
      off += chunk;
    }
    EXPECT_GT(shorts.fired(), 10u);
  }
  client.shutdown_output();
  auto got = wait_for(reader);
  ASSERT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data);
}

TEST_F(ChannelFaults, NonBlockingShortWriteAdvancesEachBufferByExactlyWhatWasSent) {
  auto [client, server] = channel_pair();
  client.configure_blocking(false);
  auto data = pseudo_random_bytes(100000, 4);
  std::mt19937_64 g(5);
  auto bufs = random_layout(data, g);
  std::vector<std::byte> got;
  std::byte tmp[65536];
  std::size_t sent = 0;
  for (std::uint64_t round = 0; sent < data.size(); ++round) {
    ASSERT_LT(round, 100000u);
    std::int64_t n;
    {
      // A random short count, or EAGAIN every third call.
      fi::Armed fault(
          round % 3 == 2
              ? fi::Rule{.calls = fi::writes, .fd = client.native_handle(), .error = EAGAIN}
              : fi::Rule{.calls = fi::writes,
                         .fd = client.native_handle(),
                         .random_short = true,
                         .seed = round + 1});
      n = client.write(std::span<ByteBuffer>(bufs));
      if (round % 3 == 2 && fault.fired() > 0) {
        EXPECT_EQ(n, 0);  // would block: nothing moved
      }
    }
    ASSERT_GE(n, 0);
    sent += static_cast<std::size_t>(n);
    // Every buffer before the one in progress is complete, the rest untouched: positions sum
    // to exactly what was sent.
    std::size_t moved = 0;
    for (auto& b : bufs) moved += b.position();
    ASSERT_EQ(moved, sent) << "round " << round;
    for (;;) {
      ssize_t k = ::recv(server.native_handle(), tmp, sizeof tmp, MSG_DONTWAIT);
      if (k <= 0) break;
      got.insert(got.end(), tmp, tmp + k);
    }
  }
  client.shutdown_output();
  auto rest = drain_async(server.native_handle());
  auto tail = wait_for(rest);
  got.insert(got.end(), tail.begin(), tail.end());
  EXPECT_TRUE(got == data);
}

TEST_F(ChannelFaults, EintrIsRetriedAndNothingIsLost) {
  auto [client, server] = channel_pair();
  auto data = pseudo_random_bytes(1 << 20, 6);
  auto reader = drain_async(server.native_handle());
  {
    fi::Armed eintr(
        {.calls = fi::writes, .fd = client.native_handle(), .times = 200, .error = EINTR});
    fi::Armed shorts({.calls = fi::writes,
                      .fd = client.native_handle(),
                      .after = 200,
                      .times = 0,
                      .max_bytes = 4096});
    std::array<ByteBuffer, 3> bufs{
        ByteBuffer::wrap(std::span<const std::byte>(data).first(1000)),
        ByteBuffer::wrap(std::span<const std::byte>(data).subspan(1000, 0)),
        ByteBuffer::wrap(std::span<const std::byte>(data).subspan(1000))};
    EXPECT_EQ(client.write(std::span<ByteBuffer>(bufs)), static_cast<std::int64_t>(data.size()));
    EXPECT_EQ(eintr.fired(), 200u);
  }
  client.shutdown_output();
  auto got = wait_for(reader);
  EXPECT_TRUE(got == data);
  // Reads: EINTR retried as well.
  std::byte one[1];
  ASSERT_EQ(::send(server.native_handle(), "z", 1, 0), 1);
  fi::Armed eintr({.calls = fi::reads, .fd = client.native_handle(), .times = 50, .error = EINTR});
  auto in = ByteBuffer::wrap(std::span<std::byte>(one));
  EXPECT_EQ(client.read(in), 1);
  EXPECT_EQ(eintr.fired(), 50u);
}

TEST_F(ChannelFaults, EnobufsOnADatagramSendIsAClearErrorAndTheNextSendWorks) {
  auto rx = DatagramChannel::open();
  rx.bind(InetSocketAddress::loopback_v4(0));
  auto tx = DatagramChannel::open();
  auto to = *rx.local_address();
  auto msg = ByteBuffer::wrap(std::string_view("datagram"));
  {
    fi::Armed enobufs({.calls = fi::writes, .fd = tx.native_handle(), .error = ENOBUFS});
    std::error_code ec;
    try {
      tx.send(msg, to);
      ADD_FAILURE() << "expected ENOBUFS";
    } catch (const std::system_error& e) {
      ec = e.code();
    }
    EXPECT_EQ(ec, std::errc::no_buffer_space);
    EXPECT_EQ(msg.position(), 0u);  // nothing taken
    EXPECT_EQ(enobufs.fired(), 1u);
  }
  EXPECT_EQ(tx.send(msg, to), 8u);
  auto in = ByteBuffer::allocate(64);
  ASSERT_TRUE(rx.receive(in).has_value());
  in.flip();
  EXPECT_EQ(in.remaining(), 8u);
}

// ---- the loop, every backend -------------------------------------------------------------

class LoopFaults : public DisarmingTest {};
NIOX_INSTANTIATE_BACKENDS(LoopFaults);

// A read's or receive's result: its bytes appended to got, or failed set (an error, or the end
// of the stream before the test expected it). Whether it brought bytes.
bool append_read(std::error_code ec, std::size_t n, ByteBuffer& buf, std::vector<std::byte>& got,
                 bool& failed) {
  if (ec || n == 0) {
    failed = true;
    return false;
  }
  buf.flip();
  auto s = buf.bytes();
  got.insert(got.end(), s.begin(), s.end());
  return true;
}

// Reads b until `want` bytes arrived, with buffers of varying size.
void read_all(EventLoop& loop, int fd, std::size_t want, std::vector<std::byte>& got,
              std::mt19937_64& g, bool& failed) {
  std::size_t size = 1 + g() % 9000;
  loop.read(
      fd, ByteBuffer::allocate(size),
      [&loop, fd, want, &got, &g, &failed](std::error_code ec, std::size_t n, ByteBuffer buf) {
        if (append_read(ec, n, buf, got, failed) && got.size() < want)
          read_all(loop, fd, want, got, g, failed);
      });
}

TEST_P(LoopFaults, RandomShortGatheringWritesArriveInOrderWithExactPositions) {
  EventLoop loop(options());
  auto [a, b] = loop_socket_pair();
  int small = 8192;  // io_uring proper: the kernel's own short sends
  ::setsockopt(a.get(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  auto data = pseudo_random_bytes(2 << 20, 7);
  std::mt19937_64 g(8);
  fi::Armed shorts(
      {.calls = fi::writes, .fd = a.get(), .times = 0, .random_short = true, .seed = 9});
  constexpr int kWrites = 24;
  std::vector<int> order;
  std::size_t off = 0;
  std::size_t per = data.size() / kWrites;
  for (int i = 0; i < kWrites; ++i) {
    std::size_t chunk = i + 1 == kWrites ? data.size() - off : per;
    auto bufs = random_layout(std::span<const std::byte>(data).subspan(off, chunk), g);
    loop.write(a.get(), bufs,
               [&order, i, chunk](std::error_code ec, std::size_t n, std::span<ByteBuffer> done) {
                 EXPECT_FALSE(ec);
                 EXPECT_EQ(n, chunk);
                 for (auto& bb : done) EXPECT_EQ(bb.position(), bb.limit());
                 order.push_back(i);
               });
    off += chunk;
  }
  std::vector<std::byte> got;
  bool failed = false;
  read_all(loop, b.get(), data.size(), got, g, failed);
  ASSERT_TRUE(run_until(
      loop, [&] { return failed || (got.size() == data.size() && order.size() == kWrites); },
      std::chrono::seconds(60)));
  ASSERT_FALSE(failed);
  EXPECT_TRUE(got == data);
  for (int i = 0; i < kWrites; ++i) EXPECT_EQ(order[i], i);
  if (shim_sees_loop(GetParam())) {
    EXPECT_GT(shorts.fired(), 10u);
  }
}

TEST_P(LoopFaults, ShortReadsWithDataStillPendingDoNotStall) {
  EventLoop loop(options());
  auto [a, b] = loop_socket_pair();
  auto data = pseudo_random_bytes(200000, 10);
  // Everything is in b's receive queue before the first read: one readiness edge, no more.
  std::size_t put = 0;
  while (put < data.size()) {
    ssize_t n = ::send(a.get(), data.data() + put, data.size() - put, MSG_DONTWAIT);
    ASSERT_GT(n, 0);
    put += static_cast<std::size_t>(n);
  }
  fi::Armed shorts({.calls = fi::reads, .fd = b.get(), .times = 0, .max_bytes = 777});
  std::vector<std::byte> got;
  bool failed = false;
  std::mt19937_64 g(11);
  read_all(loop, b.get(), data.size(), got, g, failed);
  ASSERT_TRUE(run_until(loop, [&] { return failed || got.size() == data.size(); }));
  ASSERT_FALSE(failed);
  EXPECT_TRUE(got == data);
  if (shim_sees_loop(GetParam())) {
    EXPECT_GT(shorts.fired(), 100u);
  }
}

TEST_P(LoopFaults, EintrIsRetriedAndNothingIsLost) {
  EventLoop loop(options());
  auto [a, b] = loop_socket_pair();
  auto data = pseudo_random_bytes(300000, 12);
  fi::Armed wintr({.calls = fi::writes, .fd = a.get(), .times = 100, .error = EINTR});
  fi::Armed rintr({.calls = fi::reads, .fd = b.get(), .times = 100, .error = EINTR});
  std::array<ByteBuffer, 2> bufs{ByteBuffer::wrap(std::span<const std::byte>(data).first(5)),
                                 ByteBuffer::wrap(std::span<const std::byte>(data).subspan(5))};
  bool written = false;
  loop.write(a.get(), bufs, [&](std::error_code ec, std::size_t n, std::span<ByteBuffer>) {
    EXPECT_FALSE(ec);
    EXPECT_EQ(n, data.size());
    written = true;
  });
  std::vector<std::byte> got;
  bool failed = false;
  std::mt19937_64 g(13);
  read_all(loop, b.get(), data.size(), got, g, failed);
  ASSERT_TRUE(run_until(loop, [&] { return failed || (written && got.size() == data.size()); }));
  ASSERT_FALSE(failed);
  EXPECT_TRUE(got == data);
  if (shim_sees_loop(GetParam())) {
    EXPECT_EQ(wintr.fired(), 100u);
    EXPECT_EQ(rintr.fired(), 100u);
  }
}

TEST_P(LoopFaults, EagainThenThePeerResumesAndEveryByteArrives) {
  EventLoop loop(options());
  auto [a, b] = loop_socket_pair();
  int small = 4096;
  ::setsockopt(a.get(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  ::setsockopt(b.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  auto data = pseudo_random_bytes(4 << 20, 14);
  fi::Armed observe({.calls = fi::writes, .fd = a.get(), .times = 0});
  std::vector<ByteBuffer> bufs;
  for (std::size_t off = 0; off < data.size(); off += 65536) {
    bufs.push_back(ByteBuffer::wrap(std::span<const std::byte>(data).subspan(off, 65536)));
  }
  bool written = false;
  loop.write(a.get(), bufs, [&](std::error_code ec, std::size_t n, std::span<ByteBuffer>) {
    EXPECT_FALSE(ec);
    EXPECT_EQ(n, data.size());
    written = true;
  });
  // The peer does not read for a while: the socket fills and the write waits.
  auto pause_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < pause_end) loop.run_once(std::chrono::milliseconds(10));
  ASSERT_FALSE(written);
  auto calls_while_paused = observe.seen();
  // No busy retry while the peer is stalled: a handful of attempts, not one per turn.
  if (shim_sees_loop(GetParam())) {
    EXPECT_LT(calls_while_paused, 20u);
  }
  std::vector<std::byte> got;
  bool failed = false;
  std::mt19937_64 g(15);
  read_all(loop, b.get(), data.size(), got, g, failed);
  ASSERT_TRUE(run_until(
      loop, [&] { return failed || (written && got.size() == data.size()); },
      std::chrono::seconds(60)));
  ASSERT_FALSE(failed);
  EXPECT_TRUE(got == data);
}

// A bulk stream on io_uring, read with recv (off the ring, or on a loop without one): a read
// that filled its buffer and left the socket empty is followed by a wait for readiness
// (io_uring's poll checks the socket as it is armed), not by a recv that finds EAGAIN. One
// recv per burst, every byte in order. (Edge-triggered epoll has to read until EAGAIN: there
// only the bytes are checked.)
TEST_P(LoopFaults, ABulkReadThatFilledItsBufferIsFollowedByAWaitNotARecvFindingNothing) {
  EventLoop loop(options());
  auto [a, b] = loop_socket_pair();
  constexpr std::size_t max_bytes = 64 * 1024;
  auto data = pseudo_random_bytes(40 * max_bytes, 21);
  std::vector<std::byte> got;
  bool failed = false;
  loop.receive_multishot(b.get(), max_bytes,
                         [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
                           append_read(ec, n, buf, got, failed);
                         });
  std::size_t sent = 0;
  auto burst = [&] {
    // From this thread, so the whole burst waits in b before the loop looks.
    ASSERT_EQ(::write(a.get(), data.data() + sent, max_bytes), static_cast<ssize_t>(max_bytes));
    sent += max_bytes;
    ASSERT_TRUE(run_until(loop, [&] { return failed || got.size() == sent; }));
    ASSERT_FALSE(failed);
    loop.run_once(std::chrono::milliseconds(0));  // the socket empty: the loop's next turn
    loop.run_once(std::chrono::milliseconds(0));
  };
  for (int i = 0; i < 8; ++i) burst();  // the loop learns it is a bulk stream
  fi::Armed recvs({.calls = fi::reads, .fd = b.get(), .times = 0});
  constexpr int bursts = 32;
  for (int i = 0; i < bursts; ++i) burst();
  EXPECT_TRUE(std::equal(got.begin(), got.end(), data.begin()));
  if (GetParam().kind == BackendKind::io_uring) {
    EXPECT_EQ(recvs.seen(), static_cast<std::uint64_t>(bursts))
        << fmt::format("{}", loop.counters());
  }
}

TEST_P(LoopFaults, EnobufsOnSendmsgIsAClearErrorAndTheNextDatagramGoesOut) {
  if (!shim_sees_loop(GetParam()))
    GTEST_SKIP() << "io_uring sends without libc; niox uses no provided-buffer rings";
  EventLoop loop(options());
  FileDescriptor rx = loop_udp_socket();
  FileDescriptor tx = loop_udp_socket();
  SocketAddress to(InetSocketAddress::loopback_v4(local_port(rx.get())));
  fi::Armed enobufs({.calls = fi::writes, .fd = tx.get(), .error = ENOBUFS});
  std::array<ByteBuffer, 1> first{ByteBuffer::wrap(std::string_view("first"))};
  std::array<ByteBuffer, 1> second{ByteBuffer::wrap(std::string_view("second"))};
  std::error_code e1, e2{std::make_error_code(std::errc::interrupted)};
  std::size_t pos1 = 99;
  loop.sendmsg(tx.get(), first, to,
               [&](std::error_code ec, std::size_t, std::span<ByteBuffer> bufs) {
                 e1 = ec;
                 pos1 = bufs[0].position();
               });
  loop.sendmsg(tx.get(), second, to,
               [&](std::error_code ec, std::size_t, std::span<ByteBuffer>) { e2 = ec; });
  DatagramText received;
  received.receive(loop, rx.get());
  ASSERT_TRUE(run_until(loop, [&] { return !received.text().empty() && !e2; }));
  EXPECT_EQ(e1, std::errc::no_buffer_space);
  EXPECT_EQ(pos1, 0u);
  EXPECT_EQ(received.text(), "second");
  loop.release(rx);
  loop.release(tx);
}

// ---- the transport, every backend --------------------------------------------------------

class TransportFaults : public DisarmingTest {};
NIOX_INSTANTIATE_BACKENDS(TransportFaults);

TEST_P(TransportFaults, RandomShortCountsInTheFlushKeepTheExactStream) {
  auto data = pseudo_random_bytes(6 << 20, 16);
  auto h = std::make_shared<LambdaHandler>();
  h->on_active = [&](ChannelHandlerContext& ctx) {
    std::mt19937_64 g(17);
    std::size_t off = 0;
    while (off < data.size()) {
      std::size_t n =
          std::min<std::size_t>(data.size() - off, g() % 4 == 0 ? g() % 64 : 1 + g() % 70000);
      ctx.write(ByteBuffer::wrap(std::span<const std::byte>(data).subspan(off, n)));
      if (g() % 16 == 0) ctx.flush();
      off += n;
    }
    ctx.flush();
    ctx.shutdown_output();
  };
  TestServer server(options(), 1);
  SocketAddress addr = serve(server, h);
  fi::Armed shorts({.calls = fi::writes,
                    .local_port = addr.inet().port(),
                    .times = 0,
                    .random_short = true,
                    .seed = 18});
  PeerSocket peer(addr);
  auto got = peer.recv_to_eof();
  ASSERT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data);
  if (shim_sees_loop(GetParam())) {
    EXPECT_GT(shorts.fired(), 10u);
  }
}

// `connections` connections to an echo server at `addr`, one "ping" each, each closed after
// its echo.
void ping_echo_server(const SocketAddress& addr, int connections) {
  for (int i = 0; i < connections; ++i) {
    PeerSocket peer(addr);
    peer.send_all("ping");
    auto back = peer.recv_exact(4);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(back.data()), back.size()), "ping");
  }
}

// What accept4(SOCK_NONBLOCK) made needs no checking: the loop neither fstat()s nor fcntl()s an
// accepted connection, and a small echo does not ask for SO_SNDBUF. (These are syscalls of the
// library itself, not loop I/O, so the shim sees them on every backend.)
TEST_P(TransportFaults, AnAcceptedConnectionIsNotAskedWhatItIs) {
  TestServer server(options(), 1);
  SocketAddress addr = serve_echo(server);
  fi::Armed questions({.calls = fi::questions, .local_port = addr.inet().port(), .times = 0});
  ping_echo_server(addr, 3);
  EXPECT_EQ(questions.seen(), 0u);
  server.stop();
}

// TCP_NODELAY, TCP_NOTSENT_LOWAT and SO_KEEPALIVE pass from a listening socket to every socket
// it accepts, so a child's value of those is set once, on the listener: an accepted connection
// costs no setsockopt, and has the values all the same.
TEST_P(TransportFaults, ChildOptionsTheListenerPassesOnCostAConnectionNoSetsockopt) {
  struct Values {
    int nodelay = -1, lowat = -1, keepalive = -1;
  };
  auto mutex = std::make_shared<std::mutex>();
  auto values = std::make_shared<std::vector<Values>>();
  TestServer server(options(), 1);
  server.bootstrap()
      .child_option(channel_option::tcp_nodelay, true)
      .child_option(channel_option::tcp_notsent_lowat, 16 * 1024)
      .child_option(channel_option::so_keepalive, true)
      .child_option(channel_option::write_buffer_hard_limit, std::size_t(1) << 20)  // per child
      .child_handler(init([mutex, values](Channel& ch) {
        const int fd = static_cast<LoopSocketChannel&>(ch).fd();
        auto get = [fd](int level, int name) {
          int v = -1;
          socklen_t len = sizeof v;
          return ::getsockopt(fd, level, name, &v, &len) == 0 ? v : -1;
        };
        Values v{get(IPPROTO_TCP, TCP_NODELAY), get(IPPROTO_TCP, TCP_NOTSENT_LOWAT),
                 get(SOL_SOCKET, SO_KEEPALIVE)};
        {
          std::lock_guard lock(*mutex);
          values->push_back(v);
        }
        EXPECT_EQ(ch.config().write_buffer_hard_limit(), std::size_t(1) << 20);
        ch.pipeline().add_last(std::make_shared<EchoHandler>());
      }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  fi::Armed sets({.calls = fi::call_setsockopt, .local_port = addr.inet().port(), .times = 0});
  ping_echo_server(addr, 3);
  EXPECT_EQ(sets.seen(), 0u);
  server.stop();
  std::lock_guard lock(*mutex);
  ASSERT_EQ(values->size(), 3u);
  for (const Values& v : *values) {
    EXPECT_NE(v.nodelay, 0);
    EXPECT_EQ(v.lowat, 16 * 1024);
    EXPECT_NE(v.keepalive, 0);
  }
}

// On a socket with TLS_RX a read fails with EIO when the next record is not application data;
// the channel then reads it with its type. Here the "record" is plain bytes (no kernel TLS on a
// test machine needs to exist): recvmsg finds no record type and they arrive as data.
TEST_P(TransportFaults, AReadRefusedWithEioOnAKernelTlsSocketIsReadAgainWithItsType) {
  if (!shim_sees_loop(GetParam())) {
    GTEST_SKIP() << "io_uring's receives do not pass through the shim";
  }
  TestServer server(options(), 1);
  server.bootstrap().child_handler(init([](Channel& ch) {
    detail::KernelTls::started_receive(static_cast<LoopSocketChannel&>(ch));
    ch.pipeline().add_last(std::make_shared<EchoHandler>());
  }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  // Every read but recvmsg, once: what the kernel does to a plain read of an alert record.
  fi::Armed eio(
      {.calls = fi::reads & ~fi::call_recvmsg, .local_port = addr.inet().port(), .error = EIO});
  PeerSocket peer(addr);
  peer.send_all("ping");
  auto back = peer.recv_exact(4);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(back.data()), back.size()), "ping");
  EXPECT_EQ(eio.fired(), 1u);
  peer.send_all("pong");  // the connection goes on reading
  back = peer.recv_exact(4);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(back.data()), back.size()), "pong");
  server.stop();
}

TEST_P(TransportFaults, EconnresetFailsEveryPendingWriteOnceAndFreesTheDescriptor) {
  bool via_shim = shim_sees_loop(GetParam());
  constexpr int kWrites = 200;
  PendingWrites pending(kWrites);
  TestServer server(options(), 1);
  SocketAddress addr = serve(server, pending.handler());
  // The server's third write-side call (after two went out) is reset by the "peer".
  std::optional<fi::Armed> reset;
  if (via_shim)
    reset.emplace(fi::Rule{.calls = fi::writes,
                           .local_port = addr.inet().port(),
                           .after = 2,
                           .times = 0,
                           .error = ECONNRESET});
  PeerSocket peer(addr);
  pending.wait_queued();
  if (!via_shim) {  // io_uring proper: a real reset
    linger l{1, 0};
    ::setsockopt(peer.fd(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
    peer.close();
  }
  pending.wait_closed_and_completed();
  EXPECT_EQ(pending.completions(), kWrites);  // each exactly once
  EXPECT_GT(pending.failures(), 0);
  if (via_shim) {
    EXPECT_GE(reset->fired(), 1u);
  }
  reset.reset();
  peer.close();
  server.stop();
}

}  // namespace
