// niox_soak: many short connections against an in-process niox transport echo server, each
// ending with a random reset (SO_LINGER {1,0}), half-close or close after random data, bounded
// in time. Prints RSS and open descriptors before and after; exits 1 when a descriptor leaked,
// an echo came back wrong, or a connection that should have succeeded failed.
//
//   niox_soak [--connections 10000] [--concurrency 1000] [--seconds 60] [--threads 2]
//             [--max-bytes 65536] [--seed 1] [--report 10]
//
// Every --report seconds it prints the connections so far, RSS and open descriptors, so a
// long run shows whether memory levels off (pools and allocator caches warm up) or keeps
// growing.
//
// The server's backend follows NIOX_BACKEND (io_uring|epoll|auto). The clients are plain
// non-blocking sockets on their own epoll set in the main thread, independent of niox.
#include <niox/base/file_descriptor.hpp>
#include <niox/loop/event_loop_group.hpp>
#include <niox/transport/bootstrap.hpp>

#include "../support/open_fds.hpp"

#include <algorithm>
#include <any>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;

// Echo; on the peer's half-close, finish what is queued, send FIN, then close.
class SoakEchoHandler final : public niox::ChannelHandler {
 public:
  void channel_read(niox::ChannelHandlerContext& ctx, niox::Message&& msg) override {
    ctx.write(std::move(msg), niox::ChannelPromise());
  }
  void channel_read_complete(niox::ChannelHandlerContext& ctx) override { ctx.flush(); }
  void user_event_triggered(niox::ChannelHandlerContext& ctx, std::any e) override {
    if (std::any_cast<niox::ChannelInputShutdownEvent>(&e) != nullptr) {
      ctx.flush();
      auto ch = ctx.channel().shared_from_this();
      ctx.shutdown_output().add_listener([ch](const std::error_code&) { ch->close(); });
      return;
    }
    ctx.fire_user_event_triggered(std::move(e));
  }
  void exception_caught(niox::ChannelHandlerContext& ctx, std::exception_ptr) override {
    ctx.close();
  }
};

long rss_kib() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long v = -1;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "VmRSS:", 6) == 0) v = std::strtol(line + 6, nullptr, 10);
  }
  std::fclose(f);
  return v;
}

std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The i-th byte a connection with `seed` sends.
inline std::uint8_t byte_at(std::uint64_t seed, std::size_t i) {
  std::uint64_t x = seed * 0x100000001B3ull + (i >> 3) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  return static_cast<std::uint8_t>(x >> ((i & 7) * 8));
}

enum class End : std::uint8_t { close, half_close, reset };

struct Conn {
  niox::FileDescriptor fd;  // closed when the connection leaves the live table
  std::uint64_t seed = 0;
  End end = End::close;
  std::size_t size = 0;      // bytes to send
  std::size_t reset_at = 0;  // reset once this many were sent (End::reset)
  std::size_t sent = 0;
  std::size_t received = 0;
  bool connected = false;
  bool shut = false;
};

struct Stats {
  std::uint64_t started = 0, closed = 0, half_closed = 0, reset = 0, failed = 0, corrupt = 0;
  std::uint64_t bytes_echoed = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t connections = 10000, concurrency = 1000, seed = 1;
  double seconds = 60, report = 10;
  std::size_t threads = 2, max_bytes = 65536;
  for (int i = 1; i < argc; ++i) {
    std::string_view k = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr,
                   "usage: %s [--connections N] [--concurrency N] [--seconds S] [--threads N] "
                   "[--max-bytes N] [--seed N]\n",
                   argv[0]);
      return 2;
    }
    const char* v = argv[++i];
    if (k == "--connections")
      connections = std::strtoull(v, nullptr, 10);
    else if (k == "--concurrency")
      concurrency = std::strtoull(v, nullptr, 10);
    else if (k == "--seconds")
      seconds = std::strtod(v, nullptr);
    else if (k == "--threads")
      threads = std::strtoul(v, nullptr, 10);
    else if (k == "--max-bytes")
      max_bytes = std::max<std::size_t>(1, std::strtoul(v, nullptr, 10));
    else if (k == "--seed")
      seed = std::strtoull(v, nullptr, 10);
    else if (k == "--report")
      report = std::strtod(v, nullptr);
    else {
      std::fprintf(stderr, "niox_soak: unknown option %s\n", argv[i - 1]);
      return 2;
    }
  }
  ::signal(SIGPIPE, SIG_IGN);
  // Each connection takes two descriptors here (client and server side): raise the soft limit
  // and fit the concurrency under it.
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  ::getrlimit(RLIMIT_NOFILE, &rl);
  std::uint64_t fit = rl.rlim_cur > 256 ? (rl.rlim_cur - 128) / 2 : 16;
  concurrency = std::max<std::uint64_t>(1, std::min(concurrency, fit));

  Stats st;
  int rc = 0;
  {
    niox::EventLoopGroup::Options go;
    go.threads = std::max<std::size_t>(1, threads);
    niox::EventLoopGroup group(go);
    niox::ServerBootstrap b;
    b.group(group)
        .option(niox::channel_option::so_backlog, 4096)
        .child_handler(std::make_shared<niox::ChannelInitializer>([](niox::Channel& ch) {
          ch.config().set_allow_half_closure(true);
          ch.pipeline().add_last("echo", std::make_shared<SoakEchoHandler>());
        }));
    auto bound = b.bind(niox::InetSocketAddress::loopback_v4(0));
    std::error_code bind_error;
    if (bound.sync(bind_error); bind_error) {
      std::fprintf(stderr, "niox_soak: cannot listen: %s\n", bind_error.message().c_str());
      return 1;
    }
    sockaddr_storage to{};
    auto server = std::static_pointer_cast<niox::LoopServerSocketChannel>(bound.channel());
    socklen_t to_len = server->local_address()->to_native(to);

    niox::FileDescriptor epoll(::epoll_create1(EPOLL_CLOEXEC));
    const int ep = epoll.get();
    // Warm-up connection so the "before" figures include the server's steady state.
    int fds_before = -1;
    long rss_before = -1;
    std::unordered_map<int, Conn> live;
    std::vector<epoll_event> events(1024);
    std::vector<std::uint8_t> buf(65536);
    std::uint64_t rng = seed;
    auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(seconds));
    bool first_wave_done = false;

    auto finish = [&](Conn& c, bool ok) {
      if (!ok) ++st.failed;
      const int fd = c.fd.get();
      ::epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
      if (c.end == End::reset) {
        linger l{1, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
      }
      live.erase(fd);  // closes it; `c` is gone from here on
    };
    auto start_one = [&]() -> bool {
      Conn c;
      c.fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!c.fd) return false;
      const int fd = c.fd.get();
      c.seed = splitmix(rng);
      std::uint64_t r = splitmix(rng);
      c.end = static_cast<End>(r % 3);
      c.size = 1 + (r >> 8) % max_bytes;
      c.reset_at = (r >> 32) % (c.size + 1);
      int rcv = ::connect(fd, reinterpret_cast<sockaddr*>(&to), to_len);
      if (rcv != 0 && errno != EINPROGRESS) {
        ++st.failed;
        return true;
      }
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
      ev.data.fd = fd;
      ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
      live.emplace(fd, std::move(c));
      ++st.started;
      return true;
    };
    auto step = [&](Conn& c, std::uint32_t ev) {
      if (!c.connected) {
        int err = 0;
        socklen_t el = sizeof err;
        ::getsockopt(c.fd.get(), SOL_SOCKET, SO_ERROR, &err, &el);
        if (err != 0) return finish(c, false);
        if (!(ev & EPOLLOUT)) return;
        c.connected = true;
      }
      // Send.
      while (c.sent < c.size && !c.shut) {
        if (c.end == End::reset && c.sent >= c.reset_at) {
          ++st.reset;
          return finish(c, true);
        }
        std::size_t n = std::min(buf.size(), c.size - c.sent);
        if (c.end == End::reset) n = std::min(n, c.reset_at - c.sent);
        for (std::size_t i = 0; i < n; ++i) buf[i] = byte_at(c.seed, c.sent + i);
        ssize_t k = ::send(c.fd.get(), buf.data(), n, MSG_NOSIGNAL);
        if (k < 0) {
          if (errno == EAGAIN || errno == EINTR) break;
          return finish(c, false);
        }
        c.sent += static_cast<std::size_t>(k);
      }
      if (c.end == End::reset && c.sent >= c.reset_at) {
        ++st.reset;
        return finish(c, true);
      }
      if (c.sent == c.size && c.end == End::half_close && !c.shut) {
        ::shutdown(c.fd.get(), SHUT_WR);
        c.shut = true;
        epoll_event mod{};
        mod.events = EPOLLIN | EPOLLRDHUP;
        mod.data.fd = c.fd.get();
        ::epoll_ctl(ep, EPOLL_CTL_MOD, c.fd.get(), &mod);
      } else if (c.sent == c.size && !c.shut) {
        c.shut = true;  // everything sent: stop asking for EPOLLOUT
        epoll_event mod{};
        mod.events = EPOLLIN | EPOLLRDHUP;
        mod.data.fd = c.fd.get();
        ::epoll_ctl(ep, EPOLL_CTL_MOD, c.fd.get(), &mod);
      }
      // Receive and verify.
      for (;;) {
        ssize_t k = ::recv(c.fd.get(), buf.data(), buf.size(), 0);
        if (k < 0) {
          if (errno == EAGAIN || errno == EINTR) break;
          return finish(c, false);
        }
        if (k == 0) {
          // EOF: only a half-closed connection expects it, after its whole echo.
          bool ok = c.end == End::half_close && c.received == c.size;
          if (ok) ++st.half_closed;
          return finish(c, ok);
        }
        for (ssize_t i = 0; i < k; ++i) {
          if (buf[i] != byte_at(c.seed, c.received + static_cast<std::size_t>(i))) {
            ++st.corrupt;
            return finish(c, false);
          }
        }
        c.received += static_cast<std::size_t>(k);
        st.bytes_echoed += static_cast<std::uint64_t>(k);
        if (c.received > c.size) {
          ++st.corrupt;
          return finish(c, false);
        }
      }
      if (c.end == End::close && c.received == c.size) {
        ++st.closed;
        return finish(c, true);
      }
    };

    auto t0 = Clock::now();
    auto next_report = Clock::time_point::max();
    auto run_until_idle = [&](Clock::time_point limit, std::uint64_t want_started) {
      while (Clock::now() < limit) {
        if (Clock::now() >= next_report) {
          std::printf("  %6.1f s: %llu connections, %zu open, RSS %ld KiB, descriptors %d\n",
                      std::chrono::duration<double>(Clock::now() - t0).count(),
                      static_cast<unsigned long long>(st.started), live.size(), rss_kib(),
                      niox::test::open_fd_count());
          std::fflush(stdout);
          next_report +=
              std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(report));
        }
        while (live.size() < concurrency && st.started < want_started && Clock::now() < limit) {
          if (!start_one()) break;
        }
        if (live.empty() && st.started >= want_started) return;
        int n = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), 100);
        for (int i = 0; i < n; ++i) {
          auto it = live.find(events[i].data.fd);
          if (it != live.end()) step(it->second, events[i].events);
        }
      }
    };

    // A first small wave warms the pools; then the figures "before".
    run_until_idle(Clock::now() + std::chrono::seconds(10),
                   std::min<std::uint64_t>(connections, 50));
    first_wave_done = live.empty();
    ::usleep(200000);
    fds_before = niox::test::open_fd_count();
    rss_before = rss_kib();
    t0 = Clock::now();
    if (report > 0) {
      next_report =
          t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(report));
    }
    run_until_idle(deadline, connections);
    // Time is up: let what is open finish (bounded), then count what is left as failures.
    run_until_idle(Clock::now() + std::chrono::seconds(10), 0);
    std::uint64_t unfinished = live.size();
    for (auto it = live.begin(); it != live.end();) {
      Conn& c = it->second;
      ++it;
      c.end = End::reset;
      finish(c, true);
    }
    // The server closes its side of every connection: wait (bounded) for its descriptors.
    int fds_after = niox::test::open_fd_count();
    for (int i = 0; i < 100 && fds_after != fds_before; ++i) {
      ::usleep(100000);
      fds_after = niox::test::open_fd_count();
    }
    long rss_after = rss_kib();
    std::printf("niox_soak: backend %s, %zu server threads, concurrency %llu\n",
                std::string(niox::to_string(group.loop(0).backend())).c_str(), group.size(),
                static_cast<unsigned long long>(concurrency));
    std::printf(
        "connections %llu: close %llu, half-close %llu, reset %llu, failed %llu, corrupt %llu, "
        "unfinished at the deadline %llu; %llu bytes echoed\n",
        static_cast<unsigned long long>(st.started), static_cast<unsigned long long>(st.closed),
        static_cast<unsigned long long>(st.half_closed), static_cast<unsigned long long>(st.reset),
        static_cast<unsigned long long>(st.failed), static_cast<unsigned long long>(st.corrupt),
        static_cast<unsigned long long>(unfinished),
        static_cast<unsigned long long>(st.bytes_echoed));
    std::printf("RSS before %ld KiB, after %ld KiB; open descriptors before %d, after %d\n",
                rss_before, rss_after, fds_before, fds_after);
    if (!first_wave_done) std::printf("niox_soak: the warm-up wave did not finish\n");
    if (fds_after != fds_before) {
      std::printf("niox_soak: FAILED: descriptors leaked\n");
      rc = 1;
    }
    if (st.failed != 0 || st.corrupt != 0 || unfinished != 0 || !first_wave_done) {
      std::printf("niox_soak: FAILED: %llu connections failed, %llu echoes corrupt, %llu stalled\n",
                  static_cast<unsigned long long>(st.failed),
                  static_cast<unsigned long long>(st.corrupt),
                  static_cast<unsigned long long>(unfinished));
      rc = 1;
    }
    epoll.reset();
    std::error_code ignored;
    bound.channel()->close().sync(ignored);
    group.shutdown_gracefully();
  }
  return rc;
}
