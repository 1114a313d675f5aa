// End to end: the real niox-file-server program, on each backend, spoken to over loopback by a
// tiny client (and by curl where it is installed).
#include "http_fields.hpp"
#include "support/backends.hpp"
#include "support/blocking_sockets.hpp"
#include "support/child_process.hpp"
#include "support/listening_sockets.hpp"

#include <niox/base/file_descriptor.hpp>
#include "temp_tree.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using niox::BackendKind;
using niox::http::testing::TempTree;
using niox::test::ChildProcess;
using niox::test::send_all;

struct ServerCase {
  BackendKind kind;
  const char* name;
  friend std::ostream& operator<<(std::ostream& os, const ServerCase& c) { return os << c.name; }
};

// Sends `request` and reads until the server closes (or 5 s of silence).
std::string http_exchange(std::uint16_t port, const std::string& request) {
  niox::FileDescriptor socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int fd = socket.get();
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::string out;
  if (niox::test::connect_blocking(fd, reinterpret_cast<sockaddr*>(&a), sizeof a, 5000) == 0) {
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
  return out;
}

std::string get(const std::string& target, const std::string& extra = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: test\r\n" + extra + "Connection: close\r\n\r\n";
}

std::string status_line(const std::string& response) {
  return response.substr(0, response.find("\r\n"));
}

std::string body_of(const std::string& response) {
  auto p = response.find("\r\n\r\n");
  return p == std::string::npos ? std::string() : response.substr(p + 4);
}

// The value of a response field ("Location"), empty when absent. Names as the server spells them.
std::string field_of(const std::string& response, const std::string& name) {
  auto head = response.substr(0, response.find("\r\n\r\n"));
  auto p = head.find("\r\n" + name + ": ");
  if (p == std::string::npos) return {};
  p += name.size() + 4;
  return head.substr(p, head.find("\r\n", p) - p);
}

// Whether `response` holds a whole head and as many body bytes as its Content-Length says.
bool response_complete(const std::string& response) {
  auto end = response.find("\r\n\r\n");
  auto length = field_of(response, "Content-Length");
  return end != std::string::npos && !length.empty() &&
         response.size() >= end + 4 + std::stoul(length);
}

// The kernel's figures for a process, from /proc/<pid>: resident memory in KiB, and the
// targets of its open descriptors ("/tmp/x/a.bin (deleted)").
long vm_rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

std::vector<std::string> open_files(pid_t pid) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::error_code rec;
    auto target = std::filesystem::read_symlink(e.path(), rec);
    if (!rec) out.push_back(target.string());
  }
  return out;
}

bool holds_open(pid_t pid, const std::filesystem::path& path) {
  for (const auto& f : open_files(pid)) {
    if (f == path.string() || f == path.string() + " (deleted)") return true;
  }
  return false;
}

// Established IPv4 TCP connections whose local port is `port` (the server's side), and how
// many of them hold bytes the server has not read yet (rx_queue of /proc/net/tcp).
struct ServerSideSockets {
  std::size_t established = 0;
  std::size_t with_unread_bytes = 0;
};

ServerSideSockets server_side_sockets(std::uint16_t port) {
  ServerSideSockets out;
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // the column names
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues;
    fields >> slot >> local >> remote >> state >> queues;
    auto colon = local.find(':');
    if (colon == std::string::npos || state != "01" ||
        std::stoul(local.substr(colon + 1), nullptr, 16) != port) {
      continue;
    }
    ++out.established;
    if (std::stoul(queues.substr(queues.find(':') + 1), nullptr, 16) != 0) ++out.with_unread_bytes;
  }
  return out;
}

// Reads one response (head and Content-Length body) from a blocking socket.
std::string read_response(int fd) {
  std::string out;
  char buf[4096];
  while (!response_complete(out)) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// Waits up to `limit` for `done()`; returns its last answer.
template <class F>
bool eventually(F done, std::chrono::seconds limit = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

class FileServerProgramTest : public ::testing::TestWithParam<ServerCase> {
 protected:
  void SetUp() override {
    if (auto why = niox::test::backend_skip_reason(GetParam().kind)) GTEST_SKIP() << *why;
    root_.write("index.html", "<h1>home</h1>\n");
    root_.write("docs/a.txt", "0123456789abcdefghij");
    // A modification time well in the past: a date in the current second is not one a client
    // can have seen, and may be refused as a validator.
    std::filesystem::last_write_time(
        root_ / "docs/a.txt",
        std::filesystem::file_time_type::clock::now() - std::chrono::hours(1));
    big_.assign(300 * 1024, '\0');
    for (std::size_t i = 0; i < big_.size(); ++i) big_[i] = static_cast<char>('a' + (i * 7) % 26);
    root_.write("big.bin", big_);
    outside_.write("secret.txt", "TOP-SECRET-CONTENT");
    root_.symlink((outside_ / "secret.txt").string(), "leak.txt");
    start({"--root", root_.path().string()});
  }

  void start(std::vector<std::string> extra) {
    std::vector<std::string> argv{NIOX_FILE_SERVER_PROGRAM,
                                  "--port",
                                  "0",
                                  "--bind",
                                  "127.0.0.1",
                                  "--threads",
                                  "2",
                                  "--backend",
                                  std::string(niox::to_string(GetParam().kind))};
    argv.insert(argv.end(), extra.begin(), extra.end());
    server_ = std::make_unique<ChildProcess>(argv);
    auto line = server_->read_line();
    ASSERT_TRUE(line) << "no start-up line; stderr: " << server_->read_stderr();
    banner_ = *line;
    ASSERT_NE(line->find(" listening on "), std::string::npos) << *line;
    if (auto colon = line->find("127.0.0.1:"); colon != std::string::npos) {
      port_ = static_cast<std::uint16_t>(std::stoi(line->substr(colon + 10)));
    }
  }

  void restart(std::vector<std::string> extra) {
    server_->signal(SIGTERM);
    ASSERT_EQ(server_->wait(), 0);
    extra.insert(extra.begin(), {"--root", root_.path().string()});
    start(extra);
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
  std::string banner_;
};

TEST_P(FileServerProgramTest, ServesAPageAndALargeFile) {
  auto r = http_exchange(port_, get("/"));
  EXPECT_EQ(status_line(r), "HTTP/1.1 200 OK");
  EXPECT_EQ(body_of(r), "<h1>home</h1>\n");
  auto big = http_exchange(port_, get("/big.bin"));
  EXPECT_EQ(status_line(big), "HTTP/1.1 200 OK");
  EXPECT_TRUE(body_of(big) == big_) << "large body differs, " << body_of(big).size() << " bytes";
}

// --reuseport: one listener per loop on the same port, and each of many connections served.
TEST_P(FileServerProgramTest, ReuseportListensOnEveryLoopAndServesEveryConnection) {
  restart({"--threads", "4", "--reuseport"});
  EXPECT_EQ(niox::test::listening_sockets_on(port_), 4);
  for (int i = 0; i < 32; ++i) {
    auto r = http_exchange(port_, get("/docs/a.txt"));
    ASSERT_EQ(status_line(r), "HTTP/1.1 200 OK") << "request " << i;
    EXPECT_EQ(body_of(r), "0123456789abcdefghij");
  }
}

TEST_P(FileServerProgramTest, HeadHasNoBody) {
  auto r =
      http_exchange(port_, "HEAD /docs/a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
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
  std::string req =
      "GET /docs/a.txt HTTP/1.1\r\nHost: t\r\n\r\n"
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

// Connects to the server on loopback; invalid on failure. Receives time out after `timeout_s`.
niox::FileDescriptor connect_to(std::uint16_t port, int timeout_s) {
  niox::FileDescriptor fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{timeout_s, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) fd.reset();
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
  niox::FileDescriptor connection = connect_to(port_, 10);
  ASSERT_TRUE(connection.valid());
  const int fd = connection.get();
  std::string req = "GET /docs/a.txt HTTP/1.1\r\nHost: t\r\n\r\n";  // keep-alive
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  std::string got;
  // The answer, then nothing more: the server closes the idle connection (long before the
  // 10 s receive timeout).
  EXPECT_TRUE(read_until_closed(fd, got)) << got;
  EXPECT_EQ(status_line(got), "HTTP/1.1 200 OK");
  EXPECT_TRUE(got.ends_with("0123456789abcdefghij")) << got;
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
  niox::FileDescriptor connection(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int fd = connection.get();
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
  connection.reset();
  EXPECT_EQ(status_line(got), "HTTP/1.1 200 OK");
  EXPECT_TRUE(body_of(got) == large)
      << "got " << body_of(got).size() << " of " << large.size() << " body bytes";
}

TEST_P(FileServerProgramTest, SlowlorisClientIsClosed) {
  server_->signal(SIGTERM);
  ASSERT_EQ(server_->wait(), 0);
  start({"--root", root_.path().string(), "--idle-timeout", "0.5"});
  niox::FileDescriptor connection = connect_to(port_, 10);
  ASSERT_TRUE(connection.valid());
  const int fd = connection.get();
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
}

TEST_P(FileServerProgramTest, CraftedTargetIsRedirectedInsideTheRootOnly) {
  // "//evil.com/../sub" is "sub" inside the root. Its redirect must not be
  // "Location: //evil.com/../sub/", which a browser resolves to the host evil.com.
  root_.write("sub/index.html", "<p>sub</p>");
  for (const char* target :
       {"//evil.com/../sub", "//sub", "///evil.com/%2e%2e/sub", "http://t//evil.com/../sub"}) {
    auto r = http_exchange(port_, get(target));
    EXPECT_EQ(status_line(r), "HTTP/1.1 301 Moved Permanently") << target;
    EXPECT_EQ(field_of(r, "Location"), "/sub/") << target;
  }
  auto followed = http_exchange(port_, get("/sub/"));
  EXPECT_EQ(status_line(followed), "HTTP/1.1 200 OK");
  EXPECT_EQ(body_of(followed), "<p>sub</p>");
}

TEST_P(FileServerProgramTest, FileNamedAsADirectoryIs404) {
  for (const char* target : {"/docs/a.txt/", "/docs/a.txt/.", "/big.bin/"}) {
    EXPECT_EQ(status_line(http_exchange(port_, get(target))), "HTTP/1.1 404 Not Found") << target;
  }
  EXPECT_EQ(status_line(http_exchange(port_, get("/docs/a.txt"))), "HTTP/1.1 200 OK");
}

TEST_P(FileServerProgramTest, IfModifiedSinceInTheFutureIsIgnored) {
  auto tomorrow = niox::http::format_http_date(std::time(nullptr) + 86400);
  auto r = http_exchange(port_, get("/docs/a.txt", "If-Modified-Since: " + tomorrow + "\r\n"));
  EXPECT_EQ(status_line(r), "HTTP/1.1 200 OK") << tomorrow;
  EXPECT_EQ(body_of(r), "0123456789abcdefghij");
}

TEST_P(FileServerProgramTest, ClientStillSendingAnOversizedHeadGetsThe431ThenACleanEnd) {
  // The client keeps sending its (endless) header field while it reads. It must get the whole
  // 431 response and then an end of stream: no reset, which could also discard the response.
  niox::FileDescriptor connection = connect_to(port_, 10);
  ASSERT_TRUE(connection.valid());
  const int fd = connection.get();
  ASSERT_TRUE(send_all(fd, "GET / HTTP/1.1\r\nHost: t\r\nX-Big: "));
  ASSERT_EQ(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
  const std::string filler(64 * 1024, 'a');
  std::string got;
  bool sending = true;
  bool eof = false;
  int recv_error = 0;
  int send_error = 0;
  std::size_t sent = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!eof && recv_error == 0 && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, static_cast<short>(POLLIN | (sending ? POLLOUT : 0)), 0};
    if (::poll(&p, 1, 1000) <= 0) continue;
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[65536];
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n > 0) {
        got.append(buf, static_cast<std::size_t>(n));
      } else if (n == 0) {
        eof = true;
      } else if (errno != EAGAIN && errno != EINTR) {
        recv_error = errno;
      }
    }
    if (sending && response_complete(got)) {
      sending = false;  // answered: a client stops sending and ends its side
      ::shutdown(fd, SHUT_WR);
    }
    if (sending && (p.revents & POLLOUT)) {
      ssize_t n = ::send(fd, filler.data(), filler.size(), MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
        sending = sent < (64u << 20);
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        send_error = errno;
        sending = false;
      }
    }
  }
  connection.reset();
  EXPECT_EQ(recv_error, 0) << "receive failed: " << std::strerror(recv_error);
  EXPECT_EQ(send_error, 0) << "send failed: " << std::strerror(send_error);
  EXPECT_EQ(status_line(got), "HTTP/1.1 431 Request Header Fields Too Large");
  EXPECT_TRUE(response_complete(got)) << got;
  EXPECT_EQ(body_of(got), "431 Request Header Fields Too Large\n");
  EXPECT_TRUE(eof) << "no end of stream after the response";
}

TEST_P(FileServerProgramTest, ManyOneByteConnectionsDoNotEachReserveTheHeadLimit) {
  // A 1 MiB head limit must not cost 1 MiB per connection that sent one byte.
  restart({"--max-header-bytes", "1048576"});
  constexpr std::size_t connections = 1000;
  constexpr long limit_kib = 1024;
  const long before = vm_rss_kib(server_->pid());
  ASSERT_GT(before, 0);
  std::vector<niox::FileDescriptor> fds;
  for (std::size_t i = 0; i < connections; ++i) {
    fds.push_back(connect_to(port_, 10));
    ASSERT_TRUE(fds.back().valid()) << "connection " << i;
    ASSERT_EQ(::send(fds.back().get(), "G", 1, MSG_NOSIGNAL), 1);
  }
  // Every byte read by the server: no server-side socket holds unread bytes.
  EXPECT_TRUE(eventually(
      [&] {
        auto s = server_side_sockets(port_);
        return s.established >= connections && s.with_unread_bytes == 0;
      },
      std::chrono::seconds(30)));
  const long after_one_byte = vm_rss_kib(server_->pid());
  // The rest of each request, and its answer: each connection's first byte was decoded.
  for (const auto& fd : fds) {
    ASSERT_TRUE(send_all(fd.get(), "ET /docs/a.txt HTTP/1.1\r\nHost: t\r\n\r\n"));
  }
  std::size_t answered = 0;
  for (const auto& fd : fds) {
    answered += body_of(read_response(fd.get())) == "0123456789abcdefghij" ? 1 : 0;
  }
  const long after_requests = vm_rss_kib(server_->pid());
  fds.clear();
  EXPECT_EQ(answered, connections);
  // Generous: an eighth of what a limit-sized buffer per connection would take.
  const long bound = static_cast<long>(connections) * limit_kib / 8;
  EXPECT_LT(after_one_byte - before, bound) << "KiB of RSS for " << connections << " connections";
  EXPECT_LT(after_requests - before, bound) << "KiB of RSS for " << connections << " connections";
}

TEST_P(FileServerProgramTest, DeletedFileIsClosedByTheServerAndNotServed) {
  const std::string content(100 * 1024, 'd');  // large enough to be kept open, not in memory
  root_.write("gone.bin", content);
  const auto path = root_ / "gone.bin";
  ASSERT_EQ(body_of(http_exchange(port_, get("/gone.bin"))), content);
  EXPECT_TRUE(holds_open(server_->pid(), path));  // its open-file cache keeps it
  ASSERT_EQ(::unlink(path.c_str()), 0);
  // Without any request for it, the server lets go of the deleted file.
  EXPECT_TRUE(eventually([&] { return !holds_open(server_->pid(), path); }))
      << "the server still holds the deleted file open";
  EXPECT_EQ(status_line(http_exchange(port_, get("/gone.bin"))), "HTTP/1.1 404 Not Found");
}

TEST_P(FileServerProgramTest, ReplacedFileIsClosedByTheServerAndTheNewOneServed) {
  const std::string old_content(100 * 1024, 'o');
  const std::string new_content(100 * 1024, 'n');
  root_.write("swap.bin", old_content);
  const auto path = root_ / "swap.bin";
  ASSERT_EQ(body_of(http_exchange(port_, get("/swap.bin"))), old_content);
  root_.write("swap.tmp", new_content);
  ASSERT_EQ(::rename((root_ / "swap.tmp").c_str(), path.c_str()), 0);
  const auto replaced = path.string() + " (deleted)";
  EXPECT_TRUE(eventually([&] {
    auto files = open_files(server_->pid());
    return std::find(files.begin(), files.end(), replaced) == files.end();
  })) << "the server still holds the replaced file open";
  EXPECT_TRUE(body_of(http_exchange(port_, get("/swap.bin"))) == new_content);
}

TEST_P(FileServerProgramTest, ServesOverAUnixDomainSocket) {
  TempTree dir;
  const auto socket_path = (dir / "http.sock").string();
  restart({"--bind", "unix:" + socket_path});
  EXPECT_NE(banner_.find("listening on unix:" + socket_path), std::string::npos) << banner_;
  auto exchange = [&](const std::string& request) {
    niox::FileDescriptor socket(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int fd = socket.get();
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, socket_path.c_str(), sizeof a.sun_path - 1);
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string out;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && send_all(fd, request)) {
      read_until_closed(fd, out);
    }
    return out;
  };
  auto small = exchange(get("/docs/a.txt"));
  EXPECT_EQ(status_line(small), "HTTP/1.1 200 OK");
  EXPECT_EQ(body_of(small), "0123456789abcdefghij");
  auto big = exchange(get("/big.bin"));
  EXPECT_TRUE(body_of(big) == big_) << "large body differs, " << body_of(big).size() << " bytes";
  if (::access("/usr/bin/curl", X_OK) == 0) {
    std::string cmd = "/usr/bin/curl -s --max-time 5 --unix-socket " + socket_path +
                      " http://localhost/docs/a.txt";
    FILE* p = ::popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[256];
    std::string out(buf, std::fread(buf, 1, sizeof buf, p));
    EXPECT_EQ(::pclose(p), 0);
    EXPECT_EQ(out, "0123456789abcdefghij");
  }
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
    ChildProcess missing({NIOX_FILE_SERVER_PROGRAM, "--root", (t / "absent").string(), "--port",
                          "0", "--bind", "127.0.0.1"});
    EXPECT_EQ(missing.wait(), 1);
    EXPECT_NE(missing.read_stderr().find("absent"), std::string::npos);
  }
}

// Starts the program on `root` and expects it to refuse at once: exit status 1 and a message
// naming the directory and `problem`.
void expect_root_refused(const std::string& root, const std::string& problem) {
  ChildProcess server(
      {NIOX_FILE_SERVER_PROGRAM, "--root", root, "--port", "0", "--bind", "127.0.0.1"});
  auto status = server.wait(std::chrono::seconds(10));
  ASSERT_TRUE(status) << root << ": the server started instead of refusing the root";
  EXPECT_EQ(*status, 1) << root;
  auto err = server.read_stderr();
  EXPECT_NE(err.find(root), std::string::npos) << err;
  EXPECT_NE(err.find(problem), std::string::npos) << err;
}

TEST(FileServerProgram, MissingRootOrAFileAsRootIsRefusedAtStartUp) {
  TempTree t;
  t.write("file.txt", "not a directory");
  expect_root_refused((t / "absent").string(), "no such directory");
  expect_root_refused((t / "file.txt").string(), "not a directory");
  expect_root_refused((t / "file.txt/below").string(), "not a directory");
}

TEST(FileServerProgram, RootWithoutReadOrSearchPermissionIsRefusedAtStartUp) {
  if (::geteuid() == 0) {
    GTEST_SKIP() << "running as root, whom permission bits do not stop from reading";
  }
  TempTree t;
  t.write("unreadable/index.html", "x");
  t.write("unsearchable/index.html", "x");
  ASSERT_EQ(::chmod((t / "unreadable").c_str(), 0300), 0);    // search, no read
  ASSERT_EQ(::chmod((t / "unsearchable").c_str(), 0600), 0);  // read, no search
  expect_root_refused((t / "unreadable").string(), "permission denied");
  expect_root_refused((t / "unsearchable").string(), "permission denied");
  ::chmod((t / "unreadable").c_str(), 0700);
  ::chmod((t / "unsearchable").c_str(), 0700);
}

}  // namespace
