// File-to-socket on the EventLoop: one transfer_to (sendfile when the socket is writable). A
// reader thread drains the socket and checks every byte. Reports MB/s and the process CPU per GB
// spent outside the reader thread (loop thread plus any io_uring workers).
//
//   niox_loop_transfer_paths [--backend io_uring|epoll] [--mib 256]
#include <niox/loop/event_loop.hpp>

#include "backend_arg.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {
double process_cpu() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}
double thread_cpu() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}
std::uint8_t byte_at(std::uint64_t k) { return static_cast<std::uint8_t>(k * 2654435761u >> 13); }
}  // namespace

int main(int argc, char** argv) {
  niox::EventLoop::Options options;
  std::size_t mib = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string_view k = argv[i], v = argv[i + 1];
    if (k == "--backend")
      options.backend = backend_arg(v);
    else if (k == "--mib")
      mib = std::strtoul(argv[i + 1], nullptr, 10);
  }
  const std::uint64_t total = static_cast<std::uint64_t>(mib) << 20;

  std::string path = (std::filesystem::temp_directory_path() / "niox-transfer-XXXXXX").string();
  niox::FileDescriptor file_fd(::mkostemp(path.data(), O_CLOEXEC));
  const int file = file_fd.get();  // only ever the transfer's input
  ::unlink(path.c_str());
  {
    std::vector<std::uint8_t> block(1 << 20);
    for (std::uint64_t off = 0; off < total; off += block.size()) {
      for (std::size_t i = 0; i < block.size(); ++i) block[i] = byte_at(off + i);
      if (::pwrite(file, block.data(), block.size(), static_cast<off_t>(off)) !=
          static_cast<ssize_t>(block.size()))
        return 1;
    }
  }

  niox::FileDescriptor listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int lfd = listener.get();
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::listen(lfd, 1);
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  niox::FileDescriptor out_fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int out = out_fd.get();
  if (::connect(out, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return 1;
  niox::FileDescriptor in_fd(::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC));
  const int in = in_fd.get();  // the reader thread's, never the loop's
  listener.reset();
  ::fcntl(out, F_SETFL, O_NONBLOCK);

  std::atomic<bool> corrupt{false};
  std::atomic<double> reader_cpu{0};
  std::thread reader([&] {
    std::vector<std::uint8_t> buf(1 << 20);
    std::uint64_t got = 0;
    while (got < total) {
      ssize_t n = ::recv(in, buf.data(), buf.size(), 0);
      if (n <= 0) break;
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[i] != byte_at(got + i)) corrupt = true;
      }
      got += static_cast<std::uint64_t>(n);
    }
    if (got != total) corrupt = true;
    reader_cpu = thread_cpu();
  });

  niox::EventLoop loop(options);
  std::uint64_t sent = 0;
  bool failed = false;
  double cpu0 = process_cpu();
  auto t0 = std::chrono::steady_clock::now();
  loop.transfer_to(file, 0, total, out,
                   [&](std::error_code ec, std::size_t n, niox::TransferPath path) {
                     failed = ec || path != niox::TransferPath::sendfile;
                     sent = n;
                     loop.stop();
                   });
  loop.run();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::shutdown(out, SHUT_WR);
  reader.join();
  double cpu = process_cpu() - cpu0 - reader_cpu.load();
  fmt::print("backend={} MiB={} seconds={:.3f} MB/s={:.0f} sender_cpu_s_per_GB={:.3f} ok={}\n",
             loop.backend(), mib, secs, total / secs / 1e6, cpu / (total / 1e9),
             !failed && !corrupt && sent == total);
  // The transfer belongs to its output: that one closes through the loop; the file, which no
  // operation belongs to, and the reader's socket close with their owners.
  loop.close(std::move(out_fd));
  return failed || corrupt ? 1 : 0;
}
