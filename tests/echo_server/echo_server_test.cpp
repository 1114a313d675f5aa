// niox-echo-server: its command line, and the real program end to end on each backend.
#include "echo_server.hpp"

#include "support/backends.hpp"
#include "support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

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

// The program, its stdout on a pipe.
class Program {
 public:
  explicit Program(std::vector<std::string> args) {
    args.insert(args.begin(), NIOX_ECHO_SERVER_PROGRAM);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::system_error(errno, std::system_category());
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    stdout_ = out[0];
    if (rc != 0) {
      ::close(stdout_);
      throw std::system_error(rc, std::system_category(), "posix_spawn");
    }
  }
  ~Program() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (stdout_ >= 0) ::close(stdout_);
  }
  // The first line of stdout ("" on EOF or after 20 s).
  std::string first_line() {
    std::string line;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{stdout_, POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      char c;
      if (::read(stdout_, &c, 1) != 1) break;
      if (c == '\n') return line;
      line += c;
    }
    return line;
  }
  // Exit status after `sig` (0: none sent), or -1 if it did not end within 20 s.
  int finish(int sig) {
    if (sig) ::kill(pid_, sig);
    for (int i = 0; i < 2000; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int stdout_ = -1;
};

std::uint16_t port_in(const std::string& line) {
  // "listening on 127.0.0.1:PORT (backend ...)"
  auto space = line.find(' ', std::string("listening on ").size());
  auto colon = line.rfind(':', space);
  if (line.rfind("listening on ", 0) != 0 || colon == std::string::npos) return 0;
  return static_cast<std::uint16_t>(std::stoi(line.substr(colon + 1, space - colon - 1)));
}

class EchoServerProgram : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override {
    if (auto why = test::backend_skip_reason(GetParam())) GTEST_SKIP() << *why;
  }
};

TEST_P(EchoServerProgram, EchoesEveryByteAndStopsCleanlyOnSigterm) {
  Program server({"--port", "0", "--bind", "127.0.0.1", "--threads", "2", "--backend",
                  std::string(to_string(GetParam()))});
  std::string line = server.first_line();
  std::uint16_t port = port_in(line);
  ASSERT_NE(port, 0) << "unexpected first line: '" << line << "'";
  EXPECT_NE(line.find(std::string(to_string(GetParam()))), std::string::npos) << line;
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
  EXPECT_EQ(server.finish(SIGTERM), 0);
}

TEST_P(EchoServerProgram, AnAddressInUseIsAnErrorWithStatusOne) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_storage ss{};
  socklen_t len = SocketAddress(InetSocketAddress::loopback_v4(0)).to_native(ss);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&ss), len), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  auto port = InetSocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len).port();
  Program server({"--port", std::to_string(port), "--bind", "127.0.0.1", "--threads", "1",
                  "--backend", std::string(to_string(GetParam()))});
  EXPECT_EQ(server.finish(0), 1);
  ::close(fd);
}

INSTANTIATE_TEST_SUITE_P(Backends, EchoServerProgram,
                         ::testing::Values(BackendKind::io_uring, BackendKind::epoll),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(EchoServerProgramErrors, UsageErrorsExitWithTwoAndHelpWithZero) {
  Program bad({"--port", "nope"});
  EXPECT_EQ(bad.finish(0), 2);
  Program help({"--help"});
  EXPECT_NE(help.first_line().find("usage: niox-echo-server"), std::string::npos);
  EXPECT_EQ(help.finish(0), 0);
}

}  // namespace
