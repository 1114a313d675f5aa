// niox-loadgen: an echo load generator that measures any TCP echo server the same way.
//
// Plain C++ over epoll with no niox dependency, so niox and its peers are judged by the same
// client. Every byte that comes back is compared with what was sent: each connection sends a
// pseudo-random stream whose byte at offset o is a pure function of (seed, connection, o), so a
// lost, duplicated, reordered or corrupted byte is caught wherever it lands. Any mismatch, early
// close or stall is a failure: the exit status is non-zero and no result line is printed.
//
// Output: one key=value line on stdout (or one JSON object with --json), for scripts.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "loadgen_core.hpp"

namespace {

using niox::bench::fill_stream;
using niox::bench::first_mismatch;
using niox::bench::Histogram;
using niox::bench::process_cpu_us;
using niox::bench::splitmix64;

using Clock = std::chrono::steady_clock;

constexpr int kExitError = 1;    // could not run (bad arguments, connect failed, ...)
constexpr int kExitCorrupt = 2;  // the server returned bytes that differ from those sent
constexpr int kExitStalled = 3;  // the server closed early or stopped answering

[[noreturn]] void die(int status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void die(int status, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fputs("niox-loadgen: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
  std::exit(status);
}

// ---- options ----------------------------------------------------------------------------------

struct Options {
  std::string workload = "echo-small";
  std::string host = "127.0.0.1";
  int port = 0;
  int conns = 0;
  std::size_t size = 0;
  int inflight = 0;
  double duration = 5.0;        // measured seconds (ignored with --messages)
  double warmup = 1.0;          // seconds run before measuring, not reported
  std::uint64_t messages = 0;   // if non-zero: run exactly this many messages, all measured
  double stall_timeout = 10.0;  // no byte back for this long = failure
  std::uint64_t seed = 1;
  int server_pid = 0;  // if set: server utime+stime sampled over the measured window
  bool json = false;
};

void usage() {
  std::fputs(
      "usage: niox-loadgen --port N [--host 127.0.0.1]\n"
      "                    [--workload echo-small|echo-bulk|latency|churn]\n"
      "                    [--duration S | --messages N] [--warmup S] [--conns N] [--size BYTES]\n"
      "                    [--inflight N] [--server-pid PID] [--seed N] [--stall-timeout S] "
      "[--json]\n"
      "workloads: echo-small = 64 conns x 128 B x 16 in flight; echo-bulk = 16 conns x 16 KiB x "
      "4;\n"
      "           latency = 1 conn x 64 B x 1 (ping-pong);\n"
      "           churn = 16 conns, each connects, echoes one 64 B message and closes, again\n"
      "           and again (a message is a connection: msgs_per_s is connections/s); over\n"
      "           IPv4 loopback from 127.0.0.1-64 in turn, so TIME_WAITs do not cap the rate\n"
      "Every echoed byte is verified; exit 2 = corrupted data, 3 = early close or stall, 1 = "
      "error.\n",
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
    if (a == "--workload")
      o.workload = need(i);
    else if (a == "--host")
      o.host = need(i);
    else if (a == "--port")
      o.port = std::atoi(need(i));
    else if (a == "--conns")
      o.conns = std::atoi(need(i));
    else if (a == "--size")
      o.size = std::strtoull(need(i), nullptr, 10);
    else if (a == "--inflight")
      o.inflight = std::atoi(need(i));
    else if (a == "--duration")
      o.duration = std::atof(need(i));
    else if (a == "--warmup")
      o.warmup = std::atof(need(i));
    else if (a == "--messages")
      o.messages = std::strtoull(need(i), nullptr, 10);
    else if (a == "--stall-timeout")
      o.stall_timeout = std::atof(need(i));
    else if (a == "--seed")
      o.seed = std::strtoull(need(i), nullptr, 10);
    else if (a == "--server-pid")
      o.server_pid = std::atoi(need(i));
    else if (a == "--json")
      o.json = true;
    else if (a == "-h" || a == "--help") {
      usage();
      std::exit(0);
    } else {
      usage();
      die(kExitError, "unknown argument '%s'", argv[i]);
    }
  }
  int conns = 0, inflight = 0;
  std::size_t size = 0;
  if (o.workload == "echo-small") {
    conns = 64;
    size = 128;
    inflight = 16;
  } else if (o.workload == "echo-bulk") {
    conns = 16;
    size = 16384;
    inflight = 4;
  } else if (o.workload == "latency") {
    conns = 1;
    size = 64;
    inflight = 1;
  } else if (o.workload == "churn") {
    conns = 16;
    size = 64;
    inflight = 1;
  } else
    die(kExitError, "unknown workload '%s'", o.workload.c_str());
  if (o.conns == 0) o.conns = conns;
  if (o.size == 0) o.size = size;
  if (o.inflight == 0) o.inflight = inflight;
  if (o.port <= 0 || o.port > 65535) {
    usage();
    die(kExitError, "--port is required");
  }
  if (o.conns < 1 || o.inflight < 1 || o.size < 1 || o.size > (64u << 20))
    die(kExitError, "bad --conns/--inflight/--size");
  if (o.messages == 0 && !(o.duration > 0)) die(kExitError, "--duration must be > 0");
  if (o.workload == "churn" && o.inflight != 1) die(kExitError, "churn sends one message");
  if (o.warmup < 0) o.warmup = 0;
  return o;
}

// ---- connections ------------------------------------------------------------------------------

struct Conn {
  int fd = -1;
  std::uint64_t key = 0;
  std::uint64_t queued = 0;    // bytes the workload wants sent so far
  std::uint64_t sent = 0;      // bytes written to the socket
  std::uint64_t received = 0;  // bytes read back and verified
  std::uint64_t msgs_queued = 0;
  std::uint64_t msgs_done = 0;
  std::vector<Clock::time_point> send_time;  // ring indexed by message number % inflight
  std::vector<unsigned char> out;            // generated bytes [out_off, out_off + out.size())
  std::uint64_t out_off = 0;
  std::size_t out_pos = 0;  // next byte of `out` to write
  bool want_out = false;
  Clock::time_point connect_time;  // churn: when this connection's connect() was called
};

class LoadGen {
 public:
  explicit LoadGen(Options o) : o_(std::move(o)), churn_(o_.workload == "churn") {}

  int run() {
    connect_all();
    auto start = Clock::now();
    measuring_ = o_.messages != 0 || o_.warmup == 0;
    if (measuring_) begin_window(start);
    auto warm_end = start + to_dur(o_.warmup);
    for (auto& c : conns_)
      for (int k = 0; k < o_.inflight; ++k) queue_message(c);
    for (auto& c : conns_) flush(c);

    std::vector<epoll_event> events(conns_.size() + 1);
    last_progress_ = Clock::now();
    while (true) {
      auto now = Clock::now();
      if (!measuring_ && now >= warm_end) begin_window(now);
      if (measuring_ && !stopping_ && o_.messages == 0 && now >= window_end_) stop_window(now);
      if (stopping_ && outstanding() == 0) break;
      if (now - last_progress_ > to_dur(o_.stall_timeout))
        die(kExitStalled, "no data echoed for %.1f s (%" PRIu64 " bytes outstanding)",
            o_.stall_timeout, outstanding());
      int n = epoll_wait(ep_, events.data(), static_cast<int>(events.size()), 50);
      if (n < 0) {
        if (errno == EINTR) continue;
        die(kExitError, "epoll_wait: %s", std::strerror(errno));
      }
      for (int i = 0; i < n; ++i) {
        Conn& c = conns_[events[i].data.u32];
        if (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) on_readable(c);
        if (events[i].events & EPOLLOUT) flush(c);
      }
    }
    for (auto& c : conns_)
      if (c.fd >= 0) close(c.fd);
    close(ep_);
    report();
    return 0;
  }

 private:
  static Clock::duration to_dur(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }

  void connect_all() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    std::string port = std::to_string(o_.port);
    if (int rc = getaddrinfo(o_.host.c_str(), port.c_str(), &hints, &res); rc != 0)
      die(kExitError, "bad --host '%s': %s", o_.host.c_str(), gai_strerror(rc));
    std::memcpy(&addr_, res->ai_addr, res->ai_addrlen);
    addr_len_ = res->ai_addrlen;
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) die(kExitError, "epoll_create1: %s", std::strerror(errno));
    conns_.resize(static_cast<std::size_t>(o_.conns));
    for (std::size_t i = 0; i < conns_.size(); ++i) {
      Conn& c = conns_[i];
      c.fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (c.fd < 0) die(kExitError, "socket: %s", std::strerror(errno));
      bind_source(c.fd);
      if (connect(c.fd, res->ai_addr, res->ai_addrlen) != 0)
        die(kExitError, "connect %s:%d: %s", o_.host.c_str(), o_.port, std::strerror(errno));
      int one = 1;
      setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      fcntl(c.fd, F_SETFL, fcntl(c.fd, F_GETFL) | O_NONBLOCK);
      c.key = splitmix64(o_.seed * 0x100000001b3ULL + i);
      c.connect_time = Clock::now();
      c.send_time.resize(static_cast<std::size_t>(o_.inflight));
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u32 = static_cast<std::uint32_t>(i);
      if (epoll_ctl(ep_, EPOLL_CTL_ADD, c.fd, &ev) != 0)
        die(kExitError, "epoll_ctl: %s", std::strerror(errno));
    }
    freeaddrinfo(res);
  }

  // churn over IPv4 loopback: each connection leaves from the next of 64 loopback addresses.
  // A client that closes first keeps a TIME_WAIT per connection, and the kernel reuses one for
  // a new connection only after a second: from one address, the 28,000-odd ephemeral ports cap
  // any server at about 14,000 connections a second, the limit measured instead of the server.
  // IP_BIND_ADDRESS_NO_PORT leaves the port to connect(), which may take a TIME_WAIT's.
  void bind_source(int fd) {
    if (!churn_ || addr_.ss_family != AF_INET) return;
    const auto& to = reinterpret_cast<const sockaddr_in&>(addr_);
    if ((ntohl(to.sin_addr.s_addr) >> 24) != 127) return;
    int one = 1;
    setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = htonl((127u << 24) | (1u + static_cast<std::uint32_t>(source_++ % 64)));
    if (bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof from) != 0)
      die(kExitError, "bind to a loopback source address: %s", std::strerror(errno));
  }

  void begin_window(Clock::time_point now) {
    measuring_ = true;
    win_start_ = now;
    window_end_ = now + to_dur(o_.duration);
    win_msgs_ = 0;
    hist_.reset();
    if (o_.server_pid) cpu_start_ = process_cpu_us(o_.server_pid);
  }

  void stop_window(Clock::time_point now) {
    stopping_ = true;
    win_end_ = now;
    if (o_.server_pid) cpu_end_ = process_cpu_us(o_.server_pid);
  }

  std::uint64_t outstanding() const {
    std::uint64_t n = 0;
    for (auto& c : conns_) n += c.queued - c.received;
    return n;
  }

  void queue_message(Conn& c) {
    if (stopping_) return;
    if (o_.messages != 0) {
      if (total_queued_ >= o_.messages) return;
      ++total_queued_;
    }
    ++c.msgs_queued;
    c.queued += o_.size;
  }

  // Writes queued bytes until the socket is full; generates payload in chunks as it goes.
  void flush(Conn& c) {
    while (c.sent < c.queued) {
      if (c.out_pos == c.out.size()) {
        std::size_t chunk =
            static_cast<std::size_t>(std::min<std::uint64_t>(c.queued - c.sent, 256 * 1024));
        c.out.resize(chunk);
        c.out_off = c.sent;
        c.out_pos = 0;
        fill_stream(c.key, c.out_off, c.out.data(), chunk);
      }
      // Stamped before the call: over loopback send() itself may run the whole path to the
      // server, and that time belongs to the round trip.
      auto now = Clock::now();
      ssize_t n = send(c.fd, c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        die(kExitStalled, "send: %s", std::strerror(errno));
      }
      // Each message whose last byte just left is timed until its last byte is back.
      std::uint64_t before = c.sent;
      c.sent += static_cast<std::uint64_t>(n);
      c.out_pos += static_cast<std::size_t>(n);
      for (std::uint64_t m = before / o_.size; (m + 1) * o_.size <= c.sent; ++m) {
        c.send_time[m % static_cast<std::uint64_t>(o_.inflight)] = now;
      }
    }
    bool want = c.sent < c.queued;
    if (want != c.want_out) {
      epoll_event ev{};
      ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
      ev.data.u32 = static_cast<std::uint32_t>(&c - conns_.data());
      epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev);
      c.want_out = want;
    }
  }

  void on_readable(Conn& c) {
    bool queued_more = false;
    while (true) {
      ssize_t n = recv(c.fd, rbuf_.data(), rbuf_.size(), 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        die(kExitStalled, "recv: %s", std::strerror(errno));
      }
      if (n == 0)
        die(kExitStalled, "server closed a connection with %" PRIu64 " bytes outstanding",
            c.queued - c.received);
      auto len = static_cast<std::size_t>(n);
      if (c.received + len > c.sent)
        die(kExitCorrupt, "server returned %" PRIu64 " bytes more than were sent",
            c.received + len - c.sent);
      if (auto bad = first_mismatch(c.key, c.received, rbuf_.data(), len, expect_.data())) {
        std::size_t at = *bad;
        die(kExitCorrupt,
            "data mismatch on connection %zu at stream offset %" PRIu64
            " (got 0x%02x, expected 0x%02x)",
            static_cast<std::size_t>(&c - conns_.data()), c.received + at, rbuf_[at], expect_[at]);
      }
      auto now = Clock::now();
      last_progress_ = now;
      std::uint64_t before = c.received;
      c.received += len;
      total_bytes_ += len;
      // Every message whose last byte arrived in this read is done.
      for (std::uint64_t m = before / o_.size; (m + 1) * o_.size <= c.received; ++m) {
        ++c.msgs_done;
        ++total_msgs_;
        if (measuring_ && !stopping_) {
          ++win_msgs_;
          auto t0 =
              churn_ ? c.connect_time : c.send_time[m % static_cast<std::uint64_t>(o_.inflight)];
          hist_.record(static_cast<std::uint64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(now - t0).count()));
        }
        if (churn_) break;  // the one message is back
        queue_message(c);
        queued_more = true;
      }
      if (churn_ && c.received == c.queued) {
        reconnect(c);
        return;
      }
      if (len < rbuf_.size()) break;  // drained: save a recv that would say EAGAIN
    }
    if (queued_more) flush(c);
    if (o_.messages != 0 && !stopping_ && total_msgs_ >= o_.messages) stop_window(Clock::now());
  }

  // churn: the connection's message is back; close it (the client closes first, so the
  // TIME_WAIT is the client's: loopback reuses it, net.ipv4.tcp_tw_reuse) and open the next,
  // unless the run is stopping. Each connection's stream has its own key.
  void reconnect(Conn& c) {
    close(c.fd);  // also leaves the epoll set
    c.fd = -1;
    if (stopping_ || (o_.messages != 0 && total_queued_ >= o_.messages)) return;
    auto index = static_cast<std::size_t>(&c - conns_.data());
    c.key = splitmix64(o_.seed * 0x100000001b3ULL + conns_.size() * ++generation_ + index);
    c.queued = c.sent = c.received = 0;
    c.out.clear();
    c.out_off = 0;
    c.out_pos = 0;
    c.want_out = false;
    c.connect_time = Clock::now();
    c.fd = socket(addr_.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (c.fd < 0) die(kExitError, "socket: %s", std::strerror(errno));
    bind_source(c.fd);
    if (connect(c.fd, reinterpret_cast<const sockaddr*>(&addr_), addr_len_) != 0 &&
        errno != EINPROGRESS)
      die(kExitError, "connect %s:%d: %s", o_.host.c_str(), o_.port, std::strerror(errno));
    int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<std::uint32_t>(index);
    if (epoll_ctl(ep_, EPOLL_CTL_ADD, c.fd, &ev) != 0)
      die(kExitError, "epoll_ctl: %s", std::strerror(errno));
    queue_message(c);
    flush(c);  // EAGAIN while the handshake is on: EPOLLOUT then
  }

  void report() {
    double secs = std::chrono::duration<double>(win_end_ - win_start_).count();
    double msgs_s = secs > 0 ? static_cast<double>(win_msgs_) / secs : 0;
    double mb_s = msgs_s * static_cast<double>(o_.size) / 1e6;
    auto us = [&](double q) { return static_cast<double>(hist_.quantile(q)) / 1000.0; };
    char cpu[320] = "";
    char cpu_json[320] = "";
    if (o_.server_pid) {
      if (!cpu_start_ || !cpu_end_) die(kExitError, "could not read /proc/%d/stat", o_.server_pid);
      const std::uint64_t d = cpu_end_->total() - cpu_start_->total();
      const std::uint64_t du = cpu_end_->user - cpu_start_->user;
      const std::uint64_t ds = cpu_end_->system - cpu_start_->system;
      const auto per = [&](std::uint64_t us) {
        return win_msgs_ ? static_cast<double>(us) / static_cast<double>(win_msgs_) : 0.0;
      };
      double gb = static_cast<double>(win_msgs_) * static_cast<double>(o_.size) / 1e9;
      double per_gb = gb > 0 ? static_cast<double>(d) / 1e6 / gb : 0;
      std::snprintf(cpu, sizeof cpu,
                    " server_cpu_us=%" PRIu64
                    " server_cpu_us_per_msg=%.4f server_user_us_per_msg=%.4f"
                    " server_sys_us_per_msg=%.4f server_cpu_s_per_gb=%.4f",
                    d, per(d), per(du), per(ds), per_gb);
      std::snprintf(cpu_json, sizeof cpu_json,
                    ",\"server_cpu_us\":%" PRIu64
                    ",\"server_cpu_us_per_msg\":%.4f,\"server_user_us_per_msg\":%.4f"
                    ",\"server_sys_us_per_msg\":%.4f,\"server_cpu_s_per_gb\":%.4f",
                    d, per(d), per(du), per(ds), per_gb);
    }
    if (o_.json) {
      std::printf(
          "{\"workload\":\"%s\",\"conns\":%d,\"size\":%zu,\"inflight\":%d,\"seconds\":%.4f,"
          "\"msgs\":%" PRIu64
          ",\"msgs_per_s\":%.1f,\"mb_per_s\":%.2f,\"p50_us\":%.2f,"
          "\"p99_us\":%.2f,\"p999_us\":%.2f,\"max_us\":%.2f,\"verified_bytes\":%" PRIu64
          ",\"verified_msgs\":%" PRIu64 "%s,\"verified\":true}\n",
          o_.workload.c_str(), o_.conns, o_.size, o_.inflight, secs, win_msgs_, msgs_s, mb_s,
          us(0.5), us(0.99), us(0.999), static_cast<double>(hist_.max()) / 1000.0, total_bytes_,
          total_msgs_, cpu_json);
    } else {
      std::printf("workload=%s conns=%d size=%zu inflight=%d seconds=%.4f msgs=%" PRIu64
                  " msgs_per_s=%.1f mb_per_s=%.2f p50_us=%.2f p99_us=%.2f p999_us=%.2f max_us=%.2f"
                  " verified_bytes=%" PRIu64 " verified_msgs=%" PRIu64 "%s verified=1\n",
                  o_.workload.c_str(), o_.conns, o_.size, o_.inflight, secs, win_msgs_, msgs_s,
                  mb_s, us(0.5), us(0.99), us(0.999), static_cast<double>(hist_.max()) / 1000.0,
                  total_bytes_, total_msgs_, cpu);
    }
  }

  Options o_;
  bool churn_;
  sockaddr_storage addr_{};
  socklen_t addr_len_ = 0;
  std::uint64_t generation_ = 0;
  std::uint64_t source_ = 0;  // bind_source()'s next address
  int ep_ = -1;
  std::vector<Conn> conns_;
  std::vector<unsigned char> rbuf_ = std::vector<unsigned char>(256 * 1024);
  std::vector<unsigned char> expect_ = std::vector<unsigned char>(256 * 1024);
  Histogram hist_;
  bool measuring_ = false;
  bool stopping_ = false;
  Clock::time_point win_start_, win_end_, window_end_, last_progress_;
  std::uint64_t win_msgs_ = 0;
  std::uint64_t total_msgs_ = 0;
  std::uint64_t total_bytes_ = 0;
  std::uint64_t total_queued_ = 0;
  std::optional<niox::bench::CpuTime> cpu_start_, cpu_end_;
};

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  Options o = parse(argc, argv);
  return LoadGen(std::move(o)).run();
}
