// niox-echo-server --tls-cert/--tls-key against openssl s_client, on each backend.
#include "echo_program.hpp"
#include "support/tls_peers.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <random>

#include <unistd.h>

namespace niox::test {
namespace {

class TlsEchoProgramTest : public EchoProgramTest {
 protected:
  void SetUp() override {
    EchoProgramTest::SetUp();
    if (IsSkipped()) return;
    if (!have_command("openssl")) GTEST_SKIP() << "openssl is not installed (scripts/deps)";
    port_ = start(NIOX_ECHO_SERVER_PROGRAM, {"--tls-cert", files_.cert, "--tls-key", files_.key});
    ASSERT_NE(port_, 0);
  }
  std::string s_client(const std::string& extra) const {
    return "openssl s_client -connect 127.0.0.1:" + std::to_string(port_) + " -CAfile " +
           files_.ca + " -verify_return_error -servername localhost " + extra;
  }
  TlsFiles files_;
  std::uint16_t port_ = 0;
};

TEST_P(TlsEchoProgramTest, OpensslClientNegotiatesTls13AndVerifies) {
  const std::string out = run_command(s_client("-brief </dev/null 2>&1"));
  EXPECT_NE(out.find("Protocol version: TLSv1.3"), std::string::npos) << out;
  EXPECT_NE(out.find("Verification: OK"), std::string::npos) << out;
}

TEST_P(TlsEchoProgramTest, OpensslClientGetsEveryByteBack) {
  int to_client[2];
  ASSERT_EQ(::pipe(to_client), 0);
  std::vector<std::string> argv{"/bin/sh", "-c", "exec " + s_client("-quiet 2>/dev/null")};
  ChildProcess client(argv, to_client[0]);
  ::close(to_client[0]);
  // Lines of random letters, under a pipe's capacity so that writing never waits for s_client.
  std::mt19937 rng(7);
  std::vector<std::string> lines;
  std::string input;
  for (int i = 0; i < 400; ++i) {
    std::string line(100, ' ');
    for (char& c : line) c = static_cast<char>('a' + rng() % 26);
    lines.push_back(line);
    input += line + "\n";
  }
  ASSERT_EQ(::write(to_client[1], input.data(), input.size()), static_cast<ssize_t>(input.size()));
  for (std::size_t i = 0; i < lines.size(); ++i) {
    auto got = client.read_line(std::chrono::seconds(20));
    ASSERT_TRUE(got) << "line " << i << " did not come back";
    ASSERT_EQ(*got, lines[i]) << "line " << i;
  }
  ::close(to_client[1]);
  client.signal(SIGTERM);
  client.wait();
}

TEST_P(TlsEchoProgramTest, PlaintextClientIsClosedAndTheServerGoesOn) {
  const std::string plain = run_command(
      "printf 'hello\\n' | curl -s --max-time 10 telnet://127.0.0.1:" + std::to_string(port_) +
      " 2>&1");
  EXPECT_EQ(plain.find("hello"), std::string::npos) << "a plaintext peer got an echo: " << plain;
  const std::string out = run_command(s_client("-brief </dev/null 2>&1"));
  EXPECT_NE(out.find("Protocol version: TLSv1.3"), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(Backends, TlsEchoProgramTest,
                         ::testing::Values(BackendKind::io_uring, BackendKind::epoll),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace niox::test
