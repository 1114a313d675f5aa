// AsynchronousTlsChannel on every backend: coroutine client against coroutine server (small
// and multi-MiB, every byte checked), against the transport's SslHandler, against openssl
// s_server; a wrong host name, a truncated stream and a stalled handshake.
#include <niox/async/asynchronous_tls_channel.hpp>
#include <niox/async/spawn.hpp>
#include <niox/async/when_all.hpp>
#include <niox/ssl/ssl_context.hpp>
#include <niox/transport/bootstrap.hpp>
#include <niox/transport/ssl_handler.hpp>

#include "channels/kernel_tls.hpp"
#include "support/backends.hpp"
#include "support/child_process.hpp"
#include "support/test_certificates.hpp"
#include "support/tls_peers.hpp"
#include "support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <array>
#include <csignal>
#include <string>
#include <vector>

namespace niox {
namespace {

using namespace std::chrono_literals;
using test::PemPair;
using test::TestCertificateAuthority;

std::error_code code_of(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::system_error& s) {
    return s.code();
  }
}

// Both sides' record paths, both directions, after a 1 MiB echo and a clean shutdown both ways:
// {client outbound, client inbound, server outbound, server inbound}.
struct EchoedPaths {
  std::array<RecordPath, 4> paths{};
  bool exact = false;
};

class AsyncTlsTest : public test::BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped()) return;
    EventLoopGroup::Options g;
    g.threads = 1;
    g.loop = options();
    group_.emplace(g);
  }
  EventLoop& loop() { return group_->loop(0); }

  TestCertificateAuthority ca;
  PemPair leaf = ca.issue();
  SslContext server_ssl =
      SslContextBuilder::for_server(Pem::memory(leaf.certificate), Pem::memory(leaf.private_key))
          .build();
  SslContext client_ssl =
      SslContextBuilder::for_client().trust_manager(Pem::memory(ca.certificate_pem())).build();

  // A connected TCP pair on the loop: {accepted, connected}.
  Task<std::pair<AsynchronousSocketChannel, AsynchronousSocketChannel>> pair() {
    co_await resume_on(loop());
    auto server = AsynchronousServerSocketChannel::open(loop());
    server.bind(InetSocketAddress::loopback_v4(0));
    SocketAddress bound = *server.local_address();
    auto client = AsynchronousSocketChannel::open(loop());
    auto [accepted, ignored] = co_await when_all(accept(server), connect(client, bound));
    (void)ignored;
    co_return std::pair{std::move(accepted), std::move(client)};
  }
  static Task<AsynchronousSocketChannel> accept(AsynchronousServerSocketChannel& s) {
    co_return co_await s.accept();
  }
  static Task<int> connect(AsynchronousSocketChannel& c, SocketAddress to) {
    co_await c.connect(to);
    co_return 0;
  }

  // Reads until the peer's close_notify; the bytes read.
  static Task<std::vector<std::byte>> read_to_end(AsynchronousTlsChannel& tls) {
    std::vector<std::byte> got;
    ByteBuffer buf = ByteBuffer::allocate(5000);  // smaller than a record: the copy path too
    for (;;) {
      buf.clear();
      std::int64_t n = co_await tls.read(buf);
      if (n < 0) break;
      EXPECT_EQ(static_cast<std::size_t>(n), buf.position());
      auto b = buf.flip().bytes();
      got.insert(got.end(), b.begin(), b.end());
    }
    co_return got;
  }

  static Task<std::size_t> echo_until_end(AsynchronousTlsChannel& tls) {
    co_await tls.handshake();
    ByteBuffer buf = ByteBuffer::allocate(64 * 1024);  // room for whole records: the direct path
    std::size_t echoed = 0;
    for (;;) {
      buf.clear();
      std::int64_t n = co_await tls.read(buf);
      if (n < 0) break;
      buf.flip();
      echoed += co_await tls.write(buf);
    }
    co_await tls.shutdown();
    co_return echoed;
  }

  Task<EchoedPaths> echo_and_paths(const std::vector<std::byte>& data) {
    auto [a, b] = co_await pair();
    const std::uint16_t port = b.remote_address()->inet().port();
    AsynchronousTlsChannel server(std::move(a), server_ssl.new_engine());
    AsynchronousTlsChannel client(std::move(b), client_ssl.new_engine("localhost", port));
    auto client_side = [&]() -> Task<std::vector<std::byte>> {
      co_await client.handshake();
      ByteBuffer out = ByteBuffer::wrap(std::span<const std::byte>(data));
      auto write_then_shutdown = [&]() -> Task<int> {
        co_await client.write(out);
        co_await client.shutdown();
        co_return 0;
      };
      auto [got, ignored] = co_await when_all(read_to_end(client), write_then_shutdown());
      (void)ignored;
      co_return got;
    };
    auto [echoed, got] = co_await when_all(echo_until_end(server), client_side());
    EchoedPaths r;
    r.exact = echoed == data.size() && got == data;
    r.paths = {client.record_path(TrafficDirection::outbound),
               client.record_path(TrafficDirection::inbound),
               server.record_path(TrafficDirection::outbound),
               server.record_path(TrafficDirection::inbound)};
    co_return r;
  }

  std::optional<EventLoopGroup> group_;
};

TEST_P(AsyncTlsTest, CoroutineClientAndServerEchoSmallAndMultiMebibyteExactly) {
  for (std::size_t size : {std::size_t{11}, std::size_t{5} << 20}) {
    SCOPED_TRACE(size);
    const std::vector<std::byte> data = test::pseudo_random_bytes(size, size);
    auto body = [&]() -> Task<void> {
      auto [a, b] = co_await pair();
      const std::uint16_t port = b.remote_address()->inet().port();
      AsynchronousTlsChannel server(std::move(a), server_ssl.new_engine());
      AsynchronousTlsChannel client(std::move(b), client_ssl.new_engine("localhost", port));
      auto talk = [&]() -> Task<std::vector<std::byte>> {
        co_await client.handshake();
        EXPECT_EQ(client.engine().protocol(), "TLSv1.3");
        // Three buffers in one gathering write, the last one alone on the direct path.
        const std::size_t third = data.size() / 3;
        std::array<ByteBuffer, 3> parts{
            ByteBuffer::wrap(std::span<const std::byte>(data).first(third)),
            ByteBuffer::wrap(std::span<const std::byte>(data).subspan(third, third)),
            ByteBuffer::wrap(std::span<const std::byte>(data).subspan(2 * third))};
        auto reader = read_to_end(client);
        auto writer = [&]() -> Task<std::size_t> {
          std::size_t n = co_await client.write_all(parts);
          for (auto& p : parts) EXPECT_EQ(p.remaining(), 0u);
          co_return n;
        };
        auto write_then_shutdown = [&]() -> Task<std::size_t> {
          std::size_t n = co_await writer();
          co_await client.shutdown();  // close_notify: the server's read sees -1
          co_return n;
        };
        auto [got, written] = co_await when_all(std::move(reader), write_then_shutdown());
        EXPECT_EQ(written, data.size());
        co_return got;
      };
      auto [echoed, got] = co_await when_all(echo_until_end(server), talk());
      EXPECT_EQ(echoed, data.size());
      EXPECT_TRUE(got == data) << "got " << got.size() << " of " << data.size() << " bytes";
    };
    sync_wait(body());
  }
}

TEST_P(AsyncTlsTest, TalksToTheTransportSslHandler) {
  test::TestServer server(options(), 1);
  server.bootstrap().child_handler(test::init([this](Channel& ch) {
    ch.pipeline().add_last("ssl", std::make_shared<SslHandler>(server_ssl.new_engine()));
    auto h = std::make_shared<test::LambdaHandler>();
    h->on_read = [](ChannelHandlerContext& ctx, Message&& m) { ctx.write(std::move(m)); };
    h->on_read_complete = [](ChannelHandlerContext& ctx) { ctx.flush(); };
    ch.pipeline().add_last("app", h);
  }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  const std::vector<std::byte> data = test::pseudo_random_bytes(300000, 7);
  auto body = [&]() -> Task<std::vector<std::byte>> {
    co_await resume_on(loop());
    auto socket = AsynchronousSocketChannel::open(loop());
    co_await socket.connect(addr);
    AsynchronousTlsChannel tls(std::move(socket),
                               client_ssl.new_engine("localhost", addr.inet().port()));
    ByteBuffer out = ByteBuffer::wrap(std::span<const std::byte>(data));
    co_await tls.write(out);
    std::vector<std::byte> got;
    ByteBuffer in = ByteBuffer::allocate(20000);
    while (got.size() < data.size()) {
      in.clear();
      if (const std::int64_t n = co_await tls.read(in); n < 0) break;
      auto b = in.flip().bytes();
      got.insert(got.end(), b.begin(), b.end());
    }
    // SslHandler answers close_notify with its own: shutdown ends without waiting out the time.
    co_await tls.shutdown();
    EXPECT_TRUE(tls.engine().is_inbound_done());
    co_return got;
  };
  EXPECT_TRUE(sync_wait(body()) == data);
}

TEST_P(AsyncTlsTest, TalksToOpensslServer) {
  std::string openssl = test::run_command("command -v openssl");
  if (openssl.empty()) GTEST_SKIP() << "openssl is not installed (scripts/deps)";
  openssl.erase(openssl.find_last_not_of('\n') + 1);
  test::TlsFiles files;
  // -rev: each line comes back reversed, so the reply is the server's work, not an echo.
  test::ChildProcess server({openssl, "s_server", "-accept", "127.0.0.1:0", "-cert", files.cert,
                             "-key", files.key, "-rev", "-naccept", "1"});
  std::uint16_t port = 0;
  for (int i = 0; i < 5 && port == 0; ++i) {
    auto line = server.read_line(std::chrono::seconds(20));
    ASSERT_TRUE(line) << "s_server did not start: " << server.read_stderr();
    if (line->rfind("ACCEPT 127.0.0.1:", 0) == 0)
      port = static_cast<std::uint16_t>(std::stoi(line->substr(17)));
  }
  ASSERT_NE(port, 0);
  SslContext ssl = SslContextBuilder::for_client().trust_manager(Pem::file(files.ca)).build();
  auto body = [&]() -> Task<std::string> {
    co_await resume_on(loop());
    auto socket = AsynchronousSocketChannel::open(loop());
    co_await socket.connect(InetSocketAddress::loopback_v4(port));
    AsynchronousTlsChannel tls(std::move(socket), ssl.new_engine("localhost", port));
    co_await tls.handshake();
    EXPECT_EQ(tls.engine().protocol(), "TLSv1.3");
    EXPECT_NE(tls.engine().peer_subject().find("CN=localhost"), std::string::npos);
    ByteBuffer out = test::text("hello niox\n");
    co_await tls.write(out);
    std::string reply;
    ByteBuffer in = ByteBuffer::allocate(256);
    while (reply.find('\n') == std::string::npos) {
      in.clear();
      if (const std::int64_t n = co_await tls.read(in); n < 0) break;
      reply.append(in.flip().string_view());
    }
    co_await tls.shutdown();
    co_return reply;
  };
  EXPECT_EQ(sync_wait(body()), "xoin olleh\n");
  server.signal(SIGTERM);
  server.wait();
}

TEST_P(AsyncTlsTest, WrongHostNameIsRejectedByTheClient) {
  auto body = [&]() -> Task<void> {
    auto [a, b] = co_await pair();
    AsynchronousTlsChannel server(std::move(a), server_ssl.new_engine());
    AsynchronousTlsChannel client(std::move(b), client_ssl.new_engine("wrong.example", 443));
    auto server_side = [&]() -> Task<std::error_code> {
      std::error_code ec;
      co_await server.handshake(ec);
      co_return ec;
    };
    auto client_side = [&]() -> Task<std::error_code> {
      try {
        co_await client.handshake();
      } catch (...) {
        co_return code_of(std::current_exception());
      }
      co_return std::error_code();
    };
    auto [server_ec, client_ec] = co_await when_all(server_side(), client_side());
    EXPECT_TRUE(is_certificate_verify_error(client_ec)) << client_ec.message();
    EXPECT_NE(client_ec.message().find("hostname mismatch"), std::string::npos)
        << client_ec.message();
    // The client's alert reached the server: its handshake failed too, not hung.
    EXPECT_TRUE(server_ec) << "the server's handshake succeeded";
  };
  sync_wait(body());
}

TEST_P(AsyncTlsTest, CloseWithoutCloseNotifyIsTruncationNotEndOfStream) {
  auto body = [&]() -> Task<void> {
    auto [a, b] = co_await pair();
    const std::uint16_t port = b.remote_address()->inet().port();
    AsynchronousTlsChannel server(std::move(a), server_ssl.new_engine());
    AsynchronousTlsChannel client(std::move(b), client_ssl.new_engine("localhost", port));
    auto server_side = [&]() -> Task<int> {
      co_await server.handshake();
      ByteBuffer out = test::text("partial");
      co_await server.write(out);
      server.close();  // no close_notify
      co_return 0;
    };
    auto client_side = [&]() -> Task<std::pair<std::string, std::error_code>> {
      std::string got;
      ByteBuffer in = ByteBuffer::allocate(64);
      std::error_code ec;
      for (;;) {
        in.clear();
        std::int64_t n = co_await client.read(in, ec);
        if (ec || n < 0) break;
        got.append(in.flip().string_view());
      }
      co_return std::pair{got, ec};
    };
    auto [ignored, result] = co_await when_all(server_side(), client_side());
    (void)ignored;
    EXPECT_EQ(result.first, "partial");
    EXPECT_EQ(result.second, SslErrc::truncated) << result.second.message();
  };
  sync_wait(body());
}

TEST_P(AsyncTlsTest, StalledHandshakeEndsAtWithTimeout) {
  auto body = [&]() -> Task<std::error_code> {
    auto [silent, b] = co_await pair();  // accepted, never speaks
    const std::uint16_t port = b.remote_address()->inet().port();
    AsynchronousTlsChannel client(std::move(b), client_ssl.new_engine("localhost", port));
    std::error_code ec;
    try {
      co_await with_timeout(loop(), client.handshake(), 100ms);
    } catch (...) {
      ec = code_of(std::current_exception());
    }
    co_return ec;
  };
  EXPECT_EQ(sync_wait(body()), std::errc::timed_out);
}

// Echoes through a coroutine pair and returns the client's record path after the handshake.
TEST_P(AsyncTlsTest, WithoutTheKernelTlsUlpRecordsStayInUserSpace) {
  if (kernel_tls_available()) GTEST_SKIP() << "this kernel offers the tls ULP: not the fallback";
  auto body = [&]() -> Task<std::pair<RecordPath, std::string>> {
    auto [a, b] = co_await pair();
    const std::uint16_t port = b.remote_address()->inet().port();
    AsynchronousTlsChannel server(std::move(a), server_ssl.new_engine());
    AsynchronousTlsChannel client(std::move(b), client_ssl.new_engine("localhost", port));
    auto server_side = [&]() -> Task<std::size_t> { co_return co_await echo_until_end(server); };
    auto client_side = [&]() -> Task<std::string> {
      co_await client.handshake();
      ByteBuffer out = test::text("fallback");
      co_await client.write(out);
      ByteBuffer in = ByteBuffer::allocate(64);
      std::string got;
      while (got.size() < 8) {
        const std::int64_t n = co_await client.read(in);
        if (n < 0) break;
        got = std::string(ByteBuffer(in).flip().string_view());
      }
      co_await client.shutdown();
      co_return got;
    };
    auto [echoed, got] = co_await when_all(server_side(), client_side());
    EXPECT_EQ(echoed, 8u);
    co_return std::pair{client.record_path(), got};
  };
  auto [path, got] = sync_wait(body());
  EXPECT_EQ(path, RecordPath::user_space);
  EXPECT_EQ(got, "fallback");
}

TEST_P(AsyncTlsTest, WithoutTheKernelTlsUlpEveryDirectionStaysInUserSpace) {
  if (kernel_tls_available()) GTEST_SKIP() << "this kernel offers the tls ULP: not the fallback";
  const std::vector<std::byte> data = test::pseudo_random_bytes(1 << 20, 3);
  EchoedPaths r = sync_wait(echo_and_paths(data));
  EXPECT_TRUE(r.exact);
  for (RecordPath p : r.paths) EXPECT_EQ(p, RecordPath::user_space);
}

// The kernel's records end to end: every byte both ways, close_notify through the kernel both
// ways (each side's read ends with -1, not a truncation).
TEST_P(AsyncTlsTest, WithTheKernelTlsUlpEveryByteGoesThroughTheKernelBothWays) {
  if (!kernel_tls_available()) {
    GTEST_SKIP() << "this kernel does not offer the tls ULP (/proc/sys/net/ipv4/tcp_available_ulp)";
  }
  const std::vector<std::byte> data = test::pseudo_random_bytes(1 << 20, 4);
  EchoedPaths r = sync_wait(echo_and_paths(data));
  EXPECT_TRUE(r.exact);
  for (RecordPath p : r.paths) EXPECT_EQ(p, RecordPath::ktls);
}

// The socket side of the fallback: a kernel without the ULP refuses the keys, an error for
// that connection alone, and the socket goes on carrying plain bytes.
TEST_P(AsyncTlsTest, AKernelWithoutTheTlsUlpRefusesTheKeysAndTheSocketStillWorks) {
  if (kernel_tls_available()) GTEST_SKIP() << "this kernel offers the tls ULP: not the fallback";
  auto body = [&]() -> Task<std::pair<std::error_code, std::string>> {
    auto [a, b] = co_await pair();
    TrafficKeys keys;
    keys.cipher = TrafficCipher::aes_128_gcm;
    keys.key_size = 16;
    const std::error_code refused =
        detail::install_kernel_tls(b.native_handle(), TrafficDirection::outbound, keys);
    ByteBuffer out = test::text("plain");
    co_await b.write(out);
    ByteBuffer in = ByteBuffer::allocate(16);
    while (in.position() < 5) {
      if (co_await a.read(in) < 0) break;
    }
    co_return std::pair{refused, std::string(in.flip().string_view())};
  };
  auto [refused, got] = sync_wait(body());
  EXPECT_TRUE(refused);
  EXPECT_EQ(got, "plain");
}

// Where the kernel offers kTLS, the records must be the kernel's once the handshake is done.
TEST_P(AsyncTlsTest, WithTheKernelTlsUlpRecordsAreTheKernels) {
  if (!kernel_tls_available()) {
    GTEST_SKIP() << "this kernel does not offer the tls ULP (/proc/sys/net/ipv4/tcp_available_ulp)";
  }
  auto body = [&]() -> Task<RecordPath> {
    auto [a, b] = co_await pair();
    const std::uint16_t port = b.remote_address()->inet().port();
    AsynchronousTlsChannel server(std::move(a), server_ssl.new_engine());
    AsynchronousTlsChannel client(std::move(b), client_ssl.new_engine("localhost", port));
    co_await when_all(server.handshake(), client.handshake());
    co_return client.record_path();
  };
  EXPECT_EQ(sync_wait(body()), RecordPath::ktls);
}

NIOX_INSTANTIATE_BACKENDS(AsyncTlsTest);

}  // namespace
}  // namespace niox
