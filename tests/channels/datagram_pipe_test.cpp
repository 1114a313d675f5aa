#include <niox/channels/datagram_channel.hpp>
#include <niox/channels/pipe.hpp>
#include <niox/channels/selector.hpp>

#include "support/channels_support.hpp"

#include <array>
#include <csignal>
#include <thread>

#include <fcntl.h>

namespace niox {
namespace {

class DatagramTest : public test::FdLeakCheck {};

DatagramChannel bound_v4() {
  auto ch = DatagramChannel::open();
  ch.bind(InetSocketAddress::loopback_v4(0));
  return ch;
}

TEST_F(DatagramTest, SendReceiveWithSource) {
  auto a = bound_v4();
  auto b = bound_v4();
  EXPECT_TRUE(::fcntl(a.native_handle(), F_GETFD) & FD_CLOEXEC);
  auto msg = ByteBuffer::wrap(std::string_view("datagram"));
  EXPECT_EQ(a.send(msg, *b.local_address()), 8u);
  EXPECT_FALSE(msg.has_remaining());
  auto dst = ByteBuffer::allocate(64);
  auto got = b.receive(dst);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->bytes, 8u);
  EXPECT_EQ(got->datagram_size, 8u);
  EXPECT_FALSE(got->truncated);
  EXPECT_EQ(got->source, *a.local_address());
  EXPECT_EQ(dst.flip().string_view(), "datagram");
}

TEST_F(DatagramTest, GatherSendScatterReceive) {
  auto a = bound_v4();
  auto b = bound_v4();
  std::array<ByteBuffer, 4> out{ByteBuffer::wrap(std::string_view("HEAD")), ByteBuffer::allocate(0),
                                ByteBuffer::wrap(std::string_view("body-")),
                                ByteBuffer::wrap(std::string_view("tail"))};
  EXPECT_EQ(a.send(out, *b.local_address()), 13u);
  std::array<ByteBuffer, 2> in{ByteBuffer::allocate(4), ByteBuffer::allocate(100)};
  auto got = b.receive(in);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->bytes, 13u);
  EXPECT_EQ(in[0].flip().string_view(), "HEAD");
  EXPECT_EQ(in[1].flip().string_view(), "body-tail");
}

TEST_F(DatagramTest, TruncationIsReported) {
  auto a = bound_v4();
  auto b = bound_v4();
  auto big = ByteBuffer::allocate(1000);
  a.send(big, *b.local_address());
  std::array<ByteBuffer, 2> in{ByteBuffer::allocate(10), ByteBuffer::allocate(20)};
  auto got = b.receive(in);
  ASSERT_TRUE(got);
  EXPECT_TRUE(got->truncated);
  EXPECT_EQ(got->bytes, 30u);
  EXPECT_EQ(got->datagram_size, 1000u);
  EXPECT_FALSE(in[0].has_remaining());
  EXPECT_FALSE(in[1].has_remaining());
}

TEST_F(DatagramTest, EmptyDatagramAndWouldBlock) {
  auto a = bound_v4();
  auto b = bound_v4();
  b.configure_blocking(false);
  auto dst = ByteBuffer::allocate(8);
  EXPECT_FALSE(b.receive(dst).has_value());  // nothing queued
  auto empty = ByteBuffer::allocate(0);
  a.send(empty, *b.local_address());
  auto selector = Selector::open();
  b.register_with(selector, SelectionKey::OP_READ);
  ASSERT_EQ(selector.select(std::chrono::milliseconds(5000)), 1);
  auto got = b.receive(dst);
  ASSERT_TRUE(got.has_value());  // an empty datagram is still a datagram
  EXPECT_EQ(got->bytes, 0u);
  EXPECT_FALSE(got->truncated);
}

TEST_F(DatagramTest, ConnectedReadWriteAndRefused) {
  auto a = bound_v4();
  auto b = bound_v4();
  a.connect(*b.local_address());
  b.connect(*a.local_address());
  EXPECT_TRUE(a.is_connected());
  EXPECT_EQ(*a.remote_address(), *b.local_address());
  auto msg = ByteBuffer::wrap(std::string_view("hi"));
  EXPECT_EQ(a.write(msg), 2);
  auto dst = ByteBuffer::allocate(8);
  EXPECT_EQ(b.read(dst), 2);

  // A send to a port nobody listens on comes back as ECONNREFUSED, and the channel lives on.
  SocketAddress dead = *b.local_address();
  b.close();
  auto m2 = ByteBuffer::wrap(std::string_view("lost"));
  a.write(m2);
  a.configure_blocking(true);
  std::error_code ec;
  dst.clear();
  a.read(dst, ec);
  EXPECT_EQ(ec, std::errc::connection_refused);
  EXPECT_TRUE(a.is_open());
  a.disconnect();
  EXPECT_FALSE(a.is_connected());
  auto c = bound_v4();
  auto m3 = ByteBuffer::wrap(std::string_view("again"));
  EXPECT_EQ(a.send(m3, *c.local_address()), 5u);
  dst.clear();
  EXPECT_TRUE(c.receive(dst).has_value());
  (void)dead;
}

TEST_F(DatagramTest, OversizeSendIsEmsgsize) {
  auto a = bound_v4();
  auto b = bound_v4();
  auto huge = ByteBuffer::allocate(70000);  // above the IPv4 datagram maximum
  std::error_code ec;
  EXPECT_EQ(a.send(huge, *b.local_address(), ec), 0u);
  EXPECT_EQ(ec, std::errc::message_size);
  EXPECT_EQ(huge.position(), 0u);
}

TEST_F(DatagramTest, UnixDomainAndIpv6) {
  test::TempDir dir;
  auto a = DatagramChannel::open(ProtocolFamily::unix_domain);
  auto b = DatagramChannel::open(ProtocolFamily::unix_domain);
  UnixDomainSocketAddress pa((dir / "a").string());
  UnixDomainSocketAddress pb((dir / "b").string());
  a.bind(pa);
  b.bind(pb);
  auto msg = ByteBuffer::wrap(std::string_view("local"));
  a.send(msg, pb);
  auto dst = ByteBuffer::allocate(16);
  auto got = b.receive(dst);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->source.unix_domain(), pa);
  if (test::ipv6_loopback_available()) {
    auto c = DatagramChannel::open(ProtocolFamily::inet6);
    c.bind(InetSocketAddress::loopback_v6(0));
    auto d = DatagramChannel::open(ProtocolFamily::inet6);
    auto m = ByteBuffer::wrap(std::string_view("v6"));
    d.send(m, *c.local_address());
    dst.clear();
    auto g6 = c.receive(dst);
    ASSERT_TRUE(g6);
    EXPECT_TRUE(g6->source.inet().is_ipv6());
  }
}

class PipeTest : public test::FdLeakCheck {};

TEST_F(PipeTest, SinkToSource) {
  auto pipe = Pipe::open();
  EXPECT_TRUE(::fcntl(pipe.source().native_handle(), F_GETFD) & FD_CLOEXEC);
  EXPECT_TRUE(::fcntl(pipe.sink().native_handle(), F_GETFD) & FD_CLOEXEC);
  auto msg = ByteBuffer::wrap(std::string_view("through the pipe"));
  EXPECT_EQ(pipe.sink().write(msg), 16);
  auto dst = ByteBuffer::allocate(64);
  EXPECT_EQ(pipe.source().read(dst), 16);
  pipe.source().configure_blocking(false);
  EXPECT_EQ(pipe.source().read(dst), 0);  // would block
  pipe.sink().close();
  EXPECT_EQ(pipe.source().read(dst), -1);
}

TEST_F(PipeTest, EpipeWithoutSigpipe) {
  auto old = std::signal(SIGPIPE, SIG_DFL);
  auto pipe = Pipe::open();
  pipe.source().close();
  auto msg = ByteBuffer::wrap(std::string_view("nobody reads"));
  std::error_code ec;
  EXPECT_EQ(pipe.sink().write(msg, ec), 0);
  EXPECT_EQ(ec, std::errc::broken_pipe);
  EXPECT_THROW(pipe.sink().write(msg), std::system_error);
  // No SIGPIPE stays pending or blocked behind.
  sigset_t pending;
  sigpending(&pending);
  EXPECT_FALSE(sigismember(&pending, SIGPIPE));
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  EXPECT_FALSE(sigismember(&mask, SIGPIPE));
  std::signal(SIGPIPE, old);
}

TEST_F(PipeTest, NonBlockingSinkFillsUp) {
  auto pipe = Pipe::open();
  pipe.sink().configure_blocking(false);
  std::vector<std::byte> chunk(100000);
  std::int64_t total = 0;
  for (;;) {
    auto b = ByteBuffer::wrap(std::span<std::byte>(chunk));
    auto n = pipe.sink().write(b);
    if (n == 0) break;
    total += n;
  }
  EXPECT_GT(total, 0);
  auto selector = Selector::open();
  pipe.sink().register_with(selector, SelectionKey::OP_WRITE);
  EXPECT_EQ(selector.select_now(), 0);  // full: not writable
  std::vector<std::byte> sink(total);
  auto drain = ByteBuffer::wrap(std::span<std::byte>(sink));
  while (drain.has_remaining()) ASSERT_GT(pipe.source().read(drain), 0);
  EXPECT_EQ(selector.select_now(), 1);
}

}  // namespace
}  // namespace niox
