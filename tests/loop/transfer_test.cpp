// EventLoop::transfer_to and transfer_from on every backend: each byte checked, the path
// reported, arrivals in small pieces, the end of the stream, cancellation and close(), the
// loop's one pipe pair reused, and a failed transfer leaving nothing for the next one.
#include <niox/loop/event_loop.hpp>

#include "support/backends.hpp"
#include "support/loop_sockets.hpp"
#include "support/open_fds.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace niox {
namespace {

using test::run_until;

class LoopTransferTest : public test::BackendTest {};

std::string file_pattern(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 2654435761u + seed) >> 13);
  return s;
}

FileDescriptor file_with(const std::string& content) {
  FileDescriptor f = test::loop_temp_file();
  EXPECT_EQ(::pwrite(f.get(), content.data(), content.size(), 0),
            static_cast<ssize_t>(content.size()));
  return f;
}

std::string read_file(int fd, std::size_t n, off_t at = 0) {
  std::string s(n, '\0');
  EXPECT_EQ(::pread(fd, s.data(), n, at), static_cast<ssize_t>(n));
  return s;
}

// Blocking writes from the test's side of a connection.
void send_all(int fd, const std::string& bytes) {
  for (std::size_t at = 0; at < bytes.size();) {
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, 5000);
    ssize_t n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    ASSERT_GT(n, 0) << errno;
    at += static_cast<std::size_t>(n);
  }
}

// Until `n` bytes wait in the socket's receive queue (loopback delivers them as they are sent,
// but the test does not rely on when).
void wait_queued(int fd, int n) {
  for (int i = 0, q = 0; i < 5000 && (::ioctl(fd, SIOCINQ, &q) != 0 || q < n); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// A connected loopback TCP pair, both ends non-blocking.
struct Tcp {
  FileDescriptor client;
  FileDescriptor server;
};
Tcp tcp_pair() {
  FileDescriptor listener = test::loop_tcp_listener();
  Tcp t{test::loop_tcp_client(listener.get()), FileDescriptor()};
  pollfd p{listener.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 5000), 1);
  t.server =
      FileDescriptor(::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  pollfd c{t.client.get(), POLLOUT, 0};
  EXPECT_EQ(::poll(&c, 1, 5000), 1);
  return t;
}

struct Done {
  std::optional<std::error_code> ec;
  std::size_t bytes = 0;
  TransferPath path = TransferPath::copy;
  auto handler() {
    return [this](std::error_code e, std::size_t n, TransferPath p) {
      ec = e;
      bytes = n;
      path = p;
    };
  }
  bool operator()() const { return ec.has_value(); }
};

TEST_P(LoopTransferTest, FileToSocketEveryByteBySendfile) {
  EventLoop loop(options());
  const std::string content = file_pattern(3 * 1024 * 1024 + 7, 1);
  FileDescriptor file = file_with(content);
  Tcp t = tcp_pair();
  Done done;
  loop.transfer_to(file.get(), 5, content.size() - 5, t.client.get(), done.handler());
  std::string got;
  test::read_into(loop, t.server.get(), 65536, content.size() - 5, got);
  ASSERT_TRUE(run_until(loop, [&] { return done() && got.size() == content.size() - 5; }));
  EXPECT_FALSE(*done.ec) << done.ec->message();
  EXPECT_EQ(done.bytes, content.size() - 5);
  EXPECT_EQ(done.path, TransferPath::sendfile);
  EXPECT_TRUE(got == content.substr(5));
  EXPECT_EQ(::lseek(file.get(), 0, SEEK_CUR), 0);  // the file's own position is not used
}

TEST_P(LoopTransferTest, FileToFileByCopyFileRangeAtTheOutputsPosition) {
  EventLoop loop(options());
  const std::string content = file_pattern(2 * 1024 * 1024 + 3, 2);
  FileDescriptor in = file_with(content);
  FileDescriptor out = test::loop_temp_file();
  ASSERT_EQ(::write(out.get(), "head", 4), 4);
  Done done;
  loop.transfer_to(in.get(), 0, content.size(), out.get(), done.handler());
  ASSERT_TRUE(run_until(loop, [&] { return done(); }));
  EXPECT_FALSE(*done.ec) << done.ec->message();
  EXPECT_EQ(done.bytes, content.size());
  EXPECT_EQ(done.path, TransferPath::copy_file_range);
  EXPECT_EQ(::lseek(out.get(), 0, SEEK_CUR), static_cast<off_t>(4 + content.size()));
  EXPECT_EQ(read_file(out.get(), 4), "head");
  EXPECT_TRUE(read_file(out.get(), content.size(), 4) == content);

  Done past;  // beyond the end of the file
  loop.transfer_to(in.get(), content.size() - 3, 10, out.get(), past.handler());
  ASSERT_TRUE(run_until(loop, [&] { return past(); }));
  EXPECT_EQ(*past.ec, LoopError::end_of_file);
  EXPECT_EQ(past.bytes, 3u);
}

// The peer writes in pieces, each only after the last one was taken: the transfer stays
// pending until `count` bytes are in the file, takes no byte more, and every byte lands in
// place.
TEST_P(LoopTransferTest, SocketToFileInShortArrivals) {
  EventLoop loop(options());
  Tcp t = tcp_pair();
  FileDescriptor file = test::loop_temp_file();
  const std::string body = file_pattern(300000, 3);
  const std::string after = "after";
  Done done;
  loop.transfer_from(t.server.get(), file.get(), 100, body.size(), done.handler());
  std::size_t sent = 0;
  for (std::size_t piece : {1, 1000, 7, 65536, 100000, 33}) {
    const std::uint64_t before = loop.counters().bytes_read;
    send_all(t.client.get(), body.substr(sent, piece));
    sent += piece;
    ASSERT_TRUE(run_until(loop, [&] { return loop.counters().bytes_read >= before + piece; }));
    EXPECT_FALSE(done());
  }
  send_all(t.client.get(), body.substr(sent) + after);
  ASSERT_TRUE(run_until(loop, [&] { return done(); }));
  EXPECT_FALSE(*done.ec) << done.ec->message();
  EXPECT_EQ(done.bytes, body.size());
  EXPECT_EQ(done.path, TransferPath::splice);
  EXPECT_TRUE(read_file(file.get(), body.size(), 100) == body);
  EXPECT_EQ(::lseek(file.get(), 0, SEEK_CUR), 0);
  char rest[16];
  EXPECT_EQ(::recv(t.server.get(), rest, sizeof rest, 0), static_cast<ssize_t>(after.size()));
  EXPECT_EQ(std::string(rest, after.size()), after);
}

TEST_P(LoopTransferTest, EndOfStreamBeforeCount) {
  EventLoop loop(options());
  Tcp t = tcp_pair();
  FileDescriptor file = test::loop_temp_file();
  const std::string body = file_pattern(70000, 4);
  send_all(t.client.get(), body);
  ::shutdown(t.client.get(), SHUT_WR);
  Done done;
  loop.transfer_from(t.server.get(), file.get(), 0, body.size() + 1000, done.handler());
  ASSERT_TRUE(run_until(loop, [&] { return done(); }));
  EXPECT_EQ(*done.ec, LoopError::end_of_file);
  EXPECT_EQ(done.bytes, body.size());
  EXPECT_TRUE(read_file(file.get(), body.size()) == body);
}

TEST_P(LoopTransferTest, CancelInFlightKeepsWhatWasStored) {
  EventLoop loop(options());
  Tcp t = tcp_pair();
  FileDescriptor file = test::loop_temp_file();
  Done done;
  OperationHandle h = loop.transfer_from(t.server.get(), file.get(), 0, 1000, done.handler());
  send_all(t.client.get(), "0123456789");
  ASSERT_TRUE(run_until(loop, [&] { return loop.counters().bytes_read >= 10; }));
  EXPECT_TRUE(loop.cancel(h));
  ASSERT_TRUE(run_until(loop, [&] { return done(); }));
  EXPECT_EQ(*done.ec, operation_aborted());
  EXPECT_EQ(done.bytes, 10u);
  EXPECT_EQ(read_file(file.get(), 10), "0123456789");
  EXPECT_EQ(loop.pending(), 0u);
}

TEST_P(LoopTransferTest, CloseAbortsBothWhilePending) {
  EventLoop loop(options());
  Tcp t = tcp_pair();
  FileDescriptor file = test::loop_temp_file();
  Done from;
  loop.transfer_from(t.server.get(), file.get(), 0, 1000, from.handler());
  loop.run_once(std::chrono::milliseconds(0));
  EXPECT_FALSE(loop.close(std::move(t.server)));
  ASSERT_TRUE(run_until(loop, [&] { return from(); }));
  EXPECT_EQ(*from.ec, operation_aborted());
  EXPECT_EQ(from.bytes, 0u);

  // Nobody reads the other end: the transfer_to waits for a full socket until it is closed.
  Tcp u = tcp_pair();
  const std::string content = file_pattern(16 * 1024 * 1024, 5);
  FileDescriptor big = file_with(content);
  Done to;
  loop.transfer_to(big.get(), 0, content.size(), u.client.get(), to.handler());
  ASSERT_TRUE(run_until(loop, [&] { return loop.counters().bytes_written > 0; }));
  loop.run_once(std::chrono::milliseconds(0));
  EXPECT_FALSE(to());
  EXPECT_FALSE(loop.close(std::move(u.client)));
  ASSERT_TRUE(run_until(loop, [&] { return to(); }));
  EXPECT_EQ(*to.ec, operation_aborted());
  EXPECT_LT(to.bytes, content.size());
  EXPECT_EQ(loop.pending(), 0u);
}

// One pipe pair for the loop, made by its first transfer_from and kept: a hundred more open no
// descriptor.
TEST_P(LoopTransferTest, OnePipePairForEveryTransferFrom) {
  EventLoop loop(options());
  Tcp t = tcp_pair();
  FileDescriptor file = test::loop_temp_file();
  const int before = test::open_fd_count();
  std::string all;
  for (int i = 0; i < 101; ++i) {
    const std::string piece =
        file_pattern(1000 + static_cast<std::size_t>(i), static_cast<unsigned>(i));
    send_all(t.client.get(), piece);
    Done done;
    loop.transfer_from(t.server.get(), file.get(), static_cast<std::int64_t>(all.size()),
                       piece.size(), done.handler());
    ASSERT_TRUE(run_until(loop, [&] { return done(); }));
    ASSERT_FALSE(*done.ec) << done.ec->message();
    all += piece;
    if (i == 0) {
      EXPECT_EQ(test::open_fd_count(), before + 2);  // the pipe pair
    }
  }
  EXPECT_EQ(test::open_fd_count(), before + 2);
  EXPECT_TRUE(read_file(file.get(), all.size()) == all);
}

// A transfer that fails between its two splices (its file refuses the write) has taken bytes
// from the socket into the pipe: they are discarded with the pipe, never stored by the next
// transfer.
TEST_P(LoopTransferTest, FailedTransferLeavesNothingInThePipe) {
  EventLoop loop(options());
  Tcp t = tcp_pair();
  FileDescriptor file = test::loop_temp_file();
  std::string path = "/proc/self/fd/" + std::to_string(file.get());
  FileDescriptor read_only(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(read_only);
  const int fds = test::open_fd_count();

  send_all(t.client.get(), std::string(5000, 'A'));
  wait_queued(t.server.get(), 5000);
  Done failed;
  loop.transfer_from(t.server.get(), read_only.get(), 0, 10000, failed.handler());
  ASSERT_TRUE(run_until(loop, [&] { return failed(); }));
  EXPECT_EQ(*failed.ec, std::errc::bad_file_descriptor);
  EXPECT_EQ(failed.bytes, 0u);

  const std::string body = file_pattern(5000, 6);
  send_all(t.client.get(), body);
  Done next;
  loop.transfer_from(t.server.get(), file.get(), 0, body.size(), next.handler());
  ASSERT_TRUE(run_until(loop, [&] { return next(); }));
  EXPECT_FALSE(*next.ec) << next.ec->message();
  EXPECT_TRUE(read_file(file.get(), body.size()) == body);
  EXPECT_EQ(test::open_fd_count(), fds + 2);  // one pipe pair, made again
}

TEST_P(LoopTransferTest, PeerResetFailsTheTransferTo) {
  EventLoop loop(options());
  Tcp t = tcp_pair();
  const std::string content = file_pattern(8 * 1024 * 1024, 7);
  FileDescriptor file = file_with(content);
  linger l{1, 0};  // close with a reset
  ASSERT_EQ(::setsockopt(t.server.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l), 0);
  t.server.reset();
  Done done;
  loop.transfer_to(file.get(), 0, content.size(), t.client.get(), done.handler());
  ASSERT_TRUE(run_until(loop, [&] { return done(); }));
  EXPECT_TRUE(*done.ec == std::errc::connection_reset || *done.ec == std::errc::broken_pipe)
      << done.ec->message();
  EXPECT_EQ(done.bytes, 0u);
}

// The file of a transfer is only borrowed: the loop leaves its flags alone and remembers
// nothing of it, so that a blocking socket given the same number after the file was closed
// without the loop is made non-blocking like any descriptor the loop has not seen.
TEST_P(LoopTransferTest, BorrowedFileLeavesNothingBehindForItsNumber) {
  EventLoop loop(options());
  const std::string content = file_pattern(64 * 1024, 8);
  FileDescriptor file = file_with(content);
  Tcp t = tcp_pair();
  Done sent;
  loop.transfer_to(file.get(), 0, content.size(), t.client.get(), sent.handler());
  ASSERT_TRUE(run_until(loop, [&] { return sent(); }));
  EXPECT_FALSE(*sent.ec) << sent.ec->message();
  EXPECT_EQ(::fcntl(file.get(), F_GETFL) & O_NONBLOCK, 0);

  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);  // blocking
  FileDescriptor peer(pair[1]);
  const int number = file.get();
  file.reset();  // closed by its owner, not through the loop
  FileDescriptor reused(::dup3(pair[0], number, O_CLOEXEC));
  ::close(pair[0]);
  ASSERT_EQ(reused.get(), number);
  std::optional<std::error_code> wrote;
  loop.write(reused.get(), ByteBuffer::wrap(std::string_view("hi")),
             [&](std::error_code ec, std::size_t, ByteBuffer) { wrote = ec; });
  ASSERT_TRUE(run_until(loop, [&] { return wrote.has_value(); }));
  EXPECT_FALSE(*wrote) << wrote->message();
  char got[2];
  ASSERT_EQ(::read(peer.get(), got, sizeof got), 2);
  EXPECT_EQ(std::string_view(got, 2), "hi");
  if (GetParam().kind == BackendKind::epoll) {
    EXPECT_NE(::fcntl(reused.get(), F_GETFL) & O_NONBLOCK, 0);
  }
  EXPECT_FALSE(loop.close(std::move(reused)));
}

NIOX_INSTANTIATE_BACKENDS(LoopTransferTest);

}  // namespace
}  // namespace niox
