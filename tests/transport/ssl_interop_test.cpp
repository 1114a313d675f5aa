// niox's TLS client (SslHandler in a Bootstrap pipeline) against openssl s_server, on every
// backend.
#include <niox/ssl/ssl_context.hpp>
#include <niox/transport/bootstrap.hpp>
#include <niox/transport/ssl_handler.hpp>

#include "../support/child_process.hpp"
#include "../support/tls_peers.hpp"
#include "../support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <csignal>

using namespace niox;
using namespace niox::test;

namespace {

class SslInteropTest : public BackendTest {};

TEST_P(SslInteropTest, NioxClientTalksToOpensslServer) {
  std::string openssl = run_command("command -v openssl");
  if (openssl.empty()) GTEST_SKIP() << "openssl is not installed (scripts/deps)";
  openssl.erase(openssl.find_last_not_of('\n') + 1);
  TlsFiles files;
  // -rev: each line comes back reversed, so the reply is the server's work, not an echo.
  ChildProcess server({openssl, "s_server", "-accept", "127.0.0.1:0", "-cert", files.cert, "-key",
                       files.key, "-rev", "-naccept", "1"});
  std::uint16_t port = 0;
  for (int i = 0; i < 5 && port == 0; ++i) {
    auto line = server.read_line(std::chrono::seconds(20));
    ASSERT_TRUE(line) << "s_server did not start: " << server.read_stderr();
    if (line->rfind("ACCEPT 127.0.0.1:", 0) == 0)
      port = static_cast<std::uint16_t>(std::stoi(line->substr(17)));
  }
  ASSERT_NE(port, 0);

  SslContext client_ssl =
      SslContextBuilder::for_client().trust_manager(Pem::file(files.ca)).build();
  EventLoopGroup group(TestServer::group_options(options(), 1));
  auto ssl = std::make_shared<SslHandler>(client_ssl.new_engine("localhost", port));
  auto reply = std::make_shared<std::string>();
  auto done = std::make_shared<std::promise<void>>();
  auto h = std::make_shared<LambdaHandler>();
  h->on_event = [](ChannelHandlerContext& ctx, std::any e) {
    if (auto* hs = std::any_cast<SslHandshakeCompletionEvent>(&e); hs && hs->is_success())
      ctx.write_and_flush(ByteBuffer::wrap(std::string_view("hello niox\n")));
  };
  h->on_read = [reply, done](ChannelHandlerContext&, Message&& m) {
    reply->append(m.get<ByteBuffer>().string_view());
    if (reply->find('\n') != std::string::npos) done->set_value();
  };
  Bootstrap b;
  b.group(group).handler(init([ssl, h](Channel& ch) {
    ch.pipeline().add_last("ssl", ssl);
    ch.pipeline().add_last("app", h);
  }));
  auto f = b.connect(InetSocketAddress::loopback_v4(port));
  ASSERT_FALSE(await_for(f));
  ASSERT_FALSE(await_for(ssl->handshake_future()));
  auto ready = done->get_future();
  wait_for(ready);
  // Read once the reply is in (the session tickets came before it): read at the handshake
  // future, the engine could still be in a ticket on its loop.
  EXPECT_EQ(ssl->engine().protocol(), "TLSv1.3");
  EXPECT_NE(ssl->engine().peer_subject().find("CN=localhost"), std::string::npos);
  EXPECT_EQ(*reply, "xoin olleh\n");
  EXPECT_FALSE(await_for(f.channel()->close()));
  server.signal(SIGTERM);
  server.wait();
  group.shutdown_gracefully();
}

NIOX_INSTANTIATE_BACKENDS(SslInteropTest);

}  // namespace
