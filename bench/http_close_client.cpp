// niox-http-close-client: a fixed number of `Connection: close` GETs, one connection after the
// other, for bench/instructions' churn count (wrk runs for a time, not for a number of
// connections, and a count per connection needs the number).
//
//   niox-http-close-client --port P --body-file FILE [--path /4k.bin] [--requests 1000]
//
// Each request: connect, send the GET, read until the server closes, check that the answer
// is a 200 whose body is exactly the bytes of --body-file, close. Plain C++ with no niox
// dependency, like niox-loadgen, so every server is judged alike. Exit status 0 when every
// answer was right, 1 on the first one that was not (what was wrong on standard error).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

namespace {

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "niox-http-close-client: %s\n", why.c_str());
  std::exit(1);
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "niox-http-close-client: %s\n", why);
  std::fprintf(stderr,
               "usage: niox-http-close-client --port P --body-file FILE [--path /4k.bin] "
               "[--requests 1000]\n");
  std::exit(2);
}

// One request on a new connection; the whole answer, read until the server's FIN.
std::string exchange(const sockaddr_in& to, const std::string& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(std::string("socket: ") + std::strerror(errno));
  timeval tv{20, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0)
    fail(std::string("connect: ") + std::strerror(errno));
  for (std::size_t sent = 0; sent < request.size();) {
    ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(std::string("send: ") + std::strerror(errno));
    sent += static_cast<std::size_t>(n);
  }
  std::string answer;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(std::string("recv: ") + std::strerror(errno));
    if (n == 0) break;
    answer.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return answer;
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  long requests = 1000;
  std::string path = "/4k.bin", body_file;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    if (a == "--port")
      port = std::atoi(v);
    else if (a == "--path")
      path = v;
    else if (a == "--body-file")
      body_file = v;
    else if (a == "--requests")
      requests = std::atol(v);
    else
      usage(("unknown argument " + a).c_str());
  }
  if (port <= 0 || port > 65535 || body_file.empty() || requests < 1)
    usage("--port, --body-file and a positive --requests are needed");
  std::ifstream in(body_file, std::ios::binary);
  if (!in) fail("cannot read " + body_file);
  const std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  for (long r = 0; r < requests; ++r) {
    const std::string answer = exchange(to, request);
    const auto head_end = answer.find("\r\n\r\n");
    if (answer.compare(0, 13, "HTTP/1.1 200 ") != 0 || head_end == std::string::npos)
      fail("request " + std::to_string(r) + ": not a 200: " + answer.substr(0, 80));
    if (answer.compare(head_end + 4, std::string::npos, body) != 0)
      fail("request " + std::to_string(r) + ": the body is not the file's bytes");
  }
  return 0;
}
