// End to end: the real niox-file-server program, on each backend, spoken to over loopback by a
// tiny client (and by curl where it is installed).
#include "support/backends.hpp"
#include "support/child_process.hpp"
#include "temp_tree.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace {

using niox::BackendKind;
using niox::http::testing::TempTree;
using niox::test::ChildProcess;

struct ServerCase {
  BackendKind kind;
  const char* name;
  friend std::ostream& operator<<(std::ostream& os, const ServerCase& c) { return os << c.name; }
};

// Sends `request` and reads until the server closes (or 5 s of silence).
std::string http_exchange(std::uint16_t port, const std::string& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    std::size_t sent = 0;
    while (sent < request.size()) {
      ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      sent += static_cast<std::size_t>(n);
    }
    char buf[65536];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0 || (n < 0 && errno == EINTR)) {
      if (n > 0) out.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

std::string get(const std::string& target, const std::string& extra = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: test\r\n" + extra + "Connection: close\r\n\r\n";
}

std::string status_line(const std::string& response) { return response.substr(0, response.find("\r\n")); }

std::string body_of(const std::string& response) {
  auto p = response.find("\r\n\r\n");
  return p == std::string::npos ? std::string() : response.substr(p + 4);
}

class FileServerProgramTest : public ::testing::TestWithParam<ServerCase> {
 protected:
  void SetUp() override {
    if (auto why = niox::test::backend_skip_reason(GetParam().kind)) GTEST_SKIP() << *why;
    root_.write("index.html", "<h1>home</h1>\n");
    root_.write("docs/a.txt", "0123456789abcdefghij");
    // A modification time well in the past: a date in the current second is not one a client
    // can have seen, and may be refused as a validator.
    std::filesystem::last_write_time(root_ / "docs/a.txt",
                                     std::filesystem::file_time_type::clock::now() - std::chrono::hours(1));
    big_.assign(300 * 1024, '\0');
    for (std::size_t i = 0; i < big_.size(); ++i) big_[i] = static_cast<char>('a' + (i * 7) % 26);
    root_.write("big.bin", big_);
    outside_.write("secret.txt", "TOP-SECRET-CONTENT");
    root_.symlink((outside_ / "secret.txt").string(), "leak.txt");
    start({"--root", root_.path().string()});
  }

  void start(std::vector<std::string> extra) {
    std::vector<std::string> argv{NIOX_FILE_SERVER_PROGRAM, "--port", "0", "--bind", "127.0.0.1",
                                  "--threads", "2", "--backend",
                                  std::string(niox::to_string(GetParam().kind))};
    argv.insert(argv.end(), extra.begin(), extra.end());
    server_ = std::make_unique<ChildProcess>(argv);
    auto line = server_->read_line();
    ASSERT_TRUE(line) << "no start-up line; stderr: " << server_->read_stderr();
    auto colon = line->find("127.0.0.1:");
    ASSERT_NE(colon, std::string::npos) << *line;
    port_ = static_cast<std::uint16_t>(std::stoi(line->substr(colon + 10)));
  }

  void TearDown() override {
    if (server_) {
      server_->signal(SIGTERM);
      EXPECT_EQ(server_->wait(), 0);
    }
  }

  TempTree root_;
  TempTree outside_;
  std::string big_;
  std::unique_ptr<ChildProcess> server_;
  std::uint16_t port_ = 0;
};

TEST_P(FileServerProgramTest, ServesAPageAndALargeFile) {
  auto r = http_exchange(port_, get("/"));
  EXPECT_EQ(status_line(r), "HTTP/1.1 200 OK");
  EXPECT_EQ(body_of(r), "<h1>home</h1>\n");
  auto big = http_exchange(port_, get("/big.bin"));
  EXPECT_EQ(status_line(big), "HTTP/1.1 200 OK");
  EXPECT_TRUE(body_of(big) == big_) << "large body differs, " << body_of(big).size() << " bytes";
}

TEST_P(FileServerProgramTest, HeadHasNoBody) {
  auto r = http_exchange(port_, "HEAD /docs/a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status_line(r), "HTTP/1.1 200 OK");
  EXPECT_NE(r.find("Content-Length: 20\r\n"), std::string::npos) << r;
  EXPECT_EQ(body_of(r), "");
}

TEST_P(FileServerProgramTest, RangeIs206) {
  auto r = http_exchange(port_, get("/docs/a.txt", "Range: bytes=10-14\r\n"));
  EXPECT_EQ(status_line(r), "HTTP/1.1 206 Partial Content");
  EXPECT_EQ(body_of(r), "abcde");
  auto big = http_exchange(port_, get("/big.bin", "Range: bytes=100000-\r\n"));
  EXPECT_EQ(status_line(big), "HTTP/1.1 206 Partial Content");
  EXPECT_TRUE(body_of(big) == big_.substr(100000));
}

TEST_P(FileServerProgramTest, NotModifiedIs304) {
  auto first = http_exchange(port_, get("/docs/a.txt"));
  auto p = first.find("Last-Modified: ");
  ASSERT_NE(p, std::string::npos) << first;
  auto date = first.substr(p + 15, first.find("\r\n", p) - p - 15);
  auto r = http_exchange(port_, get("/docs/a.txt", "If-Modified-Since: " + date + "\r\n"));
  EXPECT_EQ(status_line(r), "HTTP/1.1 304 Not Modified");
  EXPECT_EQ(body_of(r), "");
}

TEST_P(FileServerProgramTest, MissingIs404) {
  EXPECT_EQ(status_line(http_exchange(port_, get("/nothing-here"))), "HTTP/1.1 404 Not Found");
}

TEST_P(FileServerProgramTest, TraversalIsRefusedAndNothingOutsideIsRead) {
  for (const char* target : {"/../secret.txt", "/docs/../../secret.txt", "/%2e%2e/secret.txt",
                             "/docs/%2E%2E/%2e%2e/secret.txt", "/..%2fsecret.txt", "/leak.txt"}) {
    auto r = http_exchange(port_, get(target));
    auto status = status_line(r);
    EXPECT_TRUE(status == "HTTP/1.1 400 Bad Request" || status == "HTTP/1.1 403 Forbidden" ||
                status == "HTTP/1.1 404 Not Found")
        << target << ": " << status;
    EXPECT_EQ(r.find("TOP-SECRET"), std::string::npos) << target;
  }
  EXPECT_EQ(status_line(http_exchange(port_, get("/leak.txt"))), "HTTP/1.1 403 Forbidden");
}

TEST_P(FileServerProgramTest, OversizedHeadIs431AndCloses) {
  std::string req = "GET / HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n";
  auto r = http_exchange(port_, req);  // returns only once the server closed
  EXPECT_EQ(status_line(r), "HTTP/1.1 431 Request Header Fields Too Large");
}

TEST_P(FileServerProgramTest, PipelinedRequestsAnsweredInOrder) {
  std::string req = "GET /docs/a.txt HTTP/1.1\r\nHost: t\r\n\r\n"
                    "HEAD / HTTP/1.1\r\nHost: t\r\n\r\n"
                    "GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=0-9\r\n\r\n"
                    "GET /missing HTTP/1.1\r\nHost: t\r\n\r\n" +
                    get("/");
  auto r = http_exchange(port_, req);
  std::vector<std::string> statuses;
  for (auto p = r.find("HTTP/1.1 "); p != std::string::npos; p = r.find("HTTP/1.1 ", p + 1)) {
    statuses.push_back(r.substr(p + 9, 3));
  }
  EXPECT_EQ(statuses, (std::vector<std::string>{"200", "200", "206", "404", "200"})) << r;
  EXPECT_NE(r.find("0123456789abcdefghij"), std::string::npos);
  EXPECT_NE(r.find(big_.substr(0, 10)), std::string::npos);
  EXPECT_TRUE(r.ends_with("<h1>home</h1>\n"));
}

TEST_P(FileServerProgramTest, CurlFetchesAPage) {
  if (::access("/usr/bin/curl", X_OK) != 0) GTEST_SKIP() << "curl not installed";
  std::string cmd = "/usr/bin/curl -s --max-time 5 http://127.0.0.1:" + std::to_string(port_) +
                    "/docs/a.txt http://127.0.0.1:" + std::to_string(port_) + "/big.bin";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[65536];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0);
  EXPECT_TRUE(out == "0123456789abcdefghij" + big_) << out.size() << " bytes";
}

// Connects to the server on loopback; -1 on failure. Receives time out after `timeout_s`.
int connect_to(std::uint16_t port, int timeout_s) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads until end of stream; false if the receive timed out first (the server kept it open).
bool read_until_closed(int fd, std::string& out) {
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0) {
      return true;
    } else if (errno != EINTR) {
      return errno == ECONNRESET;
    }
  }
}

TEST_P(FileServerProgramTest, IdleKeepAliveConnectionIsClosed) {
  server_->signal(SIGTERM);
  ASSERT_EQ(server_->wait(), 0);
  start({"--root", root_.path().string(), "--idle-timeout", "0.5"});
  int fd = connect_to(port_, 10);
  ASSERT_GE(fd, 0);
  std::string req = "GET /docs/a.txt HTTP/1.1\r\nHost: t\r\n\r\n";  // keep-alive
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  std::string got;
  // The answer, then nothing more: the server closes the idle connection (long before the
  // 10 s receive timeout).
  EXPECT_TRUE(read_until_closed(fd, got)) << got;
  EXPECT_EQ(status_line(got), "HTTP/1.1 200 OK");
  EXPECT_TRUE(got.ends_with("0123456789abcdefghij")) << got;
  ::close(fd);
}

TEST_P(FileServerProgramTest, SlowReaderOfALargeFileIsNotCutOff) {
  // A large file to a client that reads slowly but steadily: no write completes for longer
  // than the idle timeout, yet the connection is not idle and the whole file arrives.
  std::string large(6 * 1024 * 1024, '\0');
  for (std::size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 31 + i / 4096);
  root_.write("large.bin", large);
  server_->signal(SIGTERM);
  ASSERT_EQ(server_->wait(), 0);
  start({"--root", root_.path().string(), "--idle-timeout", "0.3"});
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int small = 32 * 1024;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port_);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  std::string req = get("/large.bin");
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  std::string got;
  char buf[16 * 1024];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
    ::usleep(5000);  // ~3 MB/s at most: a few seconds for the file
  }
  ::close(fd);
  EXPECT_EQ(status_line(got), "HTTP/1.1 200 OK");
  EXPECT_TRUE(body_of(got) == large) << "got " << body_of(got).size() << " of " << large.size()
                                     << " body bytes";
}

TEST_P(FileServerProgramTest, SlowlorisClientIsClosed) {
  server_->signal(SIGTERM);
  ASSERT_EQ(server_->wait(), 0);
  start({"--root", root_.path().string(), "--idle-timeout", "0.5"});
  int fd = connect_to(port_, 10);
  ASSERT_GE(fd, 0);
  // One byte every 100 ms never leaves the connection idle, but the head is never complete:
  // the server closes it once the head has been pending for the timeout. 100 header bytes
  // would take 10 s.
  std::string head = "GET / HTTP/1.1\r\nHost: t\r\nX-Slow: " + std::string(100, 'a');
  bool closed = false;
  for (char c : head) {
    if (::send(fd, &c, 1, MSG_NOSIGNAL) != 1) {
      closed = true;  // reset by the server: closed
      break;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      char b;
      ssize_t n = ::recv(fd, &b, 1, 0);
      EXPECT_LE(n, 0) << "the server answered an incomplete request";
      closed = true;
      break;
    }
  }
  EXPECT_TRUE(closed) << "the connection stayed open for the whole slow request";
  ::close(fd);
}

INSTANTIATE_TEST_SUITE_P(Backends, FileServerProgramTest,
                         ::testing::Values(ServerCase{BackendKind::io_uring, "io_uring"},
                                           ServerCase{BackendKind::epoll, "epoll"}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(FileServerProgram, UsageErrorsExitWith2AndHelpWith0) {
  {
    ChildProcess help({NIOX_FILE_SERVER_PROGRAM, "--help"});
    auto line = help.read_line();
    ASSERT_TRUE(line);
    EXPECT_NE(line->find("niox-file-server"), std::string::npos) << *line;
    EXPECT_EQ(help.wait(), 0);
  }
  {
    ChildProcess bad({NIOX_FILE_SERVER_PROGRAM, "--port", "99999"});
    EXPECT_EQ(bad.wait(), 2);
    EXPECT_NE(bad.read_stderr().find("--port"), std::string::npos);
  }
  {
    TempTree t;
    ChildProcess missing({NIOX_FILE_SERVER_PROGRAM, "--root", (t / "absent").string(), "--port", "0",
                          "--bind", "127.0.0.1"});
    EXPECT_EQ(missing.wait(), 1);
    EXPECT_NE(missing.read_stderr().find("absent"), std::string::npos);
  }
}

}  // namespace
