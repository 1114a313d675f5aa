// niox-idle-client: what an idle connection costs a server, in bytes of its resident memory.
//
// Opens --conns connections, makes one verified exchange on each (an echo of --size bytes, or
// one keep-alive HTTP GET whose body is compared with --body-file), then leaves them all open
// and idle. After --settle seconds it reads the server's resident set (VmRSS of every
// --server-pid, summed: nginx has a master and a worker) and reports the growth over the
// figure read before the first connection, divided by the number of connections.
//
// Plain C++ with no niox dependency, like niox-loadgen, so every server is judged alike. A
// connection the server closes, an exchange that differs from what was expected, or one that
// does not finish within --timeout is a failure: non-zero exit, no result line.
//
// Output: one key=value line on stdout.

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "loadgen_core.hpp"

namespace {

[[noreturn]] void die(int status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void die(int status, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fputs("niox-idle-client: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
  std::exit(status);
}

constexpr int kExitError = 1;    // could not run
constexpr int kExitCorrupt = 2;  // an exchange came back different
constexpr int kExitClosed = 3;   // the server closed a connection, or did not answer in time

struct Options {
  int port = 0;
  int conns = 9000;
  std::size_t size = 64;  // echo: bytes sent and expected back on each connection
  std::string http_path;  // non-empty: GET this path instead of an echo
  std::string body_file;  // the bytes the GET must return
  double settle = 2.0;
  double timeout = 10.0;
  std::vector<int> pids;
};

void usage() {
  std::fputs(
      "usage: niox-idle-client --port N --server-pid PID [--server-pid PID ...] [--conns 9000]\n"
      "                        [--size 64 | --http /path --body-file FILE] [--settle 2]\n"
      "                        [--timeout 10]\n"
      "One exchange per connection, then all idle; prints the server's resident memory growth\n"
      "per connection. Exit 2 = an exchange came back wrong, 3 = a connection closed or timed "
      "out.\n",
      stderr);
}

Options parse(int argc, char** argv) {
  Options o;
  auto need = [&](int& i) -> const char* {
    if (i + 1 >= argc) die(kExitError, "%s needs a value", argv[i]);
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--port")
      o.port = std::atoi(need(i));
    else if (a == "--conns")
      o.conns = std::atoi(need(i));
    else if (a == "--size")
      o.size = std::strtoull(need(i), nullptr, 10);
    else if (a == "--http")
      o.http_path = need(i);
    else if (a == "--body-file")
      o.body_file = need(i);
    else if (a == "--settle")
      o.settle = std::atof(need(i));
    else if (a == "--timeout")
      o.timeout = std::atof(need(i));
    else if (a == "--server-pid")
      o.pids.push_back(std::atoi(need(i)));
    else if (a == "-h" || a == "--help") {
      usage();
      std::exit(0);
    } else {
      usage();
      die(kExitError, "unknown argument '%s'", argv[i]);
    }
  }
  if (o.port <= 0 || o.port > 65535 || o.pids.empty()) {
    usage();
    die(kExitError, "--port and --server-pid are required");
  }
  if (o.conns < 1 || o.size < 1 || o.size > (1u << 20)) die(kExitError, "bad --conns/--size");
  if (!o.http_path.empty() && o.body_file.empty()) die(kExitError, "--http needs --body-file");
  return o;
}

// VmRSS of the process in KiB (what ps and top show as RSS).
long rss_kib(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  die(kExitError, "cannot read the resident set of process %d", pid);
}

long total_rss_kib(const std::vector<int>& pids) {
  long sum = 0;
  for (int p : pids) sum += rss_kib(p);
  return sum;
}

class Client {
 public:
  explicit Client(Options o) : o_(std::move(o)) {
    if (!o_.http_path.empty()) {
      std::ifstream f(o_.body_file, std::ios::binary);
      if (!f) die(kExitError, "cannot read %s", o_.body_file.c_str());
      body_.assign(std::istreambuf_iterator<char>(f), {});
      request_ = "GET " + o_.http_path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    }
  }

  int run() {
    const long before = total_rss_kib(o_.pids);
    fds_.reserve(static_cast<std::size_t>(o_.conns));
    for (int i = 0; i < o_.conns; ++i) {
      int fd = connect_one();
      fds_.push_back(fd);
      if (o_.http_path.empty())
        echo_once(fd, static_cast<std::uint64_t>(i));
      else
        get_once(fd);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(o_.settle));
    const long idle = total_rss_kib(o_.pids);
    // Every connection must still be open and quiet: readable now means closed or a stray byte.
    std::vector<pollfd> pfds;
    pfds.reserve(fds_.size());
    for (int fd : fds_) pfds.push_back({fd, POLLIN, 0});
    if (int n = ::poll(pfds.data(), pfds.size(), 0); n != 0)
      die(kExitClosed, "%d of %d idle connections were closed or sent something", n < 0 ? -1 : n,
          o_.conns);
    for (int fd : fds_) ::close(fd);
    const double per_conn = static_cast<double>(idle - before) * 1024.0 / o_.conns;
    std::printf(
        "conns=%d rss_before_kib=%ld rss_idle_kib=%ld bytes_per_conn=%.0f verified_bytes=%llu "
        "verified=1\n",
        o_.conns, before, idle, per_conn, static_cast<unsigned long long>(verified_));
    return 0;
  }

 private:
  int connect_one() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die(kExitError, "socket: %s", std::strerror(errno));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(o_.port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      die(kExitError, "connect after %zu connections: %s", fds_.size(), std::strerror(errno));
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }

  // Reads into buf until `want` bytes arrived; false on EOF.
  bool read_some(int fd, std::string& buf, std::size_t want) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(o_.timeout);
    char chunk[65536];
    while (buf.size() < want) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fd, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0)
        die(kExitClosed, "no answer within %.0f s on connection %zu", o_.timeout, fds_.size());
      ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) die(kExitClosed, "recv: %s", std::strerror(errno));
      if (n == 0) return false;
      buf.append(chunk, static_cast<std::size_t>(n));
    }
    return true;
  }

  void send_all(int fd, const char* p, std::size_t n) {
    while (n > 0) {
      ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) die(kExitClosed, "send: %s", std::strerror(errno));
      p += k;
      n -= static_cast<std::size_t>(k);
    }
  }

  void echo_once(int fd, std::uint64_t i) {
    std::string out(o_.size, '\0');
    const std::uint64_t key = niox::bench::splitmix64(i + 1);
    niox::bench::fill_stream(key, 0, reinterpret_cast<unsigned char*>(out.data()), out.size());
    send_all(fd, out.data(), out.size());
    std::string in;
    if (!read_some(fd, in, out.size()))
      die(kExitClosed, "server closed connection %zu mid-echo", fds_.size());
    if (in != out) die(kExitCorrupt, "echo on connection %zu came back different", fds_.size());
    verified_ += in.size();
  }

  void get_once(int fd) {
    send_all(fd, request_.data(), request_.size());
    std::string in;
    std::size_t end = std::string::npos;
    while ((end = in.find("\r\n\r\n")) == std::string::npos)
      if (!read_some(fd, in, in.size() + 1))
        die(kExitClosed, "server closed connection %zu before its headers", fds_.size());
    std::string_view head(in.data(), end);
    if (head.rfind("HTTP/1.1 200", 0) != 0)
      die(kExitCorrupt, "GET %s: %.*s", o_.http_path.c_str(), static_cast<int>(head.find("\r\n")),
          head.data());
    std::size_t body_at = end + 4;
    if (!read_some(fd, in, body_at + body_.size()))
      die(kExitClosed, "server closed connection %zu mid-body", fds_.size());
    if (in.size() != body_at + body_.size() || in.compare(body_at, body_.size(), body_) != 0)
      die(kExitCorrupt, "GET %s on connection %zu returned other bytes than the file",
          o_.http_path.c_str(), fds_.size());
    verified_ += body_.size();
  }

  Options o_;
  std::string body_;
  std::string request_;
  std::vector<int> fds_;
  unsigned long long verified_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  return Client(parse(argc, argv)).run();
}
