// WriteFlags::zero_copy: large writes through IORING_OP_SEND_ZC / SENDMSG_ZC on io_uring, plain
// sends elsewhere. Run on every backend; what only io_uring proper does is checked there.
#include <niox/buffer/byte_buffer.hpp>
#include <niox/loop/event_loop.hpp>

#include "support/backends.hpp"
#include "support/loop_sockets.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

namespace niox {
namespace {

using test::run_until;

// A connected TCP pair on loopback (AF_UNIX sockets have no zero-copy sends).
std::pair<FileDescriptor, FileDescriptor> tcp_socket_pair() {
  FileDescriptor listener = test::loop_tcp_listener();
  FileDescriptor client = test::loop_tcp_client(listener.get());
  pollfd p{listener.get(), POLLIN, 0};
  ::poll(&p, 1, 5000);
  FileDescriptor server(::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  EXPECT_TRUE(server.valid());
  return {std::move(client), std::move(server)};
}

// xorshift bytes: every offset of every write differs from its neighbours' and other writes'.
std::string xorshift_pattern(std::size_t n, std::uint64_t seed) {
  std::string s(n, '\0');
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s[i] = static_cast<char>(x);
  }
  return s;
}

ByteBuffer buffer_of(const std::string& s) {
  ByteBuffer b = ByteBuffer::allocate(s.size());
  b.put(std::span<const std::byte>(reinterpret_cast<const std::byte*>(s.data()), s.size()));
  b.flip();
  return b;
}

class ZeroCopyTest : public test::BackendTest {
 protected:
  // Only io_uring proper sends zero-copy; epoll and the readiness fallback ignore the flag.
  bool zero_copy_expected() const {
    return GetParam().kind == BackendKind::io_uring && !GetParam().io_uring_readiness_only;
  }
};

TEST_P(ZeroCopyTest, ManyLargeWritesArriveByteExact) {
  EventLoop loop(options());
  auto [tx, rx] = tcp_socket_pair();
  constexpr std::size_t writes = 64, size = 1 << 20;
  std::string sent;
  int completed = 0;
  for (std::size_t i = 0; i < writes; ++i) {
    std::string part = xorshift_pattern(size, i);
    sent += part;
    loop.write(tx.get(), buffer_of(part), WriteFlags::zero_copy,
               [&](std::error_code ec, std::size_t n, ByteBuffer) {
                 EXPECT_FALSE(ec) << ec.message();
                 EXPECT_EQ(n, size);
                 ++completed;
               });
  }
  std::string got;
  test::read_into(loop, rx.get(), 256 << 10, sent.size(), got);
  ASSERT_TRUE(
      run_until(loop, [&] { return completed == int(writes) && got.size() >= sent.size(); }));
  ASSERT_EQ(got.size(), sent.size());
  EXPECT_TRUE(got == sent) << "bytes differ";
  LoopCounters c = loop.counters();
  if (zero_copy_expected()) {
    EXPECT_GE(c.zero_copy_sends, writes);
    EXPECT_EQ(c.zero_copy_fallbacks, 0u);
  } else {
    EXPECT_EQ(c.zero_copy_sends, 0u);
    EXPECT_EQ(c.zero_copy_fallbacks, 0u);
  }
}

// The write completes only when the kernel no longer reads the pages: the sender overwrites
// (and frees) its buffer in the handler, while most of the bytes still wait for a receiver
// that starts late and reads in small pieces; it still gets the original bytes.
TEST_P(ZeroCopyTest, OverwritingTheBufferAfterCompletionDoesNotChangeWhatArrives) {
  EventLoop loop(options());
  auto [tx, rx] = tcp_socket_pair();
  constexpr std::size_t size = 8 << 20;
  const std::string sent = xorshift_pattern(size, 42);
  bool done = false;
  std::uint64_t sends_at_completion = 0;
  loop.write(tx.get(), buffer_of(sent), WriteFlags::zero_copy,
             [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
               EXPECT_FALSE(ec) << ec.message();
               EXPECT_EQ(n, size);
               buf.clear();
               std::memset(buf.writable_bytes().data(), 0xEE, buf.remaining());
               sends_at_completion = loop.counters().zero_copy_sends;
               done = true;
             });
  for (int i = 0; i < 5; ++i) loop.run_once(std::chrono::milliseconds(1));
  std::string got;
  test::read_into(loop, rx.get(), 4096, size, got);
  ASSERT_TRUE(run_until(loop, [&] { return done && got.size() >= size; }));
  ASSERT_EQ(got.size(), size);
  EXPECT_TRUE(got == sent) << "the receiver saw bytes written after the completion";
  // The handler ran after the notification of the write's last send.
  if (zero_copy_expected()) {
    EXPECT_GE(sends_at_completion, 1u);
  }
}

// Reads and drops whatever arrives until end of stream or an error.
void drain(EventLoop& loop, int fd, std::size_t& total) {
  loop.read(fd, ByteBuffer::allocate(256 << 10),
            [&loop, fd, &total](std::error_code ec, std::size_t n, ByteBuffer) {
              total += n;
              if (!ec && n > 0) drain(loop, fd, total);
            });
}

// Cancelled or closed with a zero-copy send in the kernel (the peer does not read, so most of
// the bytes wait in the socket): the handler runs once, aborted, with the bytes untouched, and
// not before the kernel let go of the pages, which it does only once the peer has read what
// was queued.
TEST_P(ZeroCopyTest, CancelAndCloseInFlightCompleteOnceAfterTheKernelLetGo) {
  for (bool by_close : {false, true}) {
    SCOPED_TRACE(by_close ? "close" : "cancel");
    EventLoop loop(options());
    auto [tx, rx] = tcp_socket_pair();
    constexpr std::size_t size = 32 << 20;  // far more than the socket buffers hold
    const std::string sent = xorshift_pattern(size, 7);
    int calls = 0;
    std::error_code got_ec;
    std::size_t moved = 0;
    OperationHandle h = loop.write(tx.get(), buffer_of(sent), WriteFlags::zero_copy,
                                   [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
                                     ++calls;
                                     got_ec = ec;
                                     moved = n;
                                     EXPECT_EQ(buf.position(), n);
                                     buf.rewind();
                                     EXPECT_TRUE(buf.string_view() == sent);
                                   });
    for (int i = 0; i < 10; ++i) loop.run_once(std::chrono::milliseconds(2));
    if (by_close)
      loop.close(std::move(tx));
    else
      EXPECT_TRUE(loop.cancel(h));
    if (zero_copy_expected()) {
      // Queued bytes the peer has not read still use the pages: no handler yet.
      for (int i = 0; i < 10; ++i) loop.run_once(std::chrono::milliseconds(2));
      EXPECT_EQ(calls, 0) << "completed while the kernel still held the pages";
    }
    std::size_t received = 0;
    drain(loop, rx.get(), received);
    ASSERT_TRUE(run_until(loop, [&] { return calls > 0; }));
    for (int i = 0; i < 5; ++i) loop.run_once(std::chrono::milliseconds(1));
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(got_ec, operation_aborted());
    EXPECT_LT(moved, size);
    if (zero_copy_expected()) {
      EXPECT_GE(loop.counters().zero_copy_sends, 1u);
    }
    if (!by_close) loop.close(std::move(tx));
    loop.close(std::move(rx));
    ASSERT_TRUE(run_until(loop, [&] { return loop.pending() == 0; }));
  }
}

// A plain write stays plain next to zero-copy ones.
TEST_P(ZeroCopyTest, WritesWithoutTheFlagAreSentPlainly) {
  EventLoop loop(options());
  auto [tx, rx] = tcp_socket_pair();
  const std::string sent = xorshift_pattern(1 << 20, 3);
  bool done = false;
  loop.write(tx.get(), buffer_of(sent), [&](std::error_code ec, std::size_t, ByteBuffer) {
    EXPECT_FALSE(ec);
    done = true;
  });
  std::string got;
  test::read_into(loop, rx.get(), 64 << 10, sent.size(), got);
  ASSERT_TRUE(run_until(loop, [&] { return done && got.size() >= sent.size(); }));
  EXPECT_TRUE(got == sent);
  EXPECT_EQ(loop.counters().zero_copy_sends, 0u);
}

// A socket without zero-copy sends (AF_UNIX) refuses the opcode: the write goes out plainly,
// counted as a fallback on io_uring, and gathering writes (sendmsg_zc) take the same way.
TEST_P(ZeroCopyTest, ASocketThatRefusesFallsBackToAPlainSend) {
  EventLoop loop(options());
  auto [tx, rx] = test::loop_socket_pair();
  const std::string a = xorshift_pattern(200 << 10, 11), b = xorshift_pattern(100 << 10, 12);
  std::vector<ByteBuffer> bufs{buffer_of(a), buffer_of(b)};
  bool done = false;
  loop.write(tx.get(), std::span<const ByteBuffer>(bufs), WriteFlags::zero_copy,
             [&](std::error_code ec, std::size_t n, std::span<ByteBuffer>) {
               EXPECT_FALSE(ec) << ec.message();
               EXPECT_EQ(n, a.size() + b.size());
               done = true;
             });
  std::string got;
  test::read_into(loop, rx.get(), 64 << 10, a.size() + b.size(), got);
  ASSERT_TRUE(run_until(loop, [&] { return done && got.size() >= a.size() + b.size(); }));
  EXPECT_TRUE(got == a + b);
  LoopCounters c = loop.counters();
  EXPECT_EQ(c.zero_copy_sends, 0u);
  EXPECT_EQ(c.zero_copy_fallbacks, zero_copy_expected() ? 1u : 0u);
}

NIOX_INSTANTIATE_BACKENDS(ZeroCopyTest);

}  // namespace
}  // namespace niox
