// niox-file-server --tls-cert/--tls-key against curl and openssl s_client, on each backend.
#include "support/backends.hpp"
#include "support/child_process.hpp"
#include "support/tls_peers.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <memory>
#include <sstream>

namespace niox::test {
namespace {

class HttpsFileServerTest : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override {
    if (auto why = backend_skip_reason(GetParam())) GTEST_SKIP() << *why;
    if (!have_command("curl") || !have_command("openssl")) {
      GTEST_SKIP() << "curl or openssl is not installed (scripts/deps)";
    }
    big_.resize((2 << 20) + 123);
    for (std::size_t i = 0; i < big_.size(); ++i) big_[i] = static_cast<char>((i * 131) % 251);
    std::ofstream(root_ / "big.bin", std::ios::binary) << big_;
    std::ofstream(root_ / "index.html") << "<h1>tls</h1>\n";
    server_ = std::make_unique<ChildProcess>(std::vector<std::string>{
        NIOX_FILE_SERVER_PROGRAM, "--root", root_.path().string(), "--port", "0", "--bind",
        "127.0.0.1", "--threads", "2", "--backend", std::string(to_string(GetParam())),
        "--tls-cert", files_.cert, "--tls-key", files_.key});
    auto line = server_->read_line();
    ASSERT_TRUE(line) << "no start-up line; stderr: " << server_->read_stderr();
    ASSERT_NE(line->find("(https)"), std::string::npos) << *line;
    port_ = std::stoi(line->substr(line->find("127.0.0.1:") + 10));
  }
  void TearDown() override {
    if (server_) {
      server_->signal(SIGTERM);
      EXPECT_EQ(server_->wait(), 0);
    }
  }
  std::string url(const std::string& path) const {
    return "https://localhost:" + std::to_string(port_) + path;
  }
  std::string curl(const std::string& args, int* status = nullptr) const {
    return run_command("curl -sS --max-time 20 --cacert " + files_.ca + " " + args + " 2>&1",
                       status);
  }

  TlsFiles files_;
  TempDir root_;
  std::string big_;
  std::unique_ptr<ChildProcess> server_;
  int port_ = 0;
};

TEST_P(HttpsFileServerTest, CurlFetchesEveryByteOverTls13WithAlpn) {
  const std::string got = (root_ / "got.bin").string();
  EXPECT_EQ(
      curl("-o " + got + " -w '%{http_code} %{size_download} %{http_version}' " + url("/big.bin")),
      "200 " + std::to_string(big_.size()) + " 1.1");
  std::ifstream in(got, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  EXPECT_TRUE(content.str() == big_);
  const std::string verbose = curl("-v -o /dev/null " + url("/index.html"));
  EXPECT_NE(verbose.find("SSL connection using TLSv1.3"), std::string::npos) << verbose;
  EXPECT_NE(verbose.find("ALPN: server accepted http/1.1"), std::string::npos) << verbose;
  // Keep-alive: two files on one connection.
  EXPECT_EQ(curl(url("/index.html") + " " + url("/index.html")), "<h1>tls</h1>\n<h1>tls</h1>\n");
}

TEST_P(HttpsFileServerTest, OpensslClientGetsTheFileAndACleanClose) {
  const std::string request =
      "GET /big.bin HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n";
  const std::string response = run_command(
      "printf '" + request + "' | openssl s_client -connect 127.0.0.1:" + std::to_string(port_) +
      " -CAfile " + files_.ca + " -verify_return_error -servername localhost -quiet 2>/dev/null");
  const auto body_at = response.find("\r\n\r\n");
  ASSERT_NE(body_at, std::string::npos) << response.substr(0, 200);
  EXPECT_EQ(response.substr(0, 15), "HTTP/1.1 200 OK");
  EXPECT_TRUE(response.substr(body_at + 4) == big_) << response.size();
  // The server's close came with close_notify: s_client reports no unexpected EOF.
  const std::string errors = run_command(
      "printf '" + request + "' | openssl s_client -connect 127.0.0.1:" + std::to_string(port_) +
      " -CAfile " + files_.ca + " -servername localhost -quiet 2>&1 >/dev/null");
  EXPECT_EQ(errors.find("unexpected eof"), std::string::npos) << errors;
}

TEST_P(HttpsFileServerTest, UntrustedCertificateAndPlaintextAreRefused) {
  int status = 0;
  run_command("curl -s --max-time 20 -o /dev/null " + url("/index.html"), &status);
  EXPECT_EQ(status, 60) << "curl accepted a certificate of a CA it does not trust";
  const std::string plain = run_command(
      "curl -s --max-time 20 http://127.0.0.1:" + std::to_string(port_) + "/index.html", &status);
  EXPECT_NE(status, 0);
  EXPECT_EQ(plain.find("<h1>tls</h1>"), std::string::npos);
  EXPECT_EQ(curl(url("/index.html")), "<h1>tls</h1>\n") << "the server stopped serving";
}

INSTANTIATE_TEST_SUITE_P(Backends, HttpsFileServerTest,
                         ::testing::Values(BackendKind::io_uring, BackendKind::epoll),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace niox::test
