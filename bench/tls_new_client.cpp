// niox-tls-new-client: HTTPS requests that each cost the server a full TLS 1.3 handshake.
//
//   niox-tls-new-client --port P --path /4k.bin --body-file FILE [--conns 16] [--seconds 10]
//
// wrk offers every new connection the session of its last one, so its `Connection: close` runs
// measure resumed handshakes: the server sends no certificate and signs nothing. A client met
// for the first time (a browser's first visit, curl, a health check) makes the server do the
// whole handshake. Here each of --conns threads, until --seconds are up, opens a connection,
// completes a handshake with no session to offer, sends one `Connection: close` GET, checks
// that the answer is a 200 with exactly the bytes of --body-file, and closes.
//
// The server's certificate is not verified (bench/run's is self-signed, and wrk does not
// verify either); its CertificateVerify signature is, as TLS 1.3 always does. Plain C++ and
// OpenSSL with no niox dependency, like niox-loadgen, so every server is judged alike.
//
// Output: one line for bench/run, `wrk_result requests=N good=N bad=N errors=N duration_us=N
// p50_us=N p99_us=N p999_us=N`, where a request's latency is its whole connection.

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loadgen_core.hpp"

namespace {

using niox::bench::Histogram;

using Clock = std::chrono::steady_clock;

struct Options {
  int port = 0;
  std::string path = "/4k.bin";
  std::string body_file;
  int conns = 16;
  int seconds = 10;
};

struct Tally {
  long good = 0, bad = 0, errors = 0;
  std::string first_problem;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "niox-tls-new-client: %s\n", why);
  std::fprintf(stderr,
               "usage: niox-tls-new-client --port P --body-file FILE [--path /4k.bin] "
               "[--conns 16] [--seconds 10]\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    if (a == "--port")
      o.port = std::atoi(v);
    else if (a == "--path")
      o.path = v;
    else if (a == "--body-file")
      o.body_file = v;
    else if (a == "--conns")
      o.conns = std::atoi(v);
    else if (a == "--seconds")
      o.seconds = std::atoi(v);
    else
      usage(("unknown option " + a).c_str());
  }
  if (o.port <= 0 || o.port > 65535) usage("--port is required");
  if (o.body_file.empty()) usage("--body-file is required");
  if (o.conns <= 0 || o.seconds <= 0) usage("--conns and --seconds must be positive");
  return o;
}

// One connection, one request. Returns "" when the answer was right, else what was wrong
// (a "bad:" prefix for a wrong answer, anything else an error).
std::string one_request(SSL_CTX* ctx, int port, const std::string& request,
                        const std::string& expected) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("socket: ") + std::strerror(errno);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string problem;
  SSL* ssl = nullptr;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    problem = std::string("connect: ") + std::strerror(errno);
  } else {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ssl = SSL_new(ctx);  // no session set: the server does the whole handshake
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) != 1) {
      problem = "handshake failed";
    } else if (SSL_session_reused(ssl)) {
      problem = "a session was resumed";
    } else if (SSL_write(ssl, request.data(), static_cast<int>(request.size())) !=
               static_cast<int>(request.size())) {
      problem = "write failed";
    } else {
      std::string answer;
      char buf[16384];
      for (;;) {
        const int n = SSL_read(ssl, buf, sizeof buf);
        if (n <= 0) break;  // close_notify, or the server's close
        answer.append(buf, static_cast<std::size_t>(n));
      }
      const std::size_t head_end = answer.find("\r\n\r\n");
      if (answer.rfind("HTTP/1.1 200", 0) != 0 || head_end == std::string::npos) {
        problem = "bad: not a 200 (" + std::to_string(answer.size()) + " bytes)";
      } else if (answer.compare(head_end + 4, std::string::npos, expected) != 0) {
        problem = "bad: body differs (" + std::to_string(answer.size() - head_end - 4) + " bytes)";
      }
    }
  }
  if (ssl != nullptr) SSL_free(ssl);
  ERR_clear_error();
  ::close(fd);
  return problem;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::ifstream in(o.body_file, std::ios::binary);
  if (!in) usage("cannot read --body-file");
  const std::string expected((std::istreambuf_iterator<char>(in)), {});
  const std::string request =
      "GET " + o.path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);

  std::vector<Tally> tallies(static_cast<std::size_t>(o.conns));
  Histogram latency;  // of whole connections, µs; a few thousand records a second
  std::mutex latency_mutex;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::seconds(o.seconds);
  std::vector<std::thread> threads;
  for (Tally& t : tallies) {
    threads.emplace_back([&, &t = t] {
      while (Clock::now() < deadline) {
        const auto t0 = Clock::now();
        const std::string problem = one_request(ctx, o.port, request, expected);
        if (problem.empty()) {
          ++t.good;
          const auto us =
              std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
          std::lock_guard lock(latency_mutex);
          latency.record(static_cast<std::uint64_t>(us));
          continue;
        }
        (problem.rfind("bad:", 0) == 0 ? t.bad : t.errors) += 1;
        if (t.first_problem.empty()) t.first_problem = problem;
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto duration_us =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  SSL_CTX_free(ctx);

  Tally all;
  for (Tally& t : tallies) {
    all.good += t.good;
    all.bad += t.bad;
    all.errors += t.errors;
    if (all.first_problem.empty()) all.first_problem = t.first_problem;
  }
  if (!all.first_problem.empty()) {
    std::fprintf(stderr, "niox-tls-new-client: first problem: %s\n", all.first_problem.c_str());
  }
  std::printf(
      "wrk_result requests=%ld good=%ld bad=%ld errors=%ld duration_us=%lld p50_us=%lu "
      "p99_us=%lu p999_us=%lu\n",
      all.good + all.bad + all.errors, all.good, all.bad, all.errors,
      static_cast<long long>(duration_us), static_cast<unsigned long>(latency.quantile(0.50)),
      static_cast<unsigned long>(latency.quantile(0.99)),
      static_cast<unsigned long>(latency.quantile(0.999)));
  return all.bad == 0 && all.errors == 0 && all.good > 0 ? 0 : 1;
}
