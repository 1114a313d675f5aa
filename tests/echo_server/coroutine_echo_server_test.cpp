// niox-coroutine-echo-server end to end, on each backend: every byte of several concurrent
// clients comes back, a half-closed client gets its echo then end of stream, SIGTERM and SIGINT
// stop it with status 0 (also with connections open), and its command line fails as the other
// programs' do.
#ifdef NIOX_COROUTINE_ECHO_SERVER_PROGRAM

#include <niox/channels/server_socket_channel.hpp>

#include "echo_program.hpp"
#include "support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include <sys/socket.h>

namespace niox {
namespace {

class CoroutineEchoServer : public test::EchoProgramTest {};

TEST_P(CoroutineEchoServer, EchoesEveryByteOfConcurrentClientsAndStopsOnSigterm) {
  std::uint16_t port = start(NIOX_COROUTINE_ECHO_SERVER_PROGRAM, {"--threads", "2"});
  ASSERT_NE(port, 0);
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&, i] {
      try {
        auto data = test::pseudo_random_bytes(1 << 20, 31 + i);
        test::PeerSocket peer(InetSocketAddress::loopback_v4(port));
        if (peer.exchange(data, data.size()) == data) ++ok;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "client " << i << ": " << e.what();
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 8);
  server_->signal(SIGTERM);
  EXPECT_EQ(server_->wait(), 0);
}

TEST_P(CoroutineEchoServer, AHalfClosedClientGetsItsEchoThenEndOfStream) {
  std::uint16_t port = start(NIOX_COROUTINE_ECHO_SERVER_PROGRAM, {"--threads", "1"});
  ASSERT_NE(port, 0);
  auto data = test::pseudo_random_bytes(256 * 1024, 5);
  test::PeerSocket peer(InetSocketAddress::loopback_v4(port));
  std::vector<std::byte> echo;
  std::thread reader([&] {
    std::byte piece[16384];
    for (;;) {
      ssize_t k = ::recv(peer.fd(), piece, sizeof piece, 0);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) break;
      echo.insert(echo.end(), piece, piece + k);
    }
  });
  std::size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(peer.fd(), data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    ASSERT_GT(n, 0);
    sent += static_cast<std::size_t>(n);
  }
  ASSERT_EQ(::shutdown(peer.fd(), SHUT_WR), 0);
  reader.join();  // ends at the server's end of stream
  EXPECT_EQ(echo, data);
  server_->signal(SIGINT);
  EXPECT_EQ(server_->wait(), 0);
}

TEST_P(CoroutineEchoServer, StopsWithConnectionsStillOpen) {
  std::uint16_t port = start(NIOX_COROUTINE_ECHO_SERVER_PROGRAM, {"--threads", "2"});
  ASSERT_NE(port, 0);
  std::vector<std::unique_ptr<test::PeerSocket>> idle;
  for (int i = 0; i < 50; ++i) {
    idle.push_back(std::make_unique<test::PeerSocket>(InetSocketAddress::loopback_v4(port)));
  }
  auto one = test::pseudo_random_bytes(100, 1);
  EXPECT_EQ(idle.back()->exchange(one, one.size()), one);  // all accepted and served
  server_->signal(SIGTERM);
  EXPECT_EQ(server_->wait(), 0);  // the stop cancels every pending read
}

INSTANTIATE_TEST_SUITE_P(Backends, CoroutineEchoServer,
                         ::testing::Values(BackendKind::io_uring, BackendKind::epoll),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(CoroutineEchoServerErrors, UsageErrorsExitWithTwoAndHelpWithZero) {
  test::ChildProcess help({NIOX_COROUTINE_ECHO_SERVER_PROGRAM, "--help"});
  auto line = help.read_line();
  ASSERT_TRUE(line);
  EXPECT_EQ(line->rfind("usage: niox-coroutine-echo-server", 0), 0u) << *line;
  EXPECT_EQ(help.wait(), 0);
  test::ChildProcess bad({NIOX_COROUTINE_ECHO_SERVER_PROGRAM, "--port", "70000"});
  EXPECT_EQ(bad.wait(), 2);
  EXPECT_NE(bad.read_stderr().find("invalid --port '70000'"), std::string::npos);
  test::ChildProcess unknown({NIOX_COROUTINE_ECHO_SERVER_PROGRAM, "--verbose"});
  EXPECT_EQ(unknown.wait(), 2);
  EXPECT_NE(unknown.read_stderr().find("unknown argument '--verbose'"), std::string::npos);
}

TEST(CoroutineEchoServerErrors, AnAddressInUseExitsWithOne) {
  auto busy = ServerSocketChannel::open();
  busy.bind(InetSocketAddress::loopback_v4(0), 1);
  const auto port = busy.local_address()->inet().port();
  test::ChildProcess server({NIOX_COROUTINE_ECHO_SERVER_PROGRAM, "--port", std::to_string(port),
                             "--bind", "127.0.0.1", "--threads", "1"});
  EXPECT_EQ(server.wait(), 1);
  EXPECT_NE(server.read_stderr().find("cannot listen on 127.0.0.1:" + std::to_string(port)),
            std::string::npos);
}

}  // namespace
}  // namespace niox

#endif
