// docs/reliability.md rows about limits, on every backend: EMFILE on accept (a real descriptor
// limit), UDP errors through the loop, a gather of more than 2 GiB, tiny io_uring rings with
// slow readers.
#include <niox/loop/event_loop.hpp>
#include <niox/transport/bootstrap.hpp>

#include "../support/backends.hpp"
#include "../support/fault_injection.hpp"
#include "../support/loop_sockets.hpp"
#include "../support/transport_sockets.hpp"
#include "shim_fixtures.hpp"

#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <cerrno>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

using namespace niox;
using namespace niox::test;
namespace fi = niox::test::fault;

namespace {

class LimitsTest : public DisarmingTest {};
NIOX_INSTANTIATE_BACKENDS(LimitsTest);

int highest_open_fd() {
  int top = -1;
  DIR* d = ::opendir("/proc/self/fd");
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') top = std::max(top, std::atoi(e->d_name));
  }
  ::closedir(d);
  return top;
}

// On epoll and io_uring's fallback the shim makes the listener's accept calls fail with
// EMFILE (and counts them); on io_uring, whose accept never passes through libc, the
// descriptor table is really full. The sanitizer runtimes need descriptors of their own for
// some checks, so a really full table is left to the unsanitized build.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

TEST_P(LimitsTest, EmfileOnAcceptDoesNotSpinAndRecoversWhenDescriptorsFreeUp) {
  bool via_shim = shim_sees_loop(GetParam());
  if (!via_shim && kSanitized) {
    GTEST_SKIP() << "a full descriptor table starves the sanitizer runtime";
  }
  // The limit is lowered before the server exists: io_uring's accept takes the limit in force
  // when it was submitted.
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = static_cast<rlim_t>(highest_open_fd() + 64);
  if (!via_shim) {
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  }
  std::vector<FileDescriptor> fillers;
  std::optional<fi::Armed> accepts;
  auto restore = [&] {
    accepts.reset();
    fillers.clear();
    ::setrlimit(RLIMIT_NOFILE, &old);
  };
  struct OnExit {
    std::function<void()> f;
    ~OnExit() { f(); }
  } on_exit{restore};  // also when an assertion returns early
  std::optional<TestServer> server;
  server.emplace(options(), 1);
  server->bootstrap().child_handler(
      init([](Channel& ch) { ch.pipeline().add_last("echo", std::make_shared<EchoHandler>()); }));
  SocketAddress addr = server->start(InetSocketAddress::loopback_v4(0));
  if (via_shim) {
    accepts.emplace(fi::Rule{
        .calls = fi::accepts, .local_port = addr.inet().port(), .times = 0, .error = EMFILE});
  }
  // A client socket made before the table fills; its connection completes in the backlog.
  FileDescriptor client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  while (!via_shim) {
    FileDescriptor fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!fd) break;
    fillers.push_back(std::move(fd));
  }
  sockaddr_storage ss{};
  socklen_t len = addr.to_native(ss);
  ASSERT_EQ(::connect(client.get(), reinterpret_cast<sockaddr*>(&ss), len), 0);
  ASSERT_EQ(::send(client.get(), "ping", 4, MSG_NOSIGNAL), 4);
  std::uint64_t before = accepts ? accepts->fired() : 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the server is out of descriptors
  pollfd p{client.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0) << "served although the server could not accept";
  if (accepts) {
    // The listener retries a few times a second, it does not spin on EMFILE.
    std::uint64_t tries = accepts->fired() - before;
    EXPECT_GE(tries, 1u);
    EXPECT_LT(tries, 50u);
  }
  restore();
  // Recovered: the waiting connection is accepted and echoed.
  timeval tv{20, 0};
  ::setsockopt(client.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[4] = {};
  std::size_t got = 0;
  while (got < 4) {
    ssize_t k = ::recv(client.get(), buf + got, 4 - got, 0);
    if (k < 0 && errno == EINTR) continue;
    ASSERT_GT(k, 0) << "errno " << errno;
    got += static_cast<std::size_t>(k);
  }
  EXPECT_EQ(std::string(buf, 4), "ping");
  client.reset();
  server->stop();
}

TEST_P(LimitsTest, UdpSendToAClosedPortIsEconnrefusedAndNotFatal) {
  EventLoop loop(options());
  FileDescriptor rx = loop_udp_socket();
  FileDescriptor tx = loop_udp_socket();
  std::uint16_t closed_port;
  {
    FileDescriptor gone = loop_udp_socket();
    closed_port = local_port(gone.get());
  }
  sockaddr_in to = loopback_sockaddr(closed_port);
  ASSERT_EQ(::connect(tx.get(), reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  std::array<ByteBuffer, 1> out{ByteBuffer::wrap(std::string_view("nobody"))};
  std::optional<std::error_code> sent, received;
  loop.sendmsg(tx.get(), out, std::nullopt,
               [&](std::error_code ec, std::size_t, std::span<ByteBuffer>) { sent = ec; });
  std::array<ByteBuffer, 1> in{ByteBuffer::allocate(64)};
  loop.recvmsg(tx.get(), in,
               [&](std::error_code ec, std::size_t, std::span<ByteBuffer>, const SocketAddress&,
                   int) { received = ec; });
  ASSERT_TRUE(run_until(loop, [&] { return sent && received; }));
  EXPECT_FALSE(*sent);
  EXPECT_EQ(*received, std::errc::connection_refused);
  // The socket goes on: pointed at a live peer, the next datagram arrives.
  to.sin_port = htons(local_port(rx.get()));
  ASSERT_EQ(::connect(tx.get(), reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  std::array<ByteBuffer, 1> again{ByteBuffer::wrap(std::string_view("somebody"))};
  sent.reset();
  loop.sendmsg(tx.get(), again, std::nullopt,
               [&](std::error_code ec, std::size_t, std::span<ByteBuffer>) { sent = ec; });
  DatagramText arrived;
  arrived.receive(loop, rx.get());
  ASSERT_TRUE(run_until(loop, [&] { return sent && !arrived.text().empty(); }));
  EXPECT_FALSE(*sent);
  EXPECT_EQ(arrived.text(), "somebody");
  loop.close(std::move(rx));
  loop.close(std::move(tx));
}

TEST_P(LimitsTest, UdpOversizeSendIsEmsgsizeAndNothingIsTaken) {
  EventLoop loop(options());
  FileDescriptor rx = loop_udp_socket();
  FileDescriptor tx = loop_udp_socket();
  SocketAddress to(InetSocketAddress::loopback_v4(local_port(rx.get())));
  std::vector<std::byte> big(70000, std::byte{'b'});
  std::array<ByteBuffer, 2> huge{ByteBuffer::wrap(std::span<const std::byte>(big).first(30000)),
                                 ByteBuffer::wrap(std::span<const std::byte>(big).subspan(30000))};
  std::optional<std::error_code> e1, e2;
  std::size_t pos = 99;
  loop.sendmsg(tx.get(), huge, to,
               [&](std::error_code ec, std::size_t n, std::span<ByteBuffer> bufs) {
                 e1 = ec;
                 EXPECT_EQ(n, 0u);
                 pos = bufs[0].position() + bufs[1].position();
               });
  std::array<ByteBuffer, 1> small{ByteBuffer::wrap(std::string_view("small"))};
  loop.sendmsg(tx.get(), small, to,
               [&](std::error_code ec, std::size_t, std::span<ByteBuffer>) { e2 = ec; });
  DatagramText received;
  received.receive(loop, rx.get());
  ASSERT_TRUE(run_until(loop, [&] { return e1 && e2 && !received.text().empty(); }));
  EXPECT_EQ(*e1, std::errc::message_size);
  EXPECT_EQ(pos, 0u);
  EXPECT_FALSE(*e2);
  EXPECT_EQ(received.text(), "small");
  loop.close(std::move(rx));
  loop.close(std::move(tx));
}

// 3 GiB in one gathering write, made of 48 views of the same 64 MiB: the loop splits it into
// calls the kernel accepts (never EINVAL) and counts every byte. /dev/null takes it all.
TEST_P(LimitsTest, GatherOfMoreThanTwoGibibytesIsSplitAndCountedExactly) {
  EventLoop loop(options());
  FileDescriptor sink(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  ASSERT_GE(sink.get(), 0);
  constexpr std::size_t kPiece = 64u << 20;
  constexpr std::size_t kPieces = 48;
  auto block = ByteBuffer::allocate(kPiece);
  std::vector<ByteBuffer> views(kPieces, block);
  fi::Armed observe({.calls = fi::writes, .fd = sink.get(), .times = 0});
  std::optional<std::error_code> done;
  std::size_t total = 0;
  bool all_consumed = false;
  loop.write(sink.get(), views, [&](std::error_code ec, std::size_t n, std::span<ByteBuffer> bufs) {
    done = ec;
    total = n;
    all_consumed = true;
    for (auto& b : bufs)
      all_consumed = all_consumed && b.position() == b.limit() && b.limit() == kPiece;
  });
  ASSERT_TRUE(run_until(
      loop, [&] { return done.has_value(); }, std::chrono::seconds(60)));
  EXPECT_FALSE(*done);
  EXPECT_EQ(total, kPiece * kPieces);
  EXPECT_TRUE(all_consumed);
  if (shim_sees_loop(GetParam())) {
    EXPECT_GE(observe.seen(), 2u);  // more than one call
    EXPECT_LE(observe.largest_request(), std::size_t{0x7ffff000});
  }
  loop.close(std::move(sink));
}

// Short sends and receives on a ring of two entries with slow readers: every stream arrives
// complete and in order (the remainders are resubmitted, never reordered or dropped).
TEST_P(LimitsTest, TinyRingAndSlowReadersLoseNothing) {
  EventLoop loop(tiny_ring_options());
  constexpr int kPairs = 6;
  constexpr std::size_t kBytes = 600000;
  std::vector<std::pair<FileDescriptor, FileDescriptor>> pairs;
  std::vector<std::vector<std::byte>> sent(kPairs), got(kPairs);
  std::vector<int> writes_done(kPairs, 0);
  std::mt19937_64 g(21);
  std::function<void(int)> read_more = [&](int i) {
    loop.read(pairs[i].second.get(), ByteBuffer::allocate(1 + g() % 3000),
              [&, i](std::error_code ec, std::size_t n, ByteBuffer buf) {
                ASSERT_FALSE(ec);
                ASSERT_GT(n, 0u);
                buf.flip();
                auto s = buf.bytes();
                got[i].insert(got[i].end(), s.begin(), s.end());
                if (got[i].size() < kBytes) read_more(i);
              });
  };
  for (int i = 0; i < kPairs; ++i) {
    pairs.push_back(loop_socket_pair());
    int small = 4096;
    ::setsockopt(pairs.back().first.get(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    sent[i] = pseudo_random_bytes(kBytes, 100 + i);
    for (std::size_t off = 0; off < kBytes; off += 100000) {
      std::vector<ByteBuffer> bufs;
      for (std::size_t p = off; p < off + 100000; p += 25000) {
        bufs.push_back(ByteBuffer::wrap(std::span<const std::byte>(sent[i]).subspan(p, 25000)));
      }
      loop.write(pairs.back().first.get(), bufs,
                 [&, i](std::error_code ec, std::size_t n, std::span<ByteBuffer>) {
                   EXPECT_FALSE(ec);
                   EXPECT_EQ(n, 100000u);
                   ++writes_done[i];
                 });
    }
    read_more(i);
  }
  ASSERT_TRUE(run_until(
      loop,
      [&] {
        for (int i = 0; i < kPairs; ++i) {
          if (got[i].size() < kBytes || writes_done[i] < 6) return false;
        }
        return true;
      },
      std::chrono::seconds(60)));
  for (int i = 0; i < kPairs; ++i) EXPECT_TRUE(got[i] == sent[i]) << "pair " << i;
  for (auto& p : pairs) {
    loop.close(std::move(p.first));
    loop.close(std::move(p.second));
  }
}

}  // namespace
