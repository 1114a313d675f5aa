// The "gather" workload (bench/README.md): one message of N segments of S bytes, written through a
// blocking niox::SocketChannel three ways:
//
//   gather      one gathering write of all segments (SocketChannel::write(span): the library's
//               path, which copies small segments together before sendmsg/send)
//   copy+write  memcpy the segments into one buffer, then one write
//   each        one write per segment
//   raw writev  reference: ::writev on the descriptor with a prebuilt iovec array, no niox, no copy
//
// The sink is a UNIX stream socketpair drained by a reader thread, so every method meets the
// same kernel path and the same consumer. Rounds of the three methods are interleaved (A B C A
// B C ...) and the median per method is reported, as MB/s and as the writer thread's own CPU
// time per MB (the figure that survives a noisy, shared machine). A first, untimed round per
// cell checks every byte on the reader side.
//
//   niox_gather_bench [--rounds R] [--round-ms T] [--writer-cpu C] [--reader-cpu C] [--sink unix|tcp]
//
// --sink tcp uses a loopback TCP connection (TCP_NODELAY) instead of the UNIX socketpair.
#include <niox/channels/server_socket_channel.hpp>
#include <niox/channels/socket_channel.hpp>

#include <algorithm>
#include <atomic>
#include <climits>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <time.h>

using namespace niox;

namespace {

void pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::uint64_t mix(std::uint64_t h, std::uint8_t b) { return (h ^ b) * 0x100000001B3ull; }

// Drains the socket; in checking mode also hashes every byte.
struct Reader {
  SocketChannel channel;
  std::atomic<bool> checking{false};
  std::uint64_t hash = 0xCBF29CE484222325ull;
  std::uint64_t bytes = 0;
  int cpu = -1;

  void run() {
    pin(cpu);
    auto buf = ByteBuffer::allocate(1 << 20);
    for (;;) {
      buf.clear();
      auto n = channel.read(buf);
      if (n < 0) return;
      if (checking.load(std::memory_order_relaxed)) {
        for (auto b : buf.flip().bytes()) hash = mix(hash, static_cast<std::uint8_t>(b));
      }
      bytes += static_cast<std::uint64_t>(n);
    }
  }
};

enum class Method { gather, copy_write, each, raw_writev };
const char* name(Method m) {
  switch (m) {
    case Method::gather: return "gather";
    case Method::copy_write: return "copy+write";
    case Method::each: return "each";
    case Method::raw_writev: return "raw writev";
  }
  return "?";
}

struct Cell {
  std::size_t segments;
  std::size_t size;
};

class Writer {
 public:
  Writer(SocketChannel& ch, Cell cell) : ch_(ch), cell_(cell) {
    data_.resize(cell.segments * cell.size);
    for (std::size_t i = 0; i < data_.size(); ++i)
      data_[i] = static_cast<std::byte>((i * 131 + 7) & 0xFF);
    joined_ = ByteBuffer::allocate(data_.size());
    for (std::size_t i = 0; i < cell.segments; ++i) {
      views_.push_back(
          ByteBuffer::wrap(std::span<std::byte>(data_).subspan(i * cell.size, cell.size)));
    }
    bufs_ = views_;
    for (auto& v : views_) {
      iov_.push_back(iovec{const_cast<std::byte*>(v.bytes().data()), v.remaining()});
    }
  }

  // One message; returns bytes written.
  std::size_t send(Method m) {
    switch (m) {
      case Method::gather: {
        for (std::size_t i = 0; i < bufs_.size(); ++i) bufs_[i].clear();
        ch_.write(std::span<ByteBuffer>(bufs_));
        break;
      }
      case Method::copy_write: {
        joined_.clear();
        for (std::size_t i = 0; i < views_.size(); ++i) joined_.put(views_[i].bytes());
        joined_.flip();
        ch_.write(joined_);
        break;
      }
      case Method::each: {
        for (std::size_t i = 0; i < bufs_.size(); ++i) {
          bufs_[i].clear();
          ch_.write(bufs_[i]);
        }
        break;
      }
      case Method::raw_writev: {
        // Blocking socket: loop over short writes, as any correct caller must.
        std::size_t left = data_.size();
        std::size_t first = 0;
        std::vector<iovec>& v = iov_scratch_;
        v = iov_;
        while (left > 0) {
          ssize_t n = ::writev(ch_.native_handle(), v.data() + first,
                               static_cast<int>(std::min<std::size_t>(v.size() - first, IOV_MAX)));
          if (n <= 0) break;
          left -= static_cast<std::size_t>(n);
          auto un = static_cast<std::size_t>(n);
          while (first < v.size() && un >= v[first].iov_len) un -= v[first++].iov_len;
          if (un > 0) {
            v[first].iov_base = static_cast<char*>(v[first].iov_base) + un;
            v[first].iov_len -= un;
          }
        }
        break;
      }
    }
    return data_.size();
  }
  std::span<const std::byte> message() const { return data_; }

 private:
  SocketChannel& ch_;
  Cell cell_;
  std::vector<std::byte> data_;
  std::vector<ByteBuffer> views_;
  std::vector<ByteBuffer> bufs_;
  std::vector<iovec> iov_;
  std::vector<iovec> iov_scratch_;
  ByteBuffer joined_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  int round_ms = 100;
  int writer_cpu = -1;
  int reader_cpu = -1;
  bool tcp = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--sink") {
      tcp = std::string(argv[i + 1]) == "tcp";
      continue;
    }
    int v = std::stoi(argv[i + 1]);
    if (a == "--rounds")
      rounds = v;
    else if (a == "--round-ms")
      round_ms = v;
    else if (a == "--writer-cpu")
      writer_cpu = v;
    else if (a == "--reader-cpu")
      reader_cpu = v;
  }
  pin(writer_cpu);
  utsname u{};
  uname(&u);
  std::printf(
      "gather bench: kernel %s, sink %s, %d rounds x %d ms per method and cell, writer cpu %d, "
      "reader cpu %d\n\n",
      u.release, tcp ? "loopback TCP" : "UNIX socketpair", rounds, round_ms, writer_cpu,
      reader_cpu);
  std::printf(
      "| segments | size | gather MB/s | copy+write MB/s | each MB/s | raw writev MB/s | gather "
      "CPU us/MB | copy+write CPU us/MB | each CPU us/MB | raw writev CPU us/MB |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");

  const Method methods[] = {Method::gather, Method::copy_write, Method::each, Method::raw_writev};
  constexpr int n_methods = 4;
  bool all_ok = true;
  for (std::size_t segments : {2, 8, 64, 1024}) {
    for (std::size_t size : {16, 128, 1024, 4096}) {
      SocketChannel tx;
      Reader reader;
      if (tcp) {
        auto listener = ServerSocketChannel::open();
        listener.bind(InetSocketAddress::loopback_v4(0));
        tx = SocketChannel::open(*listener.local_address());
        tx.set_option(StandardSocketOptions::tcp_nodelay, true);
        reader.channel = std::move(*listener.accept());
      } else {
        int fds[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return 1;
        tx = SocketChannel::from_native(fds[0]);
        reader.channel = SocketChannel::from_native(fds[1]);
      }
      reader.cpu = reader_cpu;
      tx.set_option(StandardSocketOptions::so_sndbuf, 1 << 20);
      reader.channel.set_option(StandardSocketOptions::so_rcvbuf, 1 << 20);
      std::thread rt([&] { reader.run(); });
      Writer w(tx, {segments, size});

      // Checking round: every byte of a few messages of each method, hashed on both sides.
      reader.checking = true;
      std::uint64_t expect = 0xCBF29CE484222325ull;
      std::uint64_t sent = 0;
      for (Method m : methods) {
        for (int k = 0; k < 3; ++k) {
          sent += w.send(m);
          for (auto b : w.message()) expect = mix(expect, static_cast<std::uint8_t>(b));
        }
      }
      while (reader.bytes < sent) std::this_thread::yield();
      reader.checking = false;
      bool ok = reader.hash == expect;
      all_ok = all_ok && ok;

      std::vector<double> mbps[n_methods], cpu[n_methods];
      for (int r = 0; r < rounds; ++r) {
        for (int mi = 0; mi < n_methods; ++mi) {
          auto start_bytes = reader.bytes;
          (void)start_bytes;
          std::uint64_t bytes = 0;
          double c0 = thread_cpu_seconds();
          auto t0 = std::chrono::steady_clock::now();
          auto deadline = t0 + std::chrono::milliseconds(round_ms);
          do {
            for (int k = 0; k < 16; ++k) bytes += w.send(methods[mi]);
          } while (std::chrono::steady_clock::now() < deadline);
          double secs =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          double c1 = thread_cpu_seconds();
          double mb = static_cast<double>(bytes) / 1e6;
          mbps[mi].push_back(mb / secs);
          cpu[mi].push_back((c1 - c0) * 1e6 / mb);
        }
      }
      tx.shutdown_output();
      rt.join();
      std::printf("| %zu | %zu | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |%s\n",
                  segments, size, median(mbps[0]), median(mbps[1]), median(mbps[2]),
                  median(mbps[3]), median(cpu[0]), median(cpu[1]), median(cpu[2]), median(cpu[3]),
                  ok ? "" : " DATA MISMATCH");
      std::fflush(stdout);
    }
  }
  return all_ok ? 0 : 2;
}
