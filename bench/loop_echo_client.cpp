// Load generator for echo servers, on the niox EventLoop: N connections, each keeping M
// messages of S bytes in flight; every byte that comes back is checked against what was sent.
// Reports messages/s, MB/s, and — given the server's pid — the server's CPU time per message
// (utime+stime from /proc/PID/stat over the measured window).
//
//   niox_loop_echo_client --port 7000 --connections 64 --size 128 --inflight 16 --seconds 5
//                         [--warmup 1] [--server-pid PID] [--backend io_uring|epoll]
#include <niox/buffer/byte_buffer.hpp>
#include <niox/loop/event_loop.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

// The byte at stream offset k of connection c is table[(k + 7c) % period]: checking and
// producing data is then memcmp/memcpy against the table, so the client stays light.
constexpr std::size_t period = 4093;  // prime: no alignment with message sizes
std::vector<std::uint8_t> make_table(std::size_t max_span) {
  std::vector<std::uint8_t> t(period + max_span);
  std::uint32_t x = 88172645u;
  for (std::size_t i = 0; i < period; ++i) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    t[i] = static_cast<std::uint8_t>(x);
  }
  for (std::size_t i = period; i < t.size(); ++i) t[i] = t[i % period];
  return t;
}
const std::uint8_t* pattern_at(const std::vector<std::uint8_t>& t, std::uint64_t k, std::size_t conn) {
  return t.data() + (k + 7 * conn) % period;
}

double cpu_seconds(int pid) {
  if (pid <= 0) return 0;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), {});
  auto close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(s.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

struct Conn {
  int fd = -1;
  std::size_t id = 0;
  std::uint64_t sent = 0, received = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::uint16_t port = 7000;
  std::size_t connections = 64, size = 128, inflight = 16;
  double seconds = 5, warmup = 1;
  int server_pid = 0;
  niox::EventLoop::Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string_view k = argv[i], v = argv[i + 1];
    if (k == "--port") port = static_cast<std::uint16_t>(std::atoi(argv[i + 1]));
    else if (k == "--connections") connections = std::strtoul(argv[i + 1], nullptr, 10);
    else if (k == "--size") size = std::strtoul(argv[i + 1], nullptr, 10);
    else if (k == "--inflight") inflight = std::strtoul(argv[i + 1], nullptr, 10);
    else if (k == "--seconds") seconds = std::atof(argv[i + 1]);
    else if (k == "--warmup") warmup = std::atof(argv[i + 1]);
    else if (k == "--server-pid") server_pid = std::atoi(argv[i + 1]);
    else if (k == "--backend") options.backend = v == "epoll" ? niox::BackendKind::epoll : niox::BackendKind::io_uring;
    else {
      fmt::print(stderr, "unknown option {}\n", k);
      return 2;
    }
  }
  niox::EventLoop loop(options);
  const std::size_t read_size = std::max<std::size_t>(65536, size);
  const std::vector<std::uint8_t> table = make_table(read_size);
  std::vector<Conn> conns(connections);
  bool running = true, measuring = false, failed = false;
  std::uint64_t messages = 0, window_messages = 0;
  double cpu_start = 0, cpu_end = 0;
  auto t_start = std::chrono::steady_clock::now(), t_end = t_start;

  auto send = [&](Conn& c, std::size_t count) {
    auto buf = niox::ByteBuffer::allocate(count * size);
    auto out = buf.writable_bytes();
    for (std::size_t done = 0; done < out.size();) {
      std::size_t n = std::min<std::size_t>(out.size() - done, 65536);
      std::memcpy(out.data() + done, pattern_at(table, c.sent + done, c.id), n);
      done += n;
    }
    c.sent += out.size();
    loop.write(c.fd, std::move(buf), [&](std::error_code ec, std::size_t, niox::ByteBuffer) {
      if (ec) {
        fmt::print(stderr, "write: {}\n", ec.message());
        failed = true;
        loop.stop();
      }
    });
  };
  std::size_t open = 0;
  std::function<void(Conn&, niox::ByteBuffer)> receive = [&](Conn& c, niox::ByteBuffer buf) {
    buf.clear();
    loop.read(c.fd, std::move(buf), [&](std::error_code ec, std::size_t n, niox::ByteBuffer b) {
      if (ec || n == 0) {
        fmt::print(stderr, "read: {}\n", ec ? ec.message() : "end of stream");
        failed = true;
        return loop.stop();
      }
      auto got = b.array_view().first(n);
      if (std::memcmp(got.data(), pattern_at(table, c.received, c.id), n) != 0) {
        fmt::print(stderr, "corrupt bytes after offset {} of connection {}\n", c.received, c.id);
        failed = true;
        return loop.stop();
      }
      std::uint64_t before = c.received / size;
      c.received += n;
      std::uint64_t done = c.received / size - before;
      messages += done;
      if (measuring) window_messages += done;
      if (running && done) send(c, done);
      if (!running && c.received == c.sent) {
        if (--open == 0) loop.stop();
        return;
      }
      receive(c, std::move(b));
    });
  };

  for (std::size_t i = 0; i < connections; ++i) {
    Conn& c = conns[i];
    c.id = i;
    c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    loop.connect(c.fd, niox::InetSocketAddress::loopback_v4(port), [&](std::error_code ec) {
      if (ec) {
        fmt::print(stderr, "connect: {}\n", ec.message());
        failed = true;
        return loop.stop();
      }
      ++open;
      send(c, inflight);
      receive(c, niox::ByteBuffer::allocate(read_size));
    });
  }
  loop.schedule(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(warmup)),
                [&](std::error_code) {
                  measuring = true;
                  cpu_start = cpu_seconds(server_pid);
                  t_start = std::chrono::steady_clock::now();
                });
  loop.schedule(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(warmup + seconds)),
                [&](std::error_code) {
                  measuring = false;
                  running = false;
                  cpu_end = cpu_seconds(server_pid);
                  t_end = std::chrono::steady_clock::now();
                });
  loop.run();
  for (auto& c : conns) loop.close(c.fd);
  if (failed) return 1;
  double secs = std::chrono::duration<double>(t_end - t_start).count();
  double rate = static_cast<double>(window_messages) / secs;
  fmt::print("messages={} msgs/s={:.0f} MB/s={:.1f}", window_messages, rate, rate * static_cast<double>(size) / 1e6);
  if (server_pid > 0 && window_messages > 0) {
    fmt::print(" server_cpu_s={:.3f} server_us_per_msg={:.3f}", cpu_end - cpu_start,
               (cpu_end - cpu_start) * 1e6 / static_cast<double>(window_messages));
  }
  fmt::print(" verified_bytes={}\n", [&] { std::uint64_t s = 0; for (auto& c : conns) s += c.received; return s; }());
  return 0;
}
