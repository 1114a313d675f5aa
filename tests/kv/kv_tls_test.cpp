// The kv example over TLS, in-process, on every backend: an SslHandler in front of the kv
// pipeline on both sides.
#include "kv_client.hpp"
#include "kv_server.hpp"
#include "support/backends.hpp"
#include "support/test_certificates.hpp"
#include "support/transport_sockets.hpp"

#include <niox/ssl/ssl_context.hpp>
#include <niox/transport/bootstrap.hpp>
#include <niox/transport/ssl_handler.hpp>

#include <gtest/gtest.h>

#include <string>

namespace niox {
namespace {

ByteBuffer text_buffer(const std::string& s) {
  auto b = ByteBuffer::allocate(s.size());
  b.put(std::string_view(s)).flip();
  return b;
}

class KvTlsTest : public test::BackendTest {
 protected:
  void SetUp() override {
    test::BackendTest::SetUp();
    if (IsSkipped()) return;
    EventLoopGroup::Options o;
    o.threads = 2;
    o.loop = options();
    group_ = std::make_unique<EventLoopGroup>(o);
    ServerBootstrap b;
    b.group(*group_).child_handler(std::make_shared<ChannelInitializer>([this](Channel& ch) {
      ch.pipeline().add_last("ssl", std::make_shared<SslHandler>(server_ssl_.new_engine()));
      kv::init_server_pipeline(ch, store_);
    }));
    auto bound = b.bind(InetSocketAddress::loopback_v4(0));
    bound.sync();
    server_ = std::static_pointer_cast<LoopServerSocketChannel>(bound.channel());
  }
  void TearDown() override {
    std::error_code ignored;
    if (server_) server_->close().sync(ignored);
    if (group_) group_->shutdown_gracefully();
  }
  SocketAddress address() const { return *server_->local_address(); }

  test::TestCertificateAuthority ca_;
  test::PemPair leaf_ = ca_.issue();  // for localhost and 127.0.0.1
  SslContext server_ssl_ =
      SslContextBuilder::for_server(Pem::memory(leaf_.certificate), Pem::memory(leaf_.private_key))
          .build();
  kv::KvStore store_;
  std::unique_ptr<EventLoopGroup> group_;
  std::shared_ptr<LoopServerSocketChannel> server_;
};

TEST_P(KvTlsTest, PutGetDeleteOverTls) {
  auto client_ssl =
      SslContextBuilder::for_client().trust_manager(Pem::memory(ca_.certificate_pem())).build();
  kv::KvClient c(*group_, address(), client_ssl);
  const std::string big(300'000, 'v');
  EXPECT_EQ(c.put("a", text_buffer("alpha")).get().status, kv::Status::ok);
  EXPECT_EQ(c.put("big", text_buffer(big)).get().status, kv::Status::ok);
  auto r = c.get("a").get();
  ASSERT_EQ(r.status, kv::Status::ok);
  EXPECT_EQ(r.value.string_view(), "alpha");
  r = c.get("big").get();
  ASSERT_EQ(r.status, kv::Status::ok);
  EXPECT_TRUE(r.value.string_view() == big);
  EXPECT_EQ(c.del("a").get().status, kv::Status::ok);
  EXPECT_EQ(c.get("a").get().status, kv::Status::not_found);
}

TEST_P(KvTlsTest, UntrustedServerOrWrongNameIsRefused) {
  auto system_trust = SslContextBuilder::for_client().build();
  EXPECT_THROW(kv::KvClient(*group_, address(), system_trust), std::system_error);
  auto client_ssl =
      SslContextBuilder::for_client().trust_manager(Pem::memory(ca_.certificate_pem())).build();
  try {
    kv::KvClient c(*group_, address(), client_ssl, "kv.example.com");
    FAIL() << "a certificate for localhost passed for kv.example.com";
  } catch (const std::system_error& e) {
    EXPECT_TRUE(is_certificate_verify_error(e.code())) << e.what();
  }
  // The server is unharmed.
  kv::KvClient ok(*group_, address(), client_ssl, "localhost");
  EXPECT_EQ(ok.put("k", text_buffer("v")).get().status, kv::Status::ok);
}

NIOX_INSTANTIATE_BACKENDS(KvTlsTest);

}  // namespace
}  // namespace niox
