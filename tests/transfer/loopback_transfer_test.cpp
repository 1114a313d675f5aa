// The transfer cores on a real loopback TCP connection, with the zero-copy calls the program
// will make: the sender writes the header then sendfile()s the body; the receiver splice()s the
// socket through a pipe into its output file at body_offset(), then replies.
#include "temp_dir.hpp"
#include "transfer_session.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <string>
#include <thread>

namespace niox::transfer {
namespace {

using Names = std::vector<std::string>;

// A connected loopback TCP pair (client, server), with timeouts so a bug cannot hang the test.
std::pair<int, int> tcp_pair() {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::listen(listener, 1);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  int server = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(listener);
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
    if (n <= 0) {
      rx.abort();
      ec = TransferErrc::truncated;
      return TransferStatus::refused;
    }
    auto in = ByteBuffer::wrap(std::span(buf, static_cast<std::size_t>(n)));
    if ((ec = rx.on_header_bytes(in))) {
      auto reply = encode_reply(TransferStatus::refused, "refused the header: " + ec.message());
      ::send(sock, reply.bytes().data(), reply.remaining(), MSG_NOSIGNAL);
      return TransferStatus::refused;
    }
    if (rx.phase() != TransferReceiver::Phase::header && (ec = rx.reserve_body())) {
      return TransferStatus::write_failed;
    }
    if ((ec = rx.on_body_bytes(in))) return TransferStatus::write_failed;
  }
  int pipe_fds[2];
  EXPECT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  FileDescriptor pr(pipe_fds[0]), pw(pipe_fds[1]);
  while (rx.body_remaining() > 0) {
    if ((ec = rx.reserve_body())) return TransferStatus::write_failed;
    auto want = static_cast<std::size_t>(std::min<std::uint64_t>(rx.body_remaining(), 1 << 20));
    ssize_t n = ::splice(sock, nullptr, pw.get(), nullptr, want, SPLICE_F_MOVE);
    if (n <= 0) break;  // the sender went away: finish() reports the truncation
    loff_t off = static_cast<loff_t>(rx.body_offset());
    for (ssize_t left = n; left > 0;) {
      ssize_t m =
          ::splice(pr.get(), nullptr, rx.fd(), &off, static_cast<std::size_t>(left), SPLICE_F_MOVE);
      if (m <= 0) {
        rx.abort();
        ec = std::error_code(errno, std::system_category());
        return TransferStatus::write_failed;
      }
      left -= m;
    }
    rx.on_body_spliced(static_cast<std::uint64_t>(n));
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
  ASSERT_EQ(
      ::send(client, plan.header_bytes.bytes().data(), plan.header_bytes.remaining(), MSG_NOSIGNAL),
      static_cast<ssize_t>(plan.header_bytes.remaining()));
  off_t off = 0;
  while (static_cast<std::uint64_t>(off) < plan.size) {
    ASSERT_GT(::sendfile(client, plan.fd.get(), &off, plan.size - static_cast<std::uint64_t>(off)),
              0);
  }
  std::byte reply[reply_size];
  ASSERT_EQ(::recv(client, reply, sizeof reply, MSG_WAITALL), static_cast<ssize_t>(reply_size));
  EXPECT_FALSE(check_reply(reply));
  EXPECT_EQ(receiver.get(), TransferStatus::ok);
  EXPECT_TRUE(dst_.read("payload.bin") == body_);
}

TEST_F(LoopbackTransferTest, SenderGoneMidBodyLeavesNoFile) {
  auto [client, server] = tcp_pair();
  FileDescriptor s(server);
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
  ::send(client, plan.header_bytes.bytes().data(), plan.header_bytes.remaining(), MSG_NOSIGNAL);
  off_t off = 0;
  ::sendfile(client, plan.fd.get(), &off, plan.size / 2);
  ::close(client);
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
  for (std::size_t sent = 0; sent < wire.size();) {
    ssize_t n = ::send(client, wire.data() + sent, wire.size() - sent, MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    sent += static_cast<std::size_t>(n);
  }
  std::byte reply[reply_size];
  ASSERT_EQ(::recv(client, reply, sizeof reply, MSG_WAITALL), static_cast<ssize_t>(reply_size));
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
  ::send(client, http.data(), http.size(), MSG_NOSIGNAL);
  std::byte reply[reply_size + 2 + 64];
  ASSERT_EQ(::recv(client, reply, reply_size + 2, MSG_WAITALL),
            static_cast<ssize_t>(reply_size + 2));
  EXPECT_EQ(check_reply(reply), TransferErrc::refused);
  const std::size_t rest = reply_length(std::span(reply).first(reply_size + 2)) - reply_size - 2;
  ASSERT_LE(rest, 64u);
  ASSERT_EQ(::recv(client, reply + reply_size + 2, rest, MSG_WAITALL), static_cast<ssize_t>(rest));
  EXPECT_EQ(decode_reason(std::span(reply).first(reply_size + 2 + rest)),
            "refused the header: bad magic (not a niox-transfer stream)");
  EXPECT_EQ(receiver.get(), TransferStatus::refused);
  EXPECT_EQ(dst_.list(), Names{});
}

}  // namespace
}  // namespace niox::transfer
