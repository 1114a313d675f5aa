// The transfer cores on a real loopback TCP connection, with the zero-copy calls the program
// makes: the sender writes the header then sendfile()s the body; the receiver moves the body
// from the socket into its output file at body_offset() with EventLoop::transfer_from, then
// replies.
#include "temp_dir.hpp"
#include "transfer_session.hpp"

#include <niox/loop/event_loop.hpp>

#include "support/blocking_sockets.hpp"
#include "support/loop_sockets.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <future>
#include <string>
#include <thread>

namespace niox::transfer {
namespace {

using Names = std::vector<std::string>;
using niox::test::recv_all;
using niox::test::send_all;

// A connected loopback TCP pair (client, server), with timeouts so a bug cannot hang the test.
std::pair<int, int> tcp_pair() {
  FileDescriptor listener = niox::test::loop_tcp_listener();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(niox::test::local_port(listener.get()));
  int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  // On loopback connect() returns with the connection already queued on the listener.
  int server = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
  EXPECT_GE(server, 0);
  timeval tv{10, 0};
  for (int fd : {client, server}) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  return {client, server};
}

// The receiving side as the program will run it. Returns the reply status it sent.
TransferStatus receive(int sock, TransferReceiver& rx, std::error_code& ec) {
  std::byte buf[4096];
  while (rx.phase() == TransferReceiver::Phase::header) {
    ssize_t n = ::read(sock, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      rx.abort();
      ec = TransferErrc::truncated;
      return TransferStatus::refused;
    }
    auto in = ByteBuffer::wrap(std::span(buf, static_cast<std::size_t>(n)));
    if ((ec = rx.on_header_bytes(in))) {
      auto reply = encode_reply(TransferStatus::refused, "refused the header: " + ec.message());
      send_all(sock, reply.bytes().data(), reply.remaining());
      return TransferStatus::refused;
    }
    if (rx.phase() != TransferReceiver::Phase::header && (ec = rx.reserve_body())) {
      return TransferStatus::write_failed;
    }
    if ((ec = rx.on_body_bytes(in))) return TransferStatus::write_failed;
  }
  // The body on a loop, as the program receives it: a chunk at a time, socket -> file.
  ::fcntl(sock, F_SETFL, ::fcntl(sock, F_GETFL) | O_NONBLOCK);
  EventLoop loop;
  bool over = false;
  std::error_code write_ec;
  std::function<void()> next = [&] {
    if (rx.body_remaining() == 0) {
      over = true;
      return;
    }
    if ((write_ec = rx.reserve_body())) {
      over = true;
      return;
    }
    auto want = static_cast<std::size_t>(std::min<std::uint64_t>(rx.body_remaining(), 1 << 20));
    loop.transfer_from(sock, rx.fd(), static_cast<std::int64_t>(rx.body_offset()), want,
                       [&](std::error_code e, std::size_t n, TransferPath path) {
                         rx.on_body_spliced(n);
                         if (n > 0) {
                           EXPECT_EQ(path, TransferPath::splice);
                         }
                         if (e == LoopError::end_of_file) {
                           over = true;  // the sender went away: finish() reports the truncation
                         } else if (e) {
                           write_ec = e;
                           over = true;
                         } else {
                           next();
                         }
                       });
  };
  next();
  while (!over) loop.run_once(std::chrono::milliseconds(100));
  if (write_ec) {
    rx.abort();
    ec = write_ec;
    return TransferStatus::write_failed;
  }
  auto status = rx.finish(ec);
  auto reply = encode_reply(status, ec ? ec.message() : std::string());
  ::send(sock, reply.bytes().data(), reply.remaining(), MSG_NOSIGNAL);
  return status;
}

class LoopbackTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::signal(SIGPIPE, SIG_IGN);
    body_.resize(8 << 20);
    for (std::size_t i = 0; i < body_.size(); ++i)
      body_[i] = static_cast<char>(i * 2654435761u >> 24);
    src_.write("payload.bin", body_);
  }
  testing::TempDir src_;
  testing::TempDir dst_;
  std::string body_;
};

TEST_F(LoopbackTransferTest, ZeroCopyBothEndsAndVerified) {
  auto [client, server] = tcp_pair();
  FileDescriptor c(client), s(server);
  TransferReceiver rx(dst_.str());
  auto receiver = std::async(std::launch::async, [&, server = server] {
    std::error_code ec;
    auto st = receive(server, rx, ec);
    EXPECT_FALSE(ec) << ec.message();
    return st;
  });
  std::error_code ec;
  auto plan = prepare_send(src_ / "payload.bin", ec);
  ASSERT_FALSE(ec);
  ASSERT_EQ(send_all(client, plan.header_bytes.bytes().data(), plan.header_bytes.remaining()),
            plan.header_bytes.remaining());
  off_t off = 0;
  while (static_cast<std::uint64_t>(off) < plan.size) {
    ssize_t n =
        ::sendfile(client, plan.fd.get(), &off, plan.size - static_cast<std::uint64_t>(off));
    if (n < 0 && errno == EINTR) continue;
    ASSERT_GT(n, 0);
  }
  std::byte reply[reply_size];
  ASSERT_EQ(recv_all(client, reply, sizeof reply), reply_size);
  EXPECT_FALSE(check_reply(reply));
  EXPECT_EQ(receiver.get(), TransferStatus::ok);
  EXPECT_TRUE(dst_.read("payload.bin") == body_);
}

TEST_F(LoopbackTransferTest, SenderGoneMidBodyLeavesNoFile) {
  auto [client, server] = tcp_pair();
  FileDescriptor c(client), s(server);
  TransferReceiver rx(dst_ / "out.bin");
  auto receiver = std::async(std::launch::async, [&, server = server] {
    std::error_code ec;
    auto st = receive(server, rx, ec);
    EXPECT_EQ(ec, TransferErrc::truncated);
    return st;
  });
  std::error_code ec;
  auto plan = prepare_send(src_ / "payload.bin", ec);
  ASSERT_FALSE(ec);
  send_all(client, plan.header_bytes.bytes().data(), plan.header_bytes.remaining());
  off_t off = 0;
  ::sendfile(client, plan.fd.get(), &off, plan.size / 2);
  c.reset();  // the sender dies mid-body
  EXPECT_NE(receiver.get(), TransferStatus::ok);
  EXPECT_EQ(dst_.list(), Names{});
}

TEST_F(LoopbackTransferTest, CorruptionInFlightIsCaughtAndReported) {
  auto [client, server] = tcp_pair();
  FileDescriptor c(client), s(server);
  TransferReceiver rx(dst_ / "out.bin");
  auto receiver = std::async(std::launch::async, [&, server = server] {
    std::error_code ec;
    auto st = receive(server, rx, ec);
    EXPECT_EQ(ec, TransferErrc::checksum_mismatch);
    return st;
  });
  std::error_code ec;
  auto plan = prepare_send(src_ / "payload.bin", ec);
  ASSERT_FALSE(ec);
  std::string wire(plan.header_bytes.string_view());
  wire += body_;
  wire[wire.size() - 1000] ^= 0x40;  // one flipped bit the checksum must see
  ASSERT_EQ(send_all(client, wire.data(), wire.size()), wire.size());
  std::byte reply[reply_size];
  ASSERT_EQ(recv_all(client, reply, sizeof reply), reply_size);
  EXPECT_EQ(check_reply(reply), TransferErrc::checksum_mismatch);
  EXPECT_EQ(receiver.get(), TransferStatus::checksum_mismatch);
  EXPECT_EQ(dst_.list(), Names{});
}

TEST_F(LoopbackTransferTest, NotATransferStreamIsRefusedWithAReply) {
  auto [client, server] = tcp_pair();
  FileDescriptor c(client), s(server);
  TransferReceiver rx(dst_.str());
  auto receiver = std::async(std::launch::async, [&, server = server] {
    std::error_code ec;
    auto st = receive(server, rx, ec);
    EXPECT_EQ(ec, TransferErrc::bad_magic);
    return st;
  });
  const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  send_all(client, http.data(), http.size());
  std::byte reply[reply_size + 2 + 64];
  ASSERT_EQ(recv_all(client, reply, reply_size + 2), reply_size + 2);
  EXPECT_EQ(check_reply(reply), TransferErrc::refused);
  const std::size_t rest = reply_length(std::span(reply).first(reply_size + 2)) - reply_size - 2;
  ASSERT_LE(rest, 64u);
  ASSERT_EQ(recv_all(client, reply + reply_size + 2, rest), rest);
  EXPECT_EQ(decode_reason(std::span(reply).first(reply_size + 2 + rest)),
            "refused the header: bad magic (not a niox-transfer stream)");
  EXPECT_EQ(receiver.get(), TransferStatus::refused);
  EXPECT_EQ(dst_.list(), Names{});
}

}  // namespace
}  // namespace niox::transfer
