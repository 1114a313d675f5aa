// Conformance suite of the EventLoop, run on every backend this machine has.
#include <niox/buffer/byte_buffer.hpp>
#include <niox/loop/event_loop.hpp>

#include "support/backends.hpp"
#include "support/loop_sockets.hpp"
#include "support/open_fds.hpp"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

namespace niox {
namespace {

using test::buffer_with;
using test::filled;
using test::read_into;
using test::run_until;
using namespace std::chrono_literals;

class LoopTest : public test::BackendTest {};

TEST_P(LoopTest, ReportsItsBackend) {
  EventLoop loop(options());
  EXPECT_EQ(loop.backend(), GetParam().kind);
  EXPECT_EQ(fmt::format("{}", loop.backend()), to_string(GetParam().kind));
}

TEST_P(LoopTest, ReadAndWriteOneBufferNeverCompleteInline) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  bool started = false, wrote = false, read = false;
  loop.write(a.get(), buffer_with("hello"), [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
    EXPECT_TRUE(started);
    EXPECT_FALSE(ec);
    EXPECT_EQ(n, 5u);
    EXPECT_EQ(buf.position(), 5u);  // advanced by exactly what was written
    wrote = true;
  });
  loop.read(b.get(), ByteBuffer::allocate(16),
            [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
              EXPECT_TRUE(started);
              EXPECT_FALSE(ec);
              EXPECT_EQ(n, 5u);
              EXPECT_EQ(filled(buf), "hello");
              read = true;
            });
  started = true;
  EXPECT_FALSE(wrote);
  ASSERT_TRUE(run_until(loop, [&] { return wrote && read; }));
  EXPECT_EQ(loop.pending(), 0u);
}

TEST_P(LoopTest, GatheringWriteScatteringRead) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  std::array<ByteBuffer, 4> out{buffer_with("ab"), ByteBuffer::allocate(0), buffer_with("cde"),
                                buffer_with("fgh")};
  bool wrote = false;
  loop.write(a.get(), out, [&](std::error_code ec, std::size_t n, std::span<ByteBuffer> bufs) {
    EXPECT_FALSE(ec);
    EXPECT_EQ(n, 8u);
    ASSERT_EQ(bufs.size(), 4u);
    for (auto& x : bufs) EXPECT_FALSE(x.has_remaining());
    wrote = true;
  });
  ASSERT_TRUE(run_until(loop, [&] { return wrote; }));
  EXPECT_EQ(out[0].position(), 0u);  // the caller's buffers are untouched duplicates
  std::array<ByteBuffer, 3> in{ByteBuffer::allocate(3), ByteBuffer::allocate(1),
                               ByteBuffer::allocate(10)};
  bool read = false;
  loop.read(b.get(), in, [&](std::error_code ec, std::size_t n, std::span<ByteBuffer> bufs) {
    EXPECT_FALSE(ec);
    EXPECT_EQ(n, 8u);
    EXPECT_EQ(filled(bufs[0]), "abc");
    EXPECT_EQ(filled(bufs[1]), "d");
    EXPECT_EQ(filled(bufs[2]), "efgh");
    read = true;
  });
  ASSERT_TRUE(run_until(loop, [&] { return read; }));
  EXPECT_GE(loop.counters().gathering_writes, 1u);
}

// Many writes queued at once on a socket with a tiny send buffer: every one is short, each
// resubmitted from where it stopped, the stream is their exact concatenation, and they complete
// in order.
TEST_P(LoopTest, WritesCompleteInOrderAndShortWritesResume) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  int small = 4096;
  ::setsockopt(a.get(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  constexpr int kWrites = 40;
  constexpr std::size_t kSize = 50000;
  std::vector<int> order;
  std::string expected;
  for (int i = 0; i < kWrites; ++i) {
    std::string chunk(kSize, static_cast<char>('A' + i % 26));
    chunk[0] = static_cast<char>(i);
    expected += chunk;
    std::array<ByteBuffer, 2> parts{buffer_with(chunk.substr(0, 1000)),
                                    buffer_with(chunk.substr(1000))};
    loop.write(a.get(), parts, [&, i](std::error_code ec, std::size_t n, std::span<ByteBuffer>) {
      EXPECT_FALSE(ec);
      EXPECT_EQ(n, kSize);
      order.push_back(i);
    });
  }
  std::string got;
  read_into(loop, b.get(), 7000, expected.size(), got);
  ASSERT_TRUE(
      run_until(loop, [&] { return got.size() == expected.size() && order.size() == kWrites; }));
  EXPECT_TRUE(got == expected);
  for (int i = 0; i < kWrites; ++i) EXPECT_EQ(order[i], i);
}

TEST_P(LoopTest, ReadsCompleteInOrder) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  std::vector<std::string> got;
  for (int i = 0; i < 5; ++i) {
    loop.read(b.get(), ByteBuffer::allocate(2),
              [&](std::error_code ec, std::size_t, ByteBuffer buf) {
                EXPECT_FALSE(ec);
                got.push_back(filled(buf));
              });
  }
  ASSERT_EQ(::write(a.get(), "0011223344", 10), 10);
  ASSERT_TRUE(run_until(loop, [&] { return got.size() == 5; }));
  EXPECT_EQ(got, (std::vector<std::string>{"00", "11", "22", "33", "44"}));
}

TEST_P(LoopTest, EndOfStreamIsZeroBytesWithoutError) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  bool done = false;
  loop.read(b.get(), ByteBuffer::allocate(8), [&](std::error_code ec, std::size_t n, ByteBuffer) {
    EXPECT_FALSE(ec);
    EXPECT_EQ(n, 0u);
    done = true;
  });
  a.reset();
  ASSERT_TRUE(run_until(loop, [&] { return done; }));
}

// One loopback TCP connection accepted and connected through the loop; server_fd is invalid if
// that failed.
struct Connected {
  FileDescriptor client;
  FileDescriptor server_fd;
};
Connected connect_through(EventLoop& loop, const FileDescriptor& listener) {
  Connected c{test::loop_tcp_socket(), FileDescriptor()};
  bool connected = false;
  loop.accept(listener.get(), [&](std::error_code ec, FileDescriptor fd) {
    EXPECT_FALSE(ec);
    c.server_fd = std::move(fd);
  });
  loop.connect(c.client.get(), InetSocketAddress::loopback_v4(test::local_port(listener.get())),
               [&](std::error_code ec) {
                 EXPECT_FALSE(ec);
                 connected = true;
               });
  run_until(loop, [&] { return connected && c.server_fd.valid(); });
  return c;
}

TEST_P(LoopTest, AcceptConnectAndTalk) {
  EventLoop loop(options());
  FileDescriptor listener = test::loop_tcp_listener();
  auto [client, server_fd] = connect_through(loop, listener);
  const int server = server_fd.get();
  ASSERT_GE(server, 0);
  EXPECT_TRUE(::fcntl(server, F_GETFD) & FD_CLOEXEC);
  std::string got;
  loop.write(client.get(), buffer_with("ping"),
             [](std::error_code ec, std::size_t, ByteBuffer) { EXPECT_FALSE(ec); });
  loop.read(server, ByteBuffer::allocate(16), [&](std::error_code ec, std::size_t, ByteBuffer b) {
    EXPECT_FALSE(ec);
    got = filled(b);
  });
  ASSERT_TRUE(run_until(loop, [&] { return !got.empty(); }));
  EXPECT_EQ(got, "ping");
  loop.close(std::move(server_fd));
  loop.close(std::move(client));
  loop.close(std::move(listener));
}

TEST_P(LoopTest, ConnectRefusedIsAnError) {
  EventLoop loop(options());
  FileDescriptor listener = test::loop_tcp_listener();
  std::uint16_t port = test::local_port(listener.get());
  listener.reset();  // nobody listens there now
  FileDescriptor client = test::loop_tcp_socket();
  std::error_code result;
  bool done = false;
  loop.connect(client.get(), InetSocketAddress::loopback_v4(port), [&](std::error_code ec) {
    result = ec;
    done = true;
  });
  ASSERT_TRUE(run_until(loop, [&] { return done; }));
  EXPECT_EQ(result, std::errc::connection_refused);
  loop.close(std::move(client));
}

TEST_P(LoopTest, AcceptMultishotUntilCancelled) {
  EventLoop loop(options());
  FileDescriptor listener = test::loop_tcp_listener();
  std::vector<FileDescriptor> accepted;
  std::error_code final_ec;
  int calls_after_final = 0;
  bool final_seen = false;
  auto h = loop.accept_multishot(listener.get(), [&](std::error_code ec, FileDescriptor fd) {
    if (final_seen) ++calls_after_final;
    if (ec) {
      final_ec = ec;
      final_seen = true;
      EXPECT_FALSE(fd.valid());
      return;
    }
    accepted.push_back(std::move(fd));
  });
  std::vector<FileDescriptor> clients;
  for (int i = 0; i < 5; ++i) clients.push_back(test::loop_tcp_client(listener.get()));
  ASSERT_TRUE(run_until(loop, [&] { return accepted.size() == 5; }));
  EXPECT_TRUE(loop.cancel(h));
  ASSERT_TRUE(run_until(loop, [&] { return final_seen; }));
  EXPECT_EQ(final_ec, std::errc::operation_canceled);
  loop.run_once();
  EXPECT_EQ(calls_after_final, 0);
  EXPECT_FALSE(loop.cancel(h));
  loop.release(listener);
}

// An accept that finds the queue empty costs about what a successful one does (the kernel sets
// up the new socket first), so the multishot accept never makes one once a connection came:
// with connections arriving one at a time, each is one accept and no attempt finds EAGAIN.
TEST_P(LoopTest, AcceptMultishotMakesNoAcceptThatFindsTheQueueEmpty) {
  EventLoop loop(options());
  FileDescriptor listener = test::loop_tcp_listener();
  std::vector<FileDescriptor> accepted, clients;
  bool ended = false;
  auto h = loop.accept_multishot(listener.get(), [&](std::error_code ec, FileDescriptor fd) {
    if (ec)
      ended = true;
    else
      accepted.push_back(std::move(fd));
  });
  clients.push_back(test::loop_tcp_client(listener.get()));
  ASSERT_TRUE(run_until(loop, [&] { return accepted.size() == 1; }));
  const LoopCounters before = loop.counters();
  constexpr std::size_t kConnections = 20;
  for (std::size_t i = 1; i <= kConnections; ++i) {
    clients.push_back(test::loop_tcp_client(listener.get()));
    ASSERT_TRUE(run_until(loop, [&] { return accepted.size() == i + 1; }));
  }
  if (loop.backend() == BackendKind::epoll) {
    // Before the queue was polled, each connection cost a second accept4 that found it empty.
    EXPECT_EQ(loop.counters().would_block - before.would_block, 0u);
  }
  EXPECT_TRUE(loop.cancel(h));
  ASSERT_TRUE(run_until(loop, [&] { return ended; }));
  EXPECT_EQ(accepted.size(), kConnections + 1);
  loop.close(std::move(listener));
}

// The handler owns each accepted connection: one it drops is closed with its FileDescriptor,
// for the single and the multishot accept, so a server that lets connections go leaks nothing.
TEST_P(LoopTest, AcceptedConnectionsTheHandlerDropsAreClosed) {
  EventLoop loop(options());
  FileDescriptor listener = test::loop_tcp_listener();
  constexpr int kEach = 16;
  const int before = test::open_fd_count();
  std::vector<FileDescriptor> clients;
  for (int i = 0; i < 2 * kEach; ++i) clients.push_back(test::loop_tcp_client(listener.get()));
  int accepted = 0;
  std::function<void()> accept_one = [&] {
    loop.accept(listener.get(), [&](std::error_code ec, FileDescriptor fd) {
      EXPECT_FALSE(ec);
      EXPECT_TRUE(fd.valid());
      if (++accepted < kEach) accept_one();
    });  // `fd` goes out of scope: the connection closes
  };
  accept_one();
  ASSERT_TRUE(test::run_until(loop, [&] { return accepted == kEach; }));
  bool ended = false;
  auto h = loop.accept_multishot(listener.get(), [&](std::error_code ec, FileDescriptor fd) {
    EXPECT_EQ(fd.valid(), !ec);
    if (ec)
      ended = true;
    else
      ++accepted;
  });
  ASSERT_TRUE(test::run_until(loop, [&] { return accepted == 2 * kEach; }));
  loop.cancel(h);
  ASSERT_TRUE(test::run_until(loop, [&] { return ended; }));
  clients.clear();  // never used with the loop
  EXPECT_EQ(test::open_fd_count(), before);
  loop.close(std::move(listener));
}

// EMFILE on accept: the multishot accept ends with that error (no busy loop), and accepting
// works again once descriptors are available.
TEST_P(LoopTest, AcceptOutOfDescriptorsFailsOnceAndRecovers) {
  EventLoop loop(options());
  FileDescriptor listener = test::loop_tcp_listener();
  std::vector<FileDescriptor> clients;
  for (int i = 0; i < 3; ++i) clients.push_back(test::loop_tcp_client(listener.get()));
  loop.run_once();
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  FileDescriptor probe(::dup(0));  // the lowest free number
  ASSERT_TRUE(probe.valid());
  const int lowest_free = probe.get();
  probe.reset();
  rlimit tight = old;
  tight.rlim_cur = static_cast<rlim_t>(lowest_free);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
  std::vector<FileDescriptor> accepted;
  std::error_code final_ec;
  int calls = 0;
  loop.accept_multishot(listener.get(), [&](std::error_code ec, FileDescriptor fd) {
    ++calls;
    if (ec)
      final_ec = ec;
    else
      accepted.push_back(std::move(fd));
  });
  bool ended = run_until(
      loop, [&] { return static_cast<bool>(final_ec); }, std::chrono::seconds(10));
  int calls_at_end = calls;
  loop.run_once(20ms);
  ::setrlimit(RLIMIT_NOFILE, &old);
  ASSERT_TRUE(ended);
  EXPECT_EQ(final_ec, std::errc::too_many_files_open);
  EXPECT_EQ(calls, calls_at_end);  // nothing more after the final call: no spinning
  EXPECT_TRUE(accepted.empty());
  // Descriptors are back: accepting resumes where it stopped.
  loop.accept_multishot(listener.get(), [&](std::error_code ec, FileDescriptor fd) {
    if (!ec) accepted.push_back(std::move(fd));
  });
  ASSERT_TRUE(run_until(loop, [&] { return accepted.size() == 3; }));
  for (auto& fd : accepted) loop.close(std::move(fd));
  loop.close(std::move(listener));
}

TEST_P(LoopTest, DatagramsWithAddresses) {
  EventLoop loop(options());
  FileDescriptor rx = test::loop_udp_socket();
  FileDescriptor tx = test::loop_udp_socket();
  InetSocketAddress to = InetSocketAddress::loopback_v4(test::local_port(rx.get()));
  bool sent = false;
  std::array<ByteBuffer, 2> out{buffer_with("da"), buffer_with("tagram")};
  loop.sendmsg(tx.get(), out, SocketAddress(to),
               [&](std::error_code ec, std::size_t n, std::span<ByteBuffer>) {
                 EXPECT_FALSE(ec);
                 EXPECT_EQ(n, 8u);
                 sent = true;
               });
  std::string got;
  SocketAddress from;
  int flags = -1;
  std::array<ByteBuffer, 1> in{ByteBuffer::allocate(5)};  // too small: truncated
  loop.recvmsg(rx.get(), in,
               [&](std::error_code ec, std::size_t n, std::span<ByteBuffer> bufs,
                   const SocketAddress& peer, int msg_flags) {
                 EXPECT_FALSE(ec);
                 EXPECT_EQ(n, 5u);
                 got = filled(bufs[0]);
                 from = peer;
                 flags = msg_flags;
               });
  ASSERT_TRUE(run_until(loop, [&] { return sent && flags != -1; }));
  EXPECT_EQ(got, "datag");
  EXPECT_TRUE(flags & MSG_TRUNC);
  ASSERT_TRUE(from.is_inet());
  EXPECT_EQ(from.inet().port(), test::local_port(tx.get()));
}

TEST_P(LoopTest, PollForReadiness) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  int revents = 0;
  loop.poll(b.get(), POLLIN, [&](std::error_code ec, int ev) {
    EXPECT_FALSE(ec);
    revents = ev;
  });
  loop.run_once();
  EXPECT_EQ(revents, 0);
  ASSERT_EQ(::write(a.get(), "x", 1), 1);
  ASSERT_TRUE(run_until(loop, [&] { return revents != 0; }));
  EXPECT_TRUE(revents & POLLIN);
}

TEST_P(LoopTest, FileWriteAtAndReadAtWithManyBuffers) {
  EventLoop loop(options());
  FileDescriptor file = test::loop_temp_file();
  std::array<ByteBuffer, 3> out{buffer_with("hello "), buffer_with("file "), buffer_with("world")};
  bool wrote = false;
  loop.write_at(file.get(), 100, out,
                [&](std::error_code ec, std::size_t n, std::span<ByteBuffer>) {
                  EXPECT_FALSE(ec);
                  EXPECT_EQ(n, 16u);
                  wrote = true;
                });
  ASSERT_TRUE(run_until(loop, [&] { return wrote; }));
  std::array<ByteBuffer, 2> in{ByteBuffer::allocate(6), ByteBuffer::allocate(20)};
  std::string got;
  std::size_t count = 0;
  loop.read_at(file.get(), 100, in,
               [&](std::error_code ec, std::size_t n, std::span<ByteBuffer> bufs) {
                 EXPECT_FALSE(ec);
                 count = n;
                 got = filled(bufs[0]) + "|" + filled(bufs[1]);
               });
  ASSERT_TRUE(run_until(loop, [&] { return count != 0; }));
  EXPECT_EQ(count, 16u);
  EXPECT_EQ(got, "hello |file world");
  bool eof = false;
  loop.read_at(file.get(), 4096, in, [&](std::error_code ec, std::size_t n, std::span<ByteBuffer>) {
    EXPECT_FALSE(ec);
    EXPECT_EQ(n, 0u);
    eof = true;
  });
  ASSERT_TRUE(run_until(loop, [&] { return eof; }));
}

TEST_P(LoopTest, TransferFileToSocketAndPastEndOfFile) {
  EventLoop loop(options());
  FileDescriptor file = test::loop_temp_file();
  std::string content;
  for (int i = 0; i < 300000; ++i) content.push_back(static_cast<char>(i * 7 + i / 251));
  ASSERT_EQ(::pwrite(file.get(), content.data(), content.size(), 0),
            static_cast<ssize_t>(content.size()));
  auto [a, b] = test::loop_socket_pair();
  std::size_t sent = 0;
  bool done = false;
  loop.transfer_to(file.get(), 1000, content.size() - 1000, a.get(),
                   [&](std::error_code ec, std::size_t n, TransferPath path) {
                     EXPECT_EQ(path, TransferPath::sendfile);
                     EXPECT_FALSE(ec) << ec.message();
                     sent = n;
                     done = true;
                   });
  std::string got;
  read_into(loop, b.get(), 65536, content.size() - 1000, got);
  ASSERT_TRUE(run_until(loop, [&] { return done && got.size() == content.size() - 1000; }));
  EXPECT_EQ(sent, content.size() - 1000);
  EXPECT_TRUE(got == content.substr(1000));

  std::error_code past;
  std::size_t n_past = 0;
  done = false;
  loop.transfer_to(file.get(), content.size() - 10, 100, a.get(),
                   [&](std::error_code ec, std::size_t n, TransferPath) {
                     past = ec;
                     n_past = n;
                     done = true;
                   });
  ASSERT_TRUE(run_until(loop, [&] { return done; }));
  EXPECT_EQ(past, LoopError::end_of_file);
  EXPECT_EQ(n_past, 10u);
}

// WriteFlags::more is MSG_MORE: the bytes wait in the socket, unsent, for what follows; a plain
// write or a transfer_to pushes them with its own bytes, in order. On a pipe the flag is ignored.
TEST_P(LoopTest, WriteWithMoreWaitsForTheBytesThatFollow) {
  EventLoop loop(options());
  FileDescriptor listener = test::loop_tcp_listener();
  auto [client, server_fd] = connect_through(loop, listener);
  const int server = server_fd.get();
  ASSERT_GE(server, 0);
  int one = 1;
  ASSERT_EQ(::setsockopt(client.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one), 0);

  int writes = 0;
  auto counted = [&](std::error_code ec, std::size_t, auto&&) {
    EXPECT_FALSE(ec);
    ++writes;
  };
  loop.write(client.get(), buffer_with("head"), WriteFlags::more, counted);
  ASSERT_TRUE(run_until(loop, [&] { return writes == 1; }));
  EXPECT_EQ(test::unsent_bytes(client.get()), 4);
  std::array<ByteBuffer, 2> two{buffer_with("er"), buffer_with("\r\n")};
  loop.write(client.get(), std::span<const ByteBuffer>(two), WriteFlags::more, counted);
  ASSERT_TRUE(run_until(loop, [&] { return writes == 2; }));
  EXPECT_EQ(test::unsent_bytes(client.get()), 8);

  FileDescriptor file = test::loop_temp_file();
  std::string body;
  for (int i = 0; i < 200000; ++i) body.push_back(static_cast<char>(i * 13 + i / 257));
  ASSERT_EQ(::pwrite(file.get(), body.data(), body.size(), 0), static_cast<ssize_t>(body.size()));
  bool sent = false;
  loop.transfer_to(file.get(), 0, body.size(), client.get(),
                   [&](std::error_code ec, std::size_t n, TransferPath) {
                     EXPECT_FALSE(ec);
                     EXPECT_EQ(n, body.size());
                     sent = true;
                   });
  std::string got;
  std::size_t want = 8 + body.size();
  read_into(loop, server, 65536, want, got);
  ASSERT_TRUE(run_until(loop, [&] { return sent && got.size() == want; }));
  EXPECT_TRUE(got == "header\r\n" + body);

  // Held again, then pushed by a plain write in the same send.
  loop.write(client.get(), buffer_with("tail"), WriteFlags::more, counted);
  ASSERT_TRUE(run_until(loop, [&] { return writes == 3; }));
  EXPECT_EQ(test::unsent_bytes(client.get()), 4);
  loop.write(client.get(), buffer_with("!"), counted);
  ASSERT_TRUE(run_until(loop, [&] { return writes == 4; }));
  EXPECT_EQ(test::unsent_bytes(client.get()), 0);
  got.clear();
  read_into(loop, server, 65536, 5, got);
  ASSERT_TRUE(run_until(loop, [&] { return got.size() == 5; }));
  EXPECT_EQ(got, "tail!");

  auto [pr, pw] = test::loop_pipe();
  loop.write(pw.get(), buffer_with("pipe"), WriteFlags::more, counted);
  ASSERT_TRUE(run_until(loop, [&] { return writes == 5; }));
  char buf[8];
  EXPECT_EQ(::read(pr.get(), buf, sizeof buf), 4);
  loop.close(std::move(server_fd));
  loop.close(std::move(client));
  loop.close(std::move(listener));
  loop.close(std::move(pr));
  loop.close(std::move(pw));
}

TEST_P(LoopTest, TimersFireInDeadlineOrderAndCancelOnce) {
  EventLoop loop(options());
  std::vector<int> fired;
  int cancelled_ran = 0;
  loop.schedule(30ms, [&] { fired.push_back(3); });
  loop.schedule(10ms, [&] { fired.push_back(1); });
  loop.schedule(20ms, [&] { fired.push_back(2); });
  auto timer = loop.schedule(10ms, [&] { ++cancelled_ran; });
  EXPECT_TRUE(timer.cancel());
  EXPECT_FALSE(timer.cancel());
  EXPECT_TRUE(timer.is_cancelled());
  ASSERT_TRUE(run_until(loop, [&] { return fired.size() == 3 && loop.pending() == 0; }));
  EXPECT_EQ(fired, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(cancelled_ran, 0);
}

// An idle-timeout pattern: re-arm a long timer and cancel the previous one, many times. None
// runs, and each cancelled one is released at once, not at its deadline (the loop compacts
// cancelled entries): memory stays bounded.
TEST_P(LoopTest, ReArmedTimersAreReleasedWhenCancelled) {
  EventLoop loop(options());
  int fired = 0;
  ScheduledFuture timer;
  for (int i = 0; i < 5000; ++i) {
    timer.cancel();
    timer = loop.schedule(1h, [&] { ++fired; });
    if (i % 100 == 0) loop.run_once();
  }
  EXPECT_TRUE(timer.cancel());
  ASSERT_TRUE(run_until(loop, [&] { return loop.pending() == 0; }));
  EXPECT_EQ(fired, 0);
}

TEST_P(LoopTest, PeriodicTimerUntilCancelled) {
  EventLoop loop(options());
  int ticks = 0;
  ScheduledFuture timer;
  timer = loop.schedule_at_fixed_rate(1ms, 2ms, [&] {
    if (++ticks == 3) {
      EXPECT_TRUE(timer.cancel());
    }
  });
  ASSERT_TRUE(run_until(loop, [&] { return ticks == 3 && loop.pending() == 0; }));
  loop.run_once(5ms);
  EXPECT_EQ(ticks, 3);
  EXPECT_FALSE(timer.cancel());
  EXPECT_EQ(loop.pending(), 0u);
}

TEST_P(LoopTest, CancelPendingReadReturnsItsBuffer) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  int calls = 0;
  auto h = loop.read(b.get(), ByteBuffer::allocate(32),
                     [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
                       EXPECT_EQ(ec, std::errc::operation_canceled);
                       EXPECT_EQ(n, 0u);
                       EXPECT_EQ(buf.capacity(), 32u);
                       ++calls;
                     });
  loop.run_once();  // now in the kernel / parked
  EXPECT_TRUE(loop.cancel(h));
  ASSERT_TRUE(run_until(loop, [&] { return calls == 1; }));
  loop.run_once();
  EXPECT_EQ(calls, 1);
  // The descriptor still works afterwards.
  std::string got;
  ASSERT_EQ(::write(a.get(), "ok", 2), 2);
  loop.read(b.get(), ByteBuffer::allocate(8),
            [&](std::error_code, std::size_t, ByteBuffer buf) { got = filled(buf); });
  ASSERT_TRUE(run_until(loop, [&] { return !got.empty(); }));
  EXPECT_EQ(got, "ok");
}

// close(fd) with reads, queued reads and a blocked write pending: each completes once with
// operation_aborted; a new descriptor that gets the same number never sees a stale completion.
TEST_P(LoopTest, CloseWithOperationsInFlightAndDescriptorReuse) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  int small = 4096;
  ::setsockopt(a.get(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  int aborted = 0, other = 0;
  auto count = [&](std::error_code ec) {
    ec == std::errc::operation_canceled ? ++aborted : ++other;
  };
  for (int i = 0; i < 3; ++i) {
    loop.read(a.get(), ByteBuffer::allocate(64),
              [&, count](std::error_code ec, std::size_t, ByteBuffer) { count(ec); });
  }
  loop.write(a.get(), ByteBuffer::allocate(1 << 20),
             [&, count](std::error_code ec, std::size_t, ByteBuffer) { count(ec); });
  loop.write(a.get(), buffer_with("queued"),
             [&, count](std::error_code ec, std::size_t, ByteBuffer) { count(ec); });
  loop.poll(a.get(), POLLPRI, [&, count](std::error_code ec, int) { count(ec); });
  loop.run_once();
  loop.run_once();
  int number = a.get();
  EXPECT_FALSE(loop.close(std::move(a)));
  // Reuse the number at once, before the aborted completions were reaped.
  auto [c, d] = test::loop_socket_pair();
  int reused = c.get() == number ? c.get() : d.get() == number ? d.get() : -1;
  std::string got;
  if (reused >= 0) {
    int peer = reused == c.get() ? d.get() : c.get();
    ASSERT_EQ(::write(peer, "new", 3), 3);
    loop.read(reused, ByteBuffer::allocate(8),
              [&](std::error_code ec, std::size_t, ByteBuffer buf) {
                EXPECT_FALSE(ec);
                got = filled(buf);
              });
  }
  ASSERT_TRUE(
      run_until(loop, [&] { return aborted + other == 6 && (reused < 0 || !got.empty()); }));
  EXPECT_EQ(aborted, 6);
  EXPECT_EQ(other, 0);
  if (reused >= 0) {
    EXPECT_EQ(got, "new");
  }
  loop.run_once();
  EXPECT_EQ(aborted, 6);
  if (reused >= 0) loop.release(reused == c.get() ? c : d);
}

// Destroying the loop with operations in the kernel: every handler runs once with
// operation_aborted before the destructor returns, and the buffers (owned only by the
// operations) stay valid until then (ASan would see a write into freed memory).
TEST_P(LoopTest, DestroyWithOperationsInFlight) {
  auto [a, b] = test::loop_socket_pair();
  FileDescriptor file = test::loop_temp_file();
  int aborted = 0, total = 0, timer_ran = 0;
  {
    EventLoop loop(options());
    for (int i = 0; i < 8; ++i) {
      loop.read(i % 2 ? a.get() : b.get(), ByteBuffer::allocate(4096),
                [&](std::error_code ec, std::size_t, ByteBuffer buf) {
                  ++total;
                  if (ec == std::errc::operation_canceled) ++aborted;
                  EXPECT_EQ(buf.capacity(), 4096u);
                });
    }
    loop.schedule(1h, [&] { ++timer_ran; });  // pending when the loop goes: never runs
    loop.accept_multishot(b.get(),
                          [&](std::error_code ec, FileDescriptor) {  // fails: not a listener
                            ++total;
                            if (ec) ++aborted;
                          });
    loop.run_once();
    loop.run_once();
  }
  EXPECT_EQ(total, 9);
  EXPECT_EQ(aborted, 9);
  EXPECT_EQ(timer_ran, 0);
}

TEST_P(LoopTest, ExecuteFromManyThreads) {
  EventLoop loop(options());
  constexpr int kThreads = 4, kTasks = 2000;
  std::atomic<int> wrong_thread{0};
  int ran = 0;  // loop thread only
  std::thread::id loop_thread = std::this_thread::get_id();
  loop.run_once();  // binds the loop to this thread
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kTasks; ++i) {
        loop.execute([&] {
          if (std::this_thread::get_id() != loop_thread) ++wrong_thread;
          if (++ran == kThreads * kTasks) loop.stop();
        });
      }
    });
  }
  std::thread watchdog_guard;
  loop.run();
  for (auto& t : threads) t.join();
  EXPECT_EQ(ran, kThreads * kTasks);
  EXPECT_EQ(wrong_thread.load(), 0);
  EXPECT_GE(loop.counters().tasks_run, static_cast<std::uint64_t>(kThreads * kTasks));
}

// The loop thread queues its own tasks without a lock, apart from other threads'. Whatever
// the queue, a task never overtakes one that was queued before it by a thread that saw it
// queued: the three ways a loop task and another thread's task can be ordered.
TEST_P(LoopTest, TasksFromTheLoopAndFromOtherThreadsKeepTheOrderTheyWereQueuedIn) {
  EventLoop loop(options());
  std::vector<std::string> order;  // loop thread only
  auto note = [&](std::string what) { return [&order, what] { order.push_back(what); }; };
  auto from_another_thread = [&](std::string what) {
    std::thread t([&loop, task = note(what)] { loop.execute(task); });
    t.join();
  };
  loop.execute([&] {
    // 1. Queued by the loop, then by another thread that ran after it.
    loop.execute(note("loop-1"));
    from_another_thread("other-1");
    // 2. Queued by another thread, then by the loop once that thread is done.
    from_another_thread("other-2");
    loop.execute(note("loop-2"));
    loop.execute([&] {
      // 3. The same from inside a task of the loop's own queue.
      loop.execute(note("loop-3"));
      from_another_thread("other-3");
      from_another_thread("other-4");
      loop.execute(note("loop-4"));
      loop.execute([&] { loop.stop(); });
    });
  });
  loop.run();
  EXPECT_EQ(order, (std::vector<std::string>{"loop-1", "other-1", "other-2", "loop-2", "loop-3",
                                             "other-3", "other-4", "loop-4"}));
}

// now() on the loop thread is the time the turn's wait returned: it does not move within a
// turn, never runs ahead of the clock, and a timer never fires before now() + its delay.
TEST_P(LoopTest, NowIsTheTurnsTimeAndTimersNeverFireBeforeIt) {
  EventLoop loop(options());
  EventLoop::Clock::time_point first{}, again{}, fired_at{};
  EventLoop::Clock::time_point deadline{};
  loop.execute([&] {
    loop.execute([&] {  // in the second turn, after a wait
      first = loop.now();
      std::this_thread::sleep_for(2ms);
      again = loop.now();
      EXPECT_LE(again, EventLoop::Clock::now());
      deadline = loop.now() + 5ms;
      loop.schedule(5ms, [&] {
        fired_at = EventLoop::Clock::now();
        loop.stop();
      });
    });
  });
  loop.run();
  EXPECT_EQ(first, again);
  EXPECT_GE(fired_at, deadline);
  // Off the loop thread it is the clock itself.
  std::thread([&] {
    auto before = EventLoop::Clock::now();
    EXPECT_GE(loop.now(), before);
  }).join();
}

TEST_P(LoopTest, StopFromAnotherThreadWakesASleepingLoop) {
  EventLoop loop(options());
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    loop.stop();
  });
  loop.run();  // would sleep forever without the wake-up
  t.join();
  EXPECT_GE(loop.counters().wakeups, 1u);
}

// Once the loop runs on its thread, an operation started from another thread is refused at
// once (it would race with the loop and might never complete); timers and tasks hop instead.
TEST_P(LoopTest, OperationsFromAnotherThreadAreRefusedTimersHop) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  loop.run_once();  // binds the loop to this thread
  std::atomic<int> refused{0};
  std::atomic<bool> ran_on_loop{false};
  std::atomic<int> fired{0};
  ScheduledFuture cancelled;
  std::thread other([&] {
    try {
      loop.read(b.get(), ByteBuffer::allocate(8), [](std::error_code, std::size_t, ByteBuffer) {});
    } catch (const IllegalStateException&) {
      ++refused;
    }
    try {
      loop.write(a.get(), ByteBuffer::wrap(std::string_view("x")),
                 [](std::error_code, std::size_t, ByteBuffer) {});
    } catch (const IllegalStateException&) {
      ++refused;
    }
    loop.schedule(1ms, [&] {
      ran_on_loop = loop.in_event_loop();
      ++fired;
    });
    cancelled = loop.schedule(1h, [&] { ++fired; });
    EXPECT_TRUE(cancelled.cancel());
    EXPECT_FALSE(loop.in_event_loop());
  });
  other.join();
  EXPECT_EQ(refused.load(), 2);
  ASSERT_TRUE(run_until(loop, [&] { return fired.load() == 1 && loop.pending() == 0; }));
  EXPECT_TRUE(ran_on_loop.load());
  EXPECT_EQ(fired.load(), 1);
  EXPECT_TRUE(cancelled.is_cancelled());
  EXPECT_EQ(loop.pending(), 0u);  // nothing leaked into the loop
}

// A socket pair carries 1 GiB (256 MiB under sanitizers) in gathering writes of varied
// buffers; the receiver checks a running checksum of every byte.
TEST_P(LoopTest, OneGibThroughASocketPairWithChecksum) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  constexpr std::uint64_t kTotal = 256ull << 20;
#else
  constexpr std::uint64_t kTotal = 1ull << 30;
#endif
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  constexpr std::size_t kChunk = 1 << 20;
  std::vector<std::byte> pattern(kChunk + 4096);
  std::uint32_t x = 2463534242u;
  for (auto& byte : pattern) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    byte = static_cast<std::byte>(x);
  }
  auto checksum = [](std::uint64_t h, std::span<const std::byte> s) {
    for (std::byte c : s) h = (h ^ static_cast<std::uint8_t>(c)) * 1099511628211ull;
    return h;
  };
  std::uint64_t sent = 0, received = 0, sum_out = 14695981039346656037ull, sum_in = sum_out;
  std::size_t round = 0;
  std::function<void()> write_more = [&] {
    if (sent == kTotal) return;
    std::size_t off = (round * 977) % 4096;
    std::size_t len = std::min<std::uint64_t>(kChunk, kTotal - sent);
    std::size_t cut = std::min<std::size_t>(len, (round * 131) % 3000);
    std::array<ByteBuffer, 2> bufs{
        ByteBuffer::wrap(std::span<std::byte>(pattern.data() + off, cut)),
        ByteBuffer::wrap(std::span<std::byte>(pattern.data() + off + cut, len - cut))};
    sum_out = checksum(sum_out, std::span<const std::byte>(pattern.data() + off, len));
    ++round;
    loop.write(a.get(), bufs, [&, len](std::error_code ec, std::size_t n, std::span<ByteBuffer>) {
      ASSERT_FALSE(ec);
      ASSERT_EQ(n, len);
      sent += n;
      write_more();
    });
  };
  ByteBuffer in = ByteBuffer::allocate(256 * 1024);
  std::function<void(ByteBuffer)> read_more = [&](ByteBuffer buf) {
    buf.clear();
    loop.read(b.get(), std::move(buf), [&](std::error_code ec, std::size_t n, ByteBuffer got) {
      ASSERT_FALSE(ec);
      ASSERT_GT(n, 0u);
      sum_in = checksum(sum_in, got.array_view().first(n));
      received += n;
      if (received < kTotal) read_more(std::move(got));
    });
  };
  write_more();
  read_more(std::move(in));
  ASSERT_TRUE(run_until(
      loop, [&] { return received == kTotal && sent == kTotal; }, std::chrono::seconds(120)));
  EXPECT_EQ(sum_in, sum_out);
  auto c = loop.counters();
  EXPECT_EQ(c.bytes_written, kTotal);
  EXPECT_EQ(c.bytes_read, kTotal);
}

// A ring of 2 entries (CQ of 4) with 64 reads in flight: the SQ fills, the CQ overflows, and
// nothing is lost. On epoll the same load simply runs.
TEST_P(LoopTest, TinyRingFullSubmissionAndOverflowingCompletionQueues) {
  EventLoop loop(tiny_ring_options());
  constexpr int kPairs = 64;
  std::vector<std::pair<FileDescriptor, FileDescriptor>> pairs;
  int done = 0;
  for (int i = 0; i < kPairs; ++i) {
    pairs.push_back(test::loop_socket_pair());
    loop.read(pairs.back().second.get(), ByteBuffer::allocate(8),
              [&, i](std::error_code ec, std::size_t, ByteBuffer buf) {
                EXPECT_FALSE(ec);
                EXPECT_EQ(filled(buf), std::to_string(i));
                ++done;
              });
  }
  loop.run_once();
  loop.run_once();
  for (int i = 0; i < kPairs; ++i) {
    std::string s = std::to_string(i);
    ASSERT_EQ(::write(pairs[i].first.get(), s.data(), s.size()), static_cast<ssize_t>(s.size()));
  }
  ASSERT_TRUE(run_until(loop, [&] { return done == kPairs; }));
  for (auto& p : pairs) loop.release(p.second);
  if (GetParam().kind == BackendKind::io_uring) {
    EXPECT_GT(loop.counters().sq_full_submits, 0u);
    EXPECT_GT(loop.counters().cq_overflow_flushes, 0u) << fmt::format("{}", loop.counters());
  }
}

TEST_P(LoopTest, WriteToResetPeerFailsWithoutSigpipe) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  b.reset();
  std::error_code result;
  bool done = false;
  loop.write(a.get(), buffer_with("nobody"), [&](std::error_code ec, std::size_t, ByteBuffer) {
    result = ec;
    done = true;
  });
  ASSERT_TRUE(run_until(loop, [&] { return done; }));
  EXPECT_EQ(result, std::errc::broken_pipe);
}

TEST_P(LoopTest, OperationsAfterShutdownAreAborted) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  loop.shutdown();
  std::error_code result;
  loop.read(a.get(), ByteBuffer::allocate(4),
            [&](std::error_code ec, std::size_t, ByteBuffer) { result = ec; });
  loop.run_once();
  EXPECT_EQ(result, std::errc::operation_canceled);
}

TEST_P(LoopTest, CountersAreKeptAndPrintable) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  bool done = false;
  loop.write(a.get(), buffer_with("12345"),
             [&](std::error_code, std::size_t, ByteBuffer) { done = true; });
  ASSERT_TRUE(run_until(loop, [&] { return done; }));
  LoopCounters c = loop.counters();
  EXPECT_GE(c.ops_submitted, 1u);
  EXPECT_EQ(c.ops_completed, 1u);
  EXPECT_EQ(c.bytes_written, 5u);
  EXPECT_GE(c.kernel_entries, 1u);
  std::string s = fmt::format("{}", c);
  EXPECT_NE(s.find("bytes_written=5"), std::string::npos) << s;
}

// Embedded mode: the host only polls pollable_fd() and calls run_once(0).
TEST_P(LoopTest, EmbeddedInAHostPollLoop) {
  EventLoop loop(options());
  int fd = loop.pollable_fd();
  auto [a, b] = test::loop_socket_pair();
  bool timer = false, task = false;
  std::string got;
  loop.schedule(15ms, [&] { timer = true; });
  loop.read(b.get(), ByteBuffer::allocate(8),
            [&](std::error_code, std::size_t, ByteBuffer buf) { got = filled(buf); });
  std::thread t([&] {
    std::this_thread::sleep_for(5ms);
    loop.execute([&] { task = true; });
    [[maybe_unused]] auto r = ::write(a.get(), "emb", 3);
  });
  auto end = std::chrono::steady_clock::now() + 10s;
  while (!(timer && task && got == "emb") && std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, 1000);  // never waits on the loop itself
    loop.run_once(0ms);
  }
  t.join();
  EXPECT_TRUE(timer);
  EXPECT_TRUE(task);
  EXPECT_EQ(got, "emb");
}

TEST_P(LoopTest, ReadIntoReadOnlyBufferThrowsAtOnce) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  EXPECT_THROW(loop.read(a.get(), buffer_with("ro").as_read_only_buffer(),
                         [](std::error_code, std::size_t, ByteBuffer) {}),
               std::exception);
  EXPECT_EQ(loop.pending(), 0u);
}

// More buffers than IOV_MAX in one gathering write: split into several calls, never EINVAL,
// every buffer advanced, the stream exact.
TEST_P(LoopTest, GatheringWriteOfMoreThanIovMaxBuffers) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  std::vector<ByteBuffer> bufs;
  std::string expected;
  for (int i = 0; i < 4096; ++i) {
    std::string s = fmt::format("{:04}|", i);
    if (i % 7 == 0) s.clear();  // zero-length buffers in between
    expected += s;
    bufs.push_back(buffer_with(s));
  }
  bool wrote = false;
  loop.write(a.get(), bufs, [&](std::error_code ec, std::size_t n, std::span<ByteBuffer> done) {
    EXPECT_FALSE(ec);
    EXPECT_EQ(n, expected.size());
    for (auto& x : done) EXPECT_FALSE(x.has_remaining());
    wrote = true;
  });
  std::string got;
  read_into(loop, b.get(), 4096, expected.size(), got);
  ASSERT_TRUE(run_until(loop, [&] { return wrote && got.size() == expected.size(); }));
  EXPECT_TRUE(got == expected);
  EXPECT_GE(loop.counters().gathering_writes, 4u);
}

// close() from inside a handler of the same descriptor, with another operation pending on it,
// and close() twice: the pending one completes once, aborted; the second close reports EBADF.
TEST_P(LoopTest, CloseFromInsideAHandlerAndTwice) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  FileDescriptor fd = std::move(b);
  int aborted = 0;
  std::error_code second;
  loop.poll(fd.get(), POLLPRI,
            [&](std::error_code ec, int) { aborted += ec == std::errc::operation_canceled; });
  loop.read(fd.get(), ByteBuffer::allocate(8), [&](std::error_code ec, std::size_t n, ByteBuffer) {
    EXPECT_FALSE(ec);
    EXPECT_EQ(n, 1u);
    EXPECT_FALSE(loop.close(std::move(fd)));
    second = loop.close(std::move(fd));  // moved from: nothing left to close
  });
  ASSERT_EQ(::write(a.get(), "x", 1), 1);
  ASSERT_TRUE(run_until(loop, [&] { return aborted == 1; }));
  EXPECT_EQ(second, std::errc::bad_file_descriptor);
  EXPECT_EQ(loop.pending(), 0u);
}

TEST_P(LoopTest, BadDescriptorsCompleteWithAnError) {
  EventLoop loop(options());
  std::error_code r1, r2;
  loop.read(-1, ByteBuffer::allocate(4),
            [&](std::error_code ec, std::size_t, ByteBuffer) { r1 = ec; });
  loop.transfer_to(-1, 0, 10, -1, [&](std::error_code ec, std::size_t, TransferPath) { r2 = ec; });
  ASSERT_TRUE(run_until(loop, [&] { return r1 && r2; }));
  EXPECT_EQ(r1, std::errc::bad_file_descriptor);
  EXPECT_EQ(r2, std::errc::bad_file_descriptor);
}

TEST_P(LoopTest, DatagramFromAnUnnamedPeer) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair(SOCK_DGRAM);
  ASSERT_EQ(::send(a.get(), "dg", 2, 0), 2);
  std::size_t got = 0;
  std::array<ByteBuffer, 1> in{ByteBuffer::allocate(8)};
  loop.recvmsg(
      b.get(), in,
      [&](std::error_code ec, std::size_t n, std::span<ByteBuffer>, const SocketAddress&, int) {
        EXPECT_FALSE(ec);
        got = n;
      });
  ASSERT_TRUE(run_until(loop, [&] { return got == 2; }));
}

TEST_P(LoopTest, ThrowingHandlersDoNotBreakTheLoop) {
  EventLoop loop(options());
  int after = 0;
  loop.execute([] { throw std::runtime_error("task"); });
  loop.schedule(0ms, [] { throw std::runtime_error("timer"); });
  loop.schedule(1ms, [&] { ++after; });
  loop.execute([&] { ++after; });
  ASSERT_TRUE(run_until(loop, [&] { return after == 2; }));
  EXPECT_EQ(loop.pending(), 0u);
}

// What has arrived at fd so far, without waiting (appended to *keep when given).
std::size_t recv_now(int fd, std::string* keep = nullptr) {
  std::vector<char> sink(1 << 20);
  std::size_t got = 0;
  ssize_t n;
  while ((n = ::recv(fd, sink.data(), sink.size(), MSG_DONTWAIT)) > 0) {
    got += static_cast<std::size_t>(n);
    if (keep) keep->append(sink.data(), static_cast<std::size_t>(n));
  }
  return got;
}

// write_now: one send now of what the buffers hold, positions advanced by exactly what it took;
// nothing while a write of the descriptor is pending (order holds) or when the socket is full.
TEST_P(LoopTest, WriteNowSendsAtOnceOnlyWhenNoWriteIsPending) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  std::array<ByteBuffer, 2> two{ByteBuffer::wrap(std::string_view("head:")),
                                ByteBuffer::wrap(std::string_view("body"))};
  EXPECT_EQ(loop.write_now(a.get(), two), 9u);
  EXPECT_EQ(two[0].remaining() + two[1].remaining(), 0u);

  // A write the socket cannot take at once stays pending; write_now then leaves the bytes for
  // after it, and once it finished sends again.
  std::vector<std::uint8_t> big(16u << 20, 'x');
  bool written = false;
  loop.write(a.get(), ByteBuffer::wrap(std::as_writable_bytes(std::span(big))),
             [&](std::error_code ec, std::size_t, ByteBuffer) {
               EXPECT_FALSE(ec) << ec.message();
               written = true;
             });
  std::array<ByteBuffer, 1> tail{ByteBuffer::wrap(std::string_view("tail"))};
  EXPECT_EQ(loop.write_now(a.get(), tail), 0u);
  EXPECT_EQ(tail[0].remaining(), 4u);
  std::size_t drained = 0;
  ASSERT_TRUE(test::run_until(loop, [&] {
    drained += recv_now(b.get());
    return written;
  }));
  EXPECT_EQ(loop.write_now(a.get(), tail), 4u);
  std::string rest;
  ASSERT_TRUE(test::run_until(loop, [&] {
    drained += recv_now(b.get(), &rest);
    return drained == 9 + big.size() + 4;
  }));
  ASSERT_GE(rest.size(), 4u);
  EXPECT_EQ(rest.substr(rest.size() - 4), "tail");
}

// write_now of iovecs already gathered: one send of exactly those bytes, in order, counted as
// written; 0 (and nothing sent) while a write of the descriptor is pending or once the socket
// is full, where the caller hands the rest to write().
TEST_P(LoopTest, WriteNowOfIovecsSendsThemAsTheyAre) {
  EventLoop loop(options());
  auto [a, b] = test::loop_socket_pair();
  char head[] = "head:";
  char body[] = "body";
  const std::array<iovec, 2> two{iovec{head, 5}, iovec{body, 4}};
  const std::uint64_t before = loop.counters().bytes_written;
  EXPECT_EQ(loop.write_now(a.get(), std::span<const iovec>(two)), 9u);
  EXPECT_EQ(loop.counters().bytes_written - before, 9u);
  char got[16] = {};
  ASSERT_EQ(::recv(b.get(), got, sizeof got, MSG_DONTWAIT), 9);
  EXPECT_EQ(std::string_view(got, 9), "head:body");

  std::vector<char> big(16u << 20, 'x');
  bool written = false;
  loop.write(a.get(), ByteBuffer::wrap(std::as_writable_bytes(std::span(big))),
             [&](std::error_code ec, std::size_t, ByteBuffer) {
               EXPECT_FALSE(ec) << ec.message();
               written = true;
             });
  const std::array<iovec, 1> tail{iovec{body, 4}};
  EXPECT_EQ(loop.write_now(a.get(), std::span<const iovec>(tail)), 0u);  // the write is pending
  std::size_t drained = 0;
  ASSERT_TRUE(test::run_until(loop, [&] {
    drained += recv_now(b.get());
    return written;
  }));
  // Fill the socket: a full one takes nothing.
  std::size_t filled = 0;
  while (loop.write_now(a.get(), std::span<const iovec>(tail)) > 0) filled += 4;
  EXPECT_EQ(loop.write_now(a.get(), std::span<const iovec>(tail)), 0u);
  ASSERT_TRUE(test::run_until(loop, [&] {
    drained += recv_now(b.get());
    return drained == big.size() + filled;
  }));
}

NIOX_INSTANTIATE_BACKENDS(LoopTest);

TEST(LoopBackendChoice, NamedUnavailableBackendThrowsAndAutomaticAlwaysWorks) {
  EventLoop loop;
  EXPECT_TRUE(loop.backend() == BackendKind::io_uring || loop.backend() == BackendKind::epoll);
  EXPECT_TRUE(EventLoop::backend_available(BackendKind::epoll));
}

}  // namespace
}  // namespace niox
