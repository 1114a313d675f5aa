// niox-echo-server: its command line, and the real program end to end on each backend.
#include "echo_server.hpp"

#include <niox/channels/server_socket_channel.hpp>

#include "echo_program.hpp"
#include "support/listening_sockets.hpp"
#include "support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <thread>

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace niox;

namespace {

TEST(EchoServerArgs, DefaultsAndEveryOption) {
  auto r = echo::parse_args({});
  ASSERT_TRUE(r.options);
  EXPECT_EQ(r.options->port, 7007);
  EXPECT_EQ(r.options->backend, BackendKind::automatic);
  r = echo::parse_args({"--port", "0", "--bind", "::1", "--threads=3", "--backend", "epoll"});
  ASSERT_TRUE(r.options) << r.error;
  EXPECT_EQ(r.options->port, 0);
  EXPECT_EQ(r.options->bind, "::1");
  EXPECT_EQ(r.options->threads, 3u);
  EXPECT_EQ(r.options->backend, BackendKind::epoll);
  EXPECT_TRUE(echo::parse_args({"--help"}).help);
  EXPECT_FALSE(r.options->reuseport);
  r = echo::parse_args({"--reuseport", "--threads", "2"});
  ASSERT_TRUE(r.options) << r.error;
  EXPECT_TRUE(r.options->reuseport);
}

TEST(EchoServerArgs, RejectsBadValuesWithAReason) {
  for (auto args : std::vector<std::vector<std::string>>{{"--port", "70000"},
                                                         {"--port", "12x"},
                                                         {"--threads", "5000"},
                                                         {"--backend", "kqueue"},
                                                         {"--port"},
                                                         {"--frobnicate"}}) {
    auto r = echo::parse_args(args);
    EXPECT_FALSE(r.options) << args[0];
    EXPECT_FALSE(r.error.empty()) << args[0];
  }
}

// The program as a child process.
test::ChildProcess program(std::vector<std::string> args) {
  args.insert(args.begin(), NIOX_ECHO_SERVER_PROGRAM);
  return test::ChildProcess(args);
}
// Its first line of stdout ("" on EOF or after 20 s).
std::string first_line(test::ChildProcess& p) {
  return p.read_line(std::chrono::seconds(20)).value_or(std::string());
}
// Exit status after `sig` (0: none sent), or -1 if it did not end within 20 s.
int finish(test::ChildProcess& p, int sig) {
  if (sig) p.signal(sig);
  return p.wait(std::chrono::seconds(20)).value_or(-1);
}

class EchoServerProgram : public test::EchoProgramTest {};

TEST_P(EchoServerProgram, EchoesEveryByteAndStopsCleanlyOnSigterm) {
  std::uint16_t port = start(NIOX_ECHO_SERVER_PROGRAM, {"--threads", "2"});
  ASSERT_NE(port, 0);
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&, i] {
      try {
        auto data = test::pseudo_random_bytes(1 << 20, 17 + i);
        test::PeerSocket peer(InetSocketAddress::loopback_v4(port));
        if (peer.exchange(data, data.size()) == data) ++ok;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "client " << i << ": " << e.what();
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 4);
  EXPECT_EQ(finish(*server_, SIGTERM), 0);
}

// --reuseport: each of the 4 loops listens on the port itself, and every connection, wherever
// the kernel sent it, gets its bytes back.
TEST_P(EchoServerProgram, ReuseportListensOnEveryLoopAndEchoesEveryConnection) {
  std::uint16_t port = start(NIOX_ECHO_SERVER_PROGRAM, {"--threads", "4", "--reuseport"});
  ASSERT_NE(port, 0);
  EXPECT_EQ(test::listening_sockets_on(port), 4);
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&, i] {
      try {
        for (int c = 0; c < 16; ++c) {
          auto data = test::pseudo_random_bytes(64 << 10, 100 * i + c);
          test::PeerSocket peer(InetSocketAddress::loopback_v4(port));
          if (peer.exchange(data, data.size()) == data) ++ok;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "client " << i << ": " << e.what();
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 64);
  EXPECT_EQ(finish(*server_, SIGTERM), 0);
  EXPECT_EQ(test::listening_sockets_on(port), 0);
}

TEST_P(EchoServerProgram, AnAddressInUseIsAnErrorWithStatusOne) {
  auto busy = ServerSocketChannel::open();
  busy.bind(InetSocketAddress::loopback_v4(0), 1);
  const auto port = busy.local_address()->inet().port();
  auto server = program({"--port", std::to_string(port), "--bind", "127.0.0.1", "--threads", "1",
                         "--backend", std::string(to_string(GetParam()))});
  EXPECT_EQ(finish(server, 0), 1);
}

INSTANTIATE_TEST_SUITE_P(Backends, EchoServerProgram,
                         ::testing::Values(BackendKind::io_uring, BackendKind::epoll),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(EchoServerProgramErrors, UsageErrorsExitWithTwoAndHelpWithZero) {
  auto bad = program({"--port", "nope"});
  EXPECT_EQ(finish(bad, 0), 2);
  auto help = program({"--help"});
  EXPECT_NE(first_line(help).find("usage: niox-echo-server"), std::string::npos);
  EXPECT_EQ(finish(help, 0), 0);
}

}  // namespace

// ---- Half-closure, Unix-domain sockets, --bind names ------------------------------------------

namespace {

// A client that stalls — writes without reading until its writes block, so both directions are
// full — then shuts its output down and reads: the echo is every byte it sent, then EOF. Whole
// blocks make the server's last reads of the stream full ones, so the end of the stream comes in
// the same read batch as up to a megabyte of data still to be echoed (what a server that closes
// on EOF loses). Several connections in a row, since how much is queued then varies.
TEST_P(EchoServerProgram, HalfCloseAfterAStallEchoesEveryByteThenEof) {
  std::uint16_t port = start(NIOX_ECHO_SERVER_PROGRAM, {"--threads", "1"});
  ASSERT_NE(port, 0);
  const auto data = test::pseudo_random_bytes(48u << 20, 99);
  // The client writes in whole 64 KiB blocks, as a program writing blocks does: the one its
  // writes blocked in is completed (reading meanwhile) before the output is shut down.
  constexpr std::size_t block = 64 * 1024;
  for (int run = 0; run < 6; ++run) {
    test::PeerSocket peer(InetSocketAddress::loopback_v4(port));
    std::size_t sent = 0;
    std::vector<std::byte> echo;
    auto read_some = [&](int flags) {
      std::byte piece[4096];
      ssize_t k = ::recv(peer.fd(), piece, sizeof piece, flags);
      if (k > 0) echo.insert(echo.end(), piece, piece + k);
      return k;
    };
    bool stalled = false;
    while (sent < data.size() && (!stalled || sent % block != 0)) {
      ssize_t n = ::send(peer.fd(), data.data() + sent,
                         std::min<std::size_t>(data.size() - sent, block - sent % block),
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      ASSERT_TRUE(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) << std::strerror(errno);
      if (!stalled) {
        pollfd p{peer.fd(), POLLOUT, 0};
        stalled = ::poll(&p, 1, 500) == 0;  // blocked: the server no longer reads
      } else {
        // Finishing the block: read (in small pieces, as a slow reader does) to let it go out.
        pollfd p{peer.fd(), POLLIN | POLLOUT, 0};
        ::poll(&p, 1, 1000);
        if (p.revents & POLLIN) {
          ASSERT_GE(read_some(MSG_DONTWAIT), 0) << std::strerror(errno);
        }
      }
    }
    ASSERT_TRUE(stalled) << "the client's writes never blocked";
    ASSERT_EQ(::shutdown(peer.fd(), SHUT_WR), 0);
    for (;;) {
      ssize_t k = read_some(0);
      if (k < 0 && errno == EINTR) continue;
      ASSERT_GE(k, 0) << "run " << run << ": " << std::strerror(errno);
      if (k == 0) break;
    }
    auto expected = std::span<const std::byte>(data).first(sent);
    ASSERT_EQ(echo.size(), sent) << "run " << run << ": the echo is short";
    EXPECT_EQ(test::fnv1a(echo), test::fnv1a(expected)) << "run " << run;
  }
  server_->signal(SIGTERM);
  EXPECT_EQ(server_->wait(), 0);
}

// The socket file a Unix-domain server bound is removed when it stops, so the same command
// starts again.
TEST_P(EchoServerProgram, UnixSocketPathIsRemovedOnStopAndTheServerStartsAgain) {
  test::TempDir dir;
  const std::string path = (dir / "echo.sock").string();
  for (int round = 0; round < 2; ++round) {
    test::ChildProcess server({NIOX_ECHO_SERVER_PROGRAM, "--bind", "unix:" + path, "--threads", "1",
                               "--backend", std::string(to_string(GetParam()))});
    std::string line = first_line(server);
    if (line.rfind("listening on unix:" + path, 0) != 0) {
      server.signal(SIGTERM);
      server.wait();
      FAIL() << "round " << round << ": first line '" << line
             << "', stderr: " << server.read_stderr();
    }
    {
      test::PeerSocket peer{SocketAddress(UnixDomainSocketAddress(path))};
      auto hello = test::text_bytes("hello over a unix socket");
      auto back = peer.exchange(hello, hello.size());
      EXPECT_EQ(test::fnv1a(back), test::fnv1a(hello));
    }
    server.signal(SIGTERM);
    EXPECT_EQ(server.wait(), 0);
    EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(path)))
        << "round " << round;
  }
}

// A path the server did not bind (here a regular file in the way) is never removed.
TEST_P(EchoServerProgram, APathItDidNotBindIsLeftAlone) {
  test::TempDir dir;
  const std::string path = (dir / "not-a-socket").string();
  { std::ofstream(path) << "keep me\n"; }
  test::ChildProcess server({NIOX_ECHO_SERVER_PROGRAM, "--bind", "unix:" + path, "--threads", "1",
                             "--backend", std::string(to_string(GetParam()))});
  EXPECT_EQ(server.wait(), 1);
  EXPECT_NE(server.read_stderr().find("cannot listen on unix:" + path), std::string::npos);
  std::ifstream in(path);
  std::string content;
  std::getline(in, content);
  EXPECT_EQ(content, "keep me");
}

// A --bind name that does not resolve says so, with the resolver's reason.
TEST(EchoServerProgramErrors, AnUnresolvableBindNameSaysItDoesNotResolve) {
  const char* host = "no.such.host.invalid";
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host, nullptr, &hints, &res);
  if (rc == 0) {
    ::freeaddrinfo(res);
    GTEST_SKIP() << host << " resolves on this machine";
  }
  test::ChildProcess server({NIOX_ECHO_SERVER_PROGRAM, "--bind", host, "--port", "0"});
  EXPECT_EQ(server.wait(), 2);
  auto err = server.read_stderr();
  EXPECT_NE(err.find("cannot resolve '" + std::string(host) + "': " + ::gai_strerror(rc)),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("Cannot assign requested address"), std::string::npos) << err;
}

// ---- examples/nio_echo_server ----------------------------------------------------------------

#ifdef NIOX_NIO_ECHO_SERVER_PROGRAM
TEST(NioEchoServerProgram, HelpPrintsUsageAndExitsZero) {
  test::ChildProcess p({NIOX_NIO_ECHO_SERVER_PROGRAM, "--help"});
  EXPECT_EQ(first_line(p).rfind("usage: nio_echo_server", 0), 0u);
  EXPECT_EQ(p.wait(), 0);
  EXPECT_EQ(p.read_stderr(), "");
}

TEST(NioEchoServerProgram, BadValuesAreUsageErrorsThatNameTheProblem) {
  for (auto args : std::vector<std::vector<std::string>>{{"--port", "70000"},
                                                         {"--port", "nope"},
                                                         {"--port"},
                                                         {"--bind", ""},
                                                         {"7007"},
                                                         {"--frobnicate"}}) {
    std::vector<std::string> argv{NIOX_NIO_ECHO_SERVER_PROGRAM};
    argv.insert(argv.end(), args.begin(), args.end());
    test::ChildProcess p(argv);
    EXPECT_EQ(p.wait(), 2) << args[0];
    auto err = p.read_stderr();
    EXPECT_EQ(err.rfind("nio_echo_server: ", 0), 0u) << err;
    if (args[0] == "--port" && args.size() == 2) {
      EXPECT_NE(err.find("invalid --port '" + args[1] + "'"), std::string::npos) << err;
    }
  }
}

TEST(NioEchoServerProgram, ServesOnTheGivenAddressAndStopsOnSigterm) {
  test::ChildProcess p({NIOX_NIO_ECHO_SERVER_PROGRAM, "--port", "0", "--bind", "127.0.0.1"});
  std::string line = first_line(p);
  auto colon = line.rfind(':');
  ASSERT_EQ(line.rfind("echo server on 127.0.0.1:", 0), 0u) << line;
  auto port = static_cast<std::uint16_t>(std::stoi(line.substr(colon + 1)));
  {
    test::PeerSocket peer(InetSocketAddress::loopback_v4(port));
    auto data = test::pseudo_random_bytes(300000, 5);
    EXPECT_EQ(test::fnv1a(peer.exchange(data, data.size())), test::fnv1a(data));
  }
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0);
}
#endif

}  // namespace
