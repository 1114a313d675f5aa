// The response planner's output on a real socket, read by curl: what a browser or wrk will see
// once the transport serves it.
#include "blocking_http_server.hpp"
#include "support/run_command.hpp"
#include "temp_tree.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace niox::http {
namespace {

class CurlInteropTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::have_command("curl")) GTEST_SKIP() << "curl is not installed";
    big_.resize(3 << 20);
    for (std::size_t i = 0; i < big_.size(); ++i) big_[i] = static_cast<char>('A' + (i * 7) % 26);
    tree_.write("outside/secret.txt", "SECRET");
    tree_.write("root/index.html", "<h1>home</h1>\n");
    tree_.write("root/big.bin", big_);
    tree_.symlink("../outside/secret.txt", "root/escape.txt");
    root_ = std::make_unique<FileRoot>((tree_ / "root").string());
    responder_ = std::make_unique<StaticFileResponder>(*root_);
    server_ = std::make_unique<testing::BlockingHttpServer>(*responder_);
  }

  std::string curl(const std::string& args) {
    return test::run_command("curl -s --max-time 10 " + args + " 2>&1");
  }

  testing::TempTree tree_;
  std::string big_;
  std::unique_ptr<FileRoot> root_;
  std::unique_ptr<StaticFileResponder> responder_;
  std::unique_ptr<testing::BlockingHttpServer> server_;
};

TEST_F(CurlInteropTest, GetSmallAndLargeFiles) {
  EXPECT_EQ(curl(server_->url("/")), "<h1>home</h1>\n");
  const auto out = (tree_ / "got.bin").string();
  EXPECT_EQ(curl("-o " + out + " -w '%{http_code} %{size_download}' " + server_->url("/big.bin")),
            "200 " + std::to_string(big_.size()));
  std::ifstream in(out, std::ios::binary);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_TRUE(got.str() == big_);
}

TEST_F(CurlInteropTest, RangeHeadAndConditional) {
  EXPECT_EQ(curl("-r 10-19 " + server_->url("/big.bin")), big_.substr(10, 10));
  EXPECT_EQ(curl("-r 10-19 -o /dev/null -w '%{http_code}' " + server_->url("/big.bin")), "206");
  const auto head = curl("-I " + server_->url("/big.bin"));
  EXPECT_NE(head.find("HTTP/1.1 200 OK"), std::string::npos) << head;
  EXPECT_NE(head.find("Content-Length: " + std::to_string(big_.size())), std::string::npos) << head;
  EXPECT_NE(head.find("Content-Type: application/octet-stream"), std::string::npos) << head;
  // -z with a date in the future: "not modified since then" -> 304.
  EXPECT_EQ(curl("-z 'Fri, 01 Jan 2100 00:00:00 GMT' -o /dev/null -w '%{http_code}' " +
                 server_->url("/big.bin")),
            "304");
  EXPECT_EQ(curl("-r 99999999- -o /dev/null -w '%{http_code}' " + server_->url("/big.bin")), "416");
}

TEST_F(CurlInteropTest, KeepAliveReusesOneConnection) {
  const auto before = server_->connections();
  const auto out =
      curl("-o /dev/null -o /dev/null -o /dev/null -w '%{http_code}' " + server_->url("/") + " " +
           server_->url("/big.bin") + " " + server_->url("/"));
  EXPECT_EQ(out, "200200200");
  EXPECT_EQ(server_->connections() - before, 1);
}

TEST_F(CurlInteropTest, NothingOutsideTheRootIsServed) {
  for (const char* path :
       {"/../outside/secret.txt", "/%2e%2e/outside/secret.txt", "/..%2foutside%2fsecret.txt",
        "/escape.txt", "/%2e%2e%5coutside%5csecret.txt"}) {
    const auto out = curl("--path-as-is -w ' %{http_code}' " + server_->url(path));
    EXPECT_EQ(out.find("SECRET"), std::string::npos) << path;
    EXPECT_TRUE(out.ends_with(" 403") || out.ends_with(" 400") || out.ends_with(" 404"))
        << path << ": " << out;
  }
}

TEST_F(CurlInteropTest, PipelinedRequestsOnARawSocket) {
  FileDescriptor socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(socket.valid());
  const int fd = socket.get();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(server_->port());
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string requests =
      "GET / HTTP/1.1\r\nHost: h\r\n\r\n"
      "HEAD /big.bin HTTP/1.1\r\nHost: h\r\n\r\n"
      "GET /big.bin HTTP/1.1\r\nHost: h\r\nRange: bytes=-5\r\n\r\n"
      "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(::send(fd, requests.data(), requests.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(requests.size()));
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) got.append(buf, static_cast<std::size_t>(n));
  }
  socket.reset();
  std::vector<std::string> statuses;
  for (std::size_t pos = 0; (pos = got.find("HTTP/1.1 ", pos)) != std::string::npos; pos += 9) {
    statuses.push_back(got.substr(pos + 9, 3));
  }
  EXPECT_EQ(statuses, (std::vector<std::string>{"200", "200", "206", "200"}));
  EXPECT_NE(got.find(big_.substr(big_.size() - 5)), std::string::npos);
  EXPECT_EQ(got.find(big_.substr(0, 100)), std::string::npos);  // HEAD sent no body
}

}  // namespace
}  // namespace niox::http
