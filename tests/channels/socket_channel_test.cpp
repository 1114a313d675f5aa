#include <niox/channels/server_socket_channel.hpp>
#include <niox/channels/selector.hpp>
#include <niox/channels/socket_channel.hpp>

#include "support/channels_support.hpp"

#include <array>
#include <csignal>
#include <thread>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace niox {
namespace {

using test::tcp_pair;

class SocketChannelTest : public test::FdLeakCheck {};

std::string read_exactly(SocketChannel& ch, std::size_t n) {
  auto buf = ByteBuffer::allocate(n);
  while (buf.has_remaining()) {
    if (ch.read(buf) < 0) {
      break;
    }
  }
  buf.flip();
  return std::string(buf.string_view());
}

void write_all(SocketChannel& ch, std::string_view s) {
  auto b = ByteBuffer::wrap(s);
  ch.write(b);
  ASSERT_FALSE(b.has_remaining());
}

TEST_F(SocketChannelTest, ConnectAcceptEchoIpv4) {
  auto server = ServerSocketChannel::open();
  server.set_option(StandardSocketOptions::so_reuseaddr, true);
  server.bind(InetSocketAddress::loopback_v4(0), 16);
  auto addr = server.local_address();
  ASSERT_TRUE(addr.has_value());
  EXPECT_NE(addr->inet().port(), 0);
  auto client = SocketChannel::open(*addr);
  EXPECT_TRUE(client.is_connected());
  auto peer = server.accept();
  ASSERT_TRUE(peer.has_value());
  EXPECT_TRUE(peer->is_connected());
  EXPECT_TRUE(peer->is_blocking());
  EXPECT_TRUE(::fcntl(peer->native_handle(), F_GETFD) & FD_CLOEXEC);
  EXPECT_TRUE(::fcntl(client.native_handle(), F_GETFD) & FD_CLOEXEC);
  EXPECT_EQ(*client.remote_address(), *addr);
  EXPECT_EQ(*peer->remote_address(), *client.local_address());
  write_all(client, "ping");
  EXPECT_EQ(read_exactly(*peer, 4), "ping");
  write_all(*peer, "pong");
  EXPECT_EQ(read_exactly(client, 4), "pong");
}

TEST_F(SocketChannelTest, Ipv6Loopback) {
  if (!test::ipv6_loopback_available()) {
    GTEST_SKIP() << "no IPv6 loopback";
  }
  auto pair = tcp_pair(ProtocolFamily::inet6);
  EXPECT_TRUE(pair.client.remote_address()->inet().is_ipv6());
  write_all(pair.client, "six");
  EXPECT_EQ(read_exactly(pair.server, 3), "six");
}

TEST_F(SocketChannelTest, UnixDomain) {
  test::TempDir dir;
  UnixDomainSocketAddress addr((dir / "sock").string());
  auto server = ServerSocketChannel::open(ProtocolFamily::unix_domain);
  server.bind(addr);
  EXPECT_EQ(server.local_address()->unix_domain(), addr);
  auto client = SocketChannel::open(addr);
  auto peer = server.accept();
  ASSERT_TRUE(peer);
  EXPECT_EQ(client.remote_address()->unix_domain(), addr);
  write_all(client, "unix");
  EXPECT_EQ(read_exactly(*peer, 4), "unix");

  // Abstract names need no file.
  UnixDomainSocketAddress abstract(std::string("\0niox-test-abstract-", 20) +
                                   std::to_string(::getpid()));
  auto s2 = ServerSocketChannel::open(ProtocolFamily::unix_domain);
  s2.bind(abstract);
  auto c2 = SocketChannel::open(abstract);
  EXPECT_TRUE(s2.accept().has_value());
}

TEST_F(SocketChannelTest, Options) {
  auto pair = tcp_pair();
  auto& ch = pair.client;
  ch.set_option(StandardSocketOptions::tcp_nodelay, true);
  EXPECT_TRUE(ch.get_option(StandardSocketOptions::tcp_nodelay));
  ch.set_option(StandardSocketOptions::tcp_nodelay, false);
  EXPECT_FALSE(ch.get_option(StandardSocketOptions::tcp_nodelay));
  ch.set_option(StandardSocketOptions::so_keepalive, true);
  EXPECT_TRUE(ch.get_option(StandardSocketOptions::so_keepalive));
  ch.set_option(StandardSocketOptions::so_sndbuf, 65536);
  EXPECT_GE(ch.get_option(StandardSocketOptions::so_sndbuf), 65536);  // Linux doubles it
  ch.set_option(StandardSocketOptions::so_rcvbuf, 32768);
  EXPECT_GE(ch.get_option(StandardSocketOptions::so_rcvbuf), 32768);
  EXPECT_EQ(ch.get_option(StandardSocketOptions::so_linger), -1);
  ch.set_option(StandardSocketOptions::so_linger, 5);
  EXPECT_EQ(ch.get_option(StandardSocketOptions::so_linger), 5);
  ch.set_option(StandardSocketOptions::so_linger, -1);
  EXPECT_EQ(ch.get_option(StandardSocketOptions::so_linger), -1);
  auto server = ServerSocketChannel::open();
  server.set_option(StandardSocketOptions::so_reuseport, true);
  EXPECT_TRUE(server.get_option(StandardSocketOptions::so_reuseport));
  std::error_code ec;
  SocketChannel closed;
  closed.set_option(StandardSocketOptions::tcp_nodelay, true, ec);
  EXPECT_EQ(ec, std::errc::bad_file_descriptor);
  EXPECT_THROW(closed.get_option(StandardSocketOptions::so_rcvbuf), std::system_error);
}

TEST_F(SocketChannelTest, NonBlockingConnectAndFinish) {
  auto server = ServerSocketChannel::open();
  server.bind(InetSocketAddress::loopback_v4(0));
  auto client = SocketChannel::open();
  client.configure_blocking(false);
  EXPECT_THROW(client.finish_connect(), NoConnectionPendingException);
  bool now = client.connect(*server.local_address());
  auto selector = Selector::open();
  if (!now) {
    EXPECT_TRUE(client.is_connection_pending());
    client.register_with(selector, SelectionKey::OP_CONNECT);
    while (!client.finish_connect()) {
      selector.select(std::chrono::milliseconds(1000));
      selector.selected_keys().clear();
    }
  }
  EXPECT_TRUE(client.is_connected());
  EXPECT_THROW(client.connect(*server.local_address()), AlreadyConnectedException);
  auto peer = server.accept();
  ASSERT_TRUE(peer);
  auto b = ByteBuffer::allocate(8);
  EXPECT_EQ(client.read(b), 0);  // would block
}

TEST_F(SocketChannelTest, ConnectRefused) {
  std::uint16_t port;
  {
    auto s = ServerSocketChannel::open();
    s.bind(InetSocketAddress::loopback_v4(0));
    port = s.local_address()->inet().port();
  }
  auto client = SocketChannel::open();
  std::error_code ec;
  EXPECT_FALSE(client.connect(InetSocketAddress::loopback_v4(port), ec));
  EXPECT_EQ(ec, std::errc::connection_refused);
  EXPECT_FALSE(client.is_open());  // like Java, a failed connect closes the channel

  auto nb = SocketChannel::open();
  nb.configure_blocking(false);
  if (!nb.connect(InetSocketAddress::loopback_v4(port), ec) && !ec) {
    auto selector = Selector::open();
    nb.register_with(selector, SelectionKey::OP_CONNECT);
    EXPECT_EQ(selector.select(std::chrono::milliseconds(5000)), 1);
    EXPECT_TRUE(selector.selected_keys().front()->is_connectable());
    EXPECT_FALSE(nb.finish_connect(ec));
  }
  EXPECT_EQ(ec, std::errc::connection_refused);
  EXPECT_THROW(SocketChannel::open(InetSocketAddress::loopback_v4(port)), std::system_error);
}

TEST_F(SocketChannelTest, EndOfStreamAndHalfClose) {
  auto pair = tcp_pair();
  write_all(pair.client, "last words");
  pair.client.shutdown_output();
  EXPECT_EQ(read_exactly(pair.server, 10), "last words");
  auto b = ByteBuffer::allocate(4);
  EXPECT_EQ(pair.server.read(b), -1);
  EXPECT_EQ(pair.server.read(b), -1);
  // The other direction still works after the half-close.
  write_all(pair.server, "reply");
  EXPECT_EQ(read_exactly(pair.client, 5), "reply");
  pair.server.shutdown_input();
  pair.server.shutdown_output();
  b.clear();
  EXPECT_EQ(pair.client.read(b), -1);
}

TEST_F(SocketChannelTest, PeerResetReportsConnReset) {
  auto pair = tcp_pair();
  write_all(pair.client, "x");
  ASSERT_EQ(read_exactly(pair.server, 1), "x");
  pair.client.set_option(StandardSocketOptions::so_linger, 0);
  pair.client.close();  // sends RST
  auto b = ByteBuffer::allocate(16);
  std::error_code ec;
  EXPECT_EQ(pair.server.read(b, ec), 0);
  EXPECT_EQ(ec, std::errc::connection_reset);
  // Writes after the reset fail (EPIPE) and do not kill the process.
  auto w = ByteBuffer::wrap(std::string_view("after"));
  EXPECT_EQ(pair.server.write(w, ec), 0);
  EXPECT_TRUE(ec == std::errc::broken_pipe || ec == std::errc::connection_reset) << ec.message();
}

TEST_F(SocketChannelTest, EpipeWithoutSigpipe) {
  // Default disposition: a SIGPIPE would end this process.
  auto old = std::signal(SIGPIPE, SIG_DFL);
  auto pair = tcp_pair();
  pair.server.close();
  std::vector<std::byte> chunk(65536);
  std::error_code ec;
  for (int i = 0; i < 1000 && !ec; ++i) {
    std::array<ByteBuffer, 2> bufs{ByteBuffer::wrap(std::span<std::byte>(chunk)),
                                   ByteBuffer::wrap(std::span<std::byte>(chunk))};
    pair.client.write(bufs, ec);
  }
  EXPECT_TRUE(ec == std::errc::broken_pipe || ec == std::errc::connection_reset) << ec.message();
  auto one = ByteBuffer::wrap(std::string_view("x"));
  EXPECT_THROW(pair.client.write(one), std::system_error);
  std::signal(SIGPIPE, old);
}

TEST_F(SocketChannelTest, ScatterReadHeaderThenBody) {
  auto pair = tcp_pair();
  auto body = test::random_bytes(100000, 9);
  std::thread writer([&] {
    auto header = ByteBuffer::allocate(4);
    header.put_int(static_cast<std::int32_t>(body.size())).flip();
    std::array<ByteBuffer, 2> out{header, ByteBuffer::wrap(std::span<std::byte>(body))};
    pair.client.write(out);
  });
  std::array<ByteBuffer, 2> in{ByteBuffer::allocate(4), ByteBuffer::allocate(body.size())};
  while (in[1].has_remaining()) {
    ASSERT_GT(pair.server.read(in), 0);
  }
  writer.join();
  EXPECT_EQ(in[0].flip().get_int(), 100000);
  EXPECT_EQ(std::memcmp(in[1].array_view().data(), body.data(), body.size()), 0);
}

TEST_F(SocketChannelTest, MoveKeepsDescriptorAndFromNative) {
  auto pair = tcp_pair();
  int fd = pair.client.native_handle();
  SocketChannel moved(std::move(pair.client));
  EXPECT_FALSE(pair.client.is_open());
  EXPECT_EQ(moved.native_handle(), fd);
  int raw = moved.release();
  EXPECT_EQ(raw, fd);
  auto adopted = SocketChannel::from_native(raw);
  EXPECT_TRUE(adopted.is_connected());
  write_all(adopted, "ok");
  EXPECT_EQ(read_exactly(pair.server, 2), "ok");
}

// A moved-from channel owns nothing: dropping it leaves the descriptor to the channel it moved
// to, and move assignment closes what the target owned before.
TEST_F(SocketChannelTest, MovedFromChannelOwnsNothing) {
  auto pair = tcp_pair();
  const int before = test::open_fd_count();
  {
    SocketChannel moved(std::move(pair.client));
    EXPECT_EQ(pair.client.native_handle(), -1);
    { SocketChannel emptied(std::move(pair.client)); }
    pair.client.close();
    EXPECT_EQ(test::open_fd_count(), before);
    write_all(moved, "ok");
    EXPECT_EQ(read_exactly(pair.server, 2), "ok");
    SocketChannel target = SocketChannel::open();
    EXPECT_EQ(test::open_fd_count(), before + 1);
    target = std::move(moved);
    EXPECT_EQ(test::open_fd_count(), before);
    EXPECT_FALSE(moved.is_open());
    write_all(target, "ko");
    EXPECT_EQ(read_exactly(pair.server, 2), "ko");
  }
  EXPECT_EQ(test::open_fd_count(), before - 1);
}

// Accepting at the descriptor limit: EMFILE every time, as an error, until a descriptor frees.
TEST_F(SocketChannelTest, AcceptReportsEmfileAndRecovers) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(60);  // a hang in the child ends it (SIGALRM), and the parent reports a failure
    int code = 0;
    try {
      auto server = ServerSocketChannel::open();
      server.bind(InetSocketAddress::loopback_v4(0), 8);
      std::vector<SocketChannel> clients;
      for (int i = 0; i < 4; ++i) {
        clients.push_back(SocketChannel::open(*server.local_address()));
      }
      {
        // Sanitizer runtimes check a virtual call's target the first time they see it, with a
        // pipe; at the descriptor limit that check itself would fail. Make those calls once now.
        std::error_code warm(EMFILE, std::system_category());
        std::system_error e(warm, "warm-up");
        if (warm != std::errc::too_many_files_open || e.code() != warm) ::_exit(9);
        auto first = server.accept();
        auto b = ByteBuffer::wrap(std::string_view("?"));
        clients.front().write(b);  // the first queued connection is the first accepted
        auto r = ByteBuffer::allocate(1);
        if (!first || first->read(r) != 1) ::_exit(8);
        clients.erase(clients.begin());
      }
      // Fill every descriptor below the new limit.
      FileDescriptor highest(::fcntl(server.native_handle(), F_DUPFD_CLOEXEC, 0));
      rlimit lim{static_cast<rlim_t>(highest.get() + 2), static_cast<rlim_t>(highest.get() + 2)};
      highest.reset();
      if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) ::_exit(10);
      std::vector<FileDescriptor> fillers;
      for (;;) {
        FileDescriptor fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        if (!fd) break;
        fillers.push_back(std::move(fd));
      }
      if (errno != EMFILE || fillers.empty()) ::_exit(11);
      std::error_code ec;
      for (int i = 0; i < 3; ++i) {
        auto got = server.accept(ec);  // a clear error each time, never a hang or a spin
        if (got || ec != std::errc::too_many_files_open) ::_exit(12);
      }
      try {
        server.accept();
        ::_exit(13);
      } catch (const std::system_error& e) {
        if (e.code() != std::errc::too_many_files_open) ::_exit(14);
      }
      fillers.pop_back();
      auto got = server.accept(ec);
      if (!got || ec) ::_exit(15);
      fillers.clear();
      // The recovered connection works.
      auto b = ByteBuffer::wrap(std::string_view("!"));
      clients[0].write(b);
      auto r = ByteBuffer::allocate(1);
      if (got->read(r) != 1) ::_exit(16);
    } catch (...) {
      code = 20;
    }
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(SocketChannelTest, NonBlockingAcceptReturnsNothing) {
  auto server = ServerSocketChannel::open();
  server.bind(InetSocketAddress::loopback_v4(0));
  server.configure_blocking(false);
  EXPECT_FALSE(server.accept().has_value());
  ServerSocketChannel closed;
  std::error_code ec;
  EXPECT_FALSE(closed.accept(ec).has_value());
  EXPECT_EQ(ec, std::errc::bad_file_descriptor);
}

}  // namespace
}  // namespace niox
