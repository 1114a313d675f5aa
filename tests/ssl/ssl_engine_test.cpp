#include "ssl/ssl_test_pump.hpp"
#include "support/temp_dir.hpp"
#include "support/test_certificates.hpp"

#include <niox/ssl/ssl_context.hpp>
#include <niox/ssl/ssl_engine.hpp>

#include <gtest/gtest.h>

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <algorithm>
#include <fstream>

namespace niox {
namespace {

using test::EnginePair;
using test::pattern;
using test::TestCertificateAuthority;

class SslEngineTest : public ::testing::Test {
 protected:
  TestCertificateAuthority ca;
  test::PemPair leaf = ca.issue();

  SslContextBuilder server_builder() const {
    return SslContextBuilder::for_server(Pem::memory(leaf.certificate),
                                         Pem::memory(leaf.private_key));
  }
  SslContextBuilder client_builder() const {
    return SslContextBuilder::for_client().trust_manager(Pem::memory(ca.certificate_pem()));
  }
  static EnginePair pair(const SslContext& client, const SslContext& server,
                         std::string_view host = "localhost", std::uint16_t port = 443) {
    return EnginePair{client.new_engine(host, port), server.new_engine(), {}, {}, {}, {}};
  }

  // Sends `data` from one engine to the other through wrap/unwrap, record by record.
  static void send(SslEngine& from, test::Wire& wire, SslEngine& to, std::string& received,
                   const std::string& data) {
    auto src = ByteBuffer::wrap(std::string_view(data));
    while (src.has_remaining()) {
      const std::size_t before = src.position();
      const std::size_t out_before = wire.out().position();
      SslEngineResult r = from.wrap(src, wire.out());
      ASSERT_EQ(r.status, SslEngineStatus::ok) << fmt::format("{}", r);
      ASSERT_EQ(src.position() - before, r.bytes_consumed);
      ASSERT_EQ(wire.out().position() - out_before, r.bytes_produced);
      ASSERT_GT(r.bytes_consumed, 0u);
      ASSERT_LE(r.bytes_consumed, SslEngine::application_buffer_size());
      ASSERT_FALSE(wire.deliver(to, received));
    }
  }
};

TEST_F(SslEngineTest, HandshakeTls13ReportsFinishedAndSession) {
  auto server = server_builder().build();
  auto client = client_builder().build();
  EnginePair p = pair(client, server);
  EXPECT_TRUE(p.client.is_client_mode());
  EXPECT_FALSE(p.server.is_client_mode());
  EXPECT_EQ(p.client.handshake_status(), HandshakeStatus::need_wrap);
  EXPECT_EQ(p.server.handshake_status(), HandshakeStatus::need_unwrap);
  auto o = p.handshake();
  ASSERT_TRUE(o.ok()) << o.client.message() << " / " << o.server.message();
  EXPECT_TRUE(o.client_finished);
  EXPECT_TRUE(o.server_finished);
  EXPECT_EQ(p.client.protocol(), "TLSv1.3");
  EXPECT_EQ(p.server.protocol(), "TLSv1.3");
  EXPECT_EQ(p.client.cipher_suite(), p.server.cipher_suite());
  EXPECT_FALSE(p.client.cipher_suite().empty());
  EXPECT_NE(p.client.peer_subject().find("CN=localhost"), std::string::npos)
      << p.client.peer_subject();
  EXPECT_EQ(p.server.peer_subject(), "");
  EXPECT_EQ(p.server.server_name(), "localhost");
  EXPECT_EQ(p.client.application_protocol(), "");
}

TEST_F(SslEngineTest, HandshakeTls12WhenTheServerAllowsOnlyIt) {
  auto server = server_builder().protocols({SslProtocol::tls1_2}).build();
  auto client = client_builder().build();
  EnginePair p = pair(client, server);
  auto o = p.handshake();
  ASSERT_TRUE(o.ok()) << o.client.message() << " / " << o.server.message();
  EXPECT_TRUE(o.client_finished);
  EXPECT_TRUE(o.server_finished);
  EXPECT_EQ(p.client.protocol(), "TLSv1.2");
  EXPECT_EQ(p.server.protocol(), "TLSv1.2");
}

TEST_F(SslEngineTest, NoCommonVersionFailsTheHandshake) {
  auto server = server_builder().protocols({SslProtocol::tls1_2}).build();
  auto client = client_builder().protocols({SslProtocol::tls1_3}).build();
  EnginePair p = pair(client, server);
  auto o = p.handshake();
  EXPECT_TRUE(o.server) << "server accepted a TLS 1.3-only client while allowing only 1.2";
  EXPECT_TRUE(o.client);
}

TEST_F(SslEngineTest, CertificatesAndKeysLoadFromFiles) {
  test::TempDir dir;
  std::ofstream(dir / "cert.pem") << leaf.certificate;
  std::ofstream(dir / "key.pem") << leaf.private_key;
  std::ofstream(dir / "ca.pem") << ca.certificate_pem();
  auto server =
      SslContextBuilder::for_server(Pem::file(dir / "cert.pem"), Pem::file(dir / "key.pem"))
          .build();
  auto client = SslContextBuilder::for_client().trust_manager(Pem::file(dir / "ca.pem")).build();
  EnginePair p = pair(client, server);
  auto o = p.handshake();
  EXPECT_TRUE(o.ok()) << o.client.message() << " / " << o.server.message();
}

namespace {
// The bytes of a server's first flight (ServerHello to Finished) in a handshake with `client`.
std::size_t server_flight_bytes(const SslContext& client, const SslContext& server) {
  EnginePair p{client.new_engine("localhost", 443), server.new_engine(), {}, {}, {}, {}};
  EXPECT_FALSE(test::flush(p.client, p.to_server));
  EXPECT_FALSE(p.to_server.deliver(p.server, p.server_received));
  EXPECT_FALSE(test::flush(p.server, p.to_client));
  return p.to_client.out().position();
}
}  // namespace

// A certificate given without its chain is completed from the server's trust store once, when
// its context is built, not at every handshake (which looked the issuer up in the store each
// time: with the system store, a read of its directory). So a CA that reaches the trust
// directory after the build is not sent; one that was there at the build is.
TEST_F(SslEngineTest, AServerChainIsCompletedFromTheTrustStoreOnceWhenTheContextIsBuilt) {
  test::TempDir trust;
  auto server_with_trust_directory = [&] {
    return server_builder().trust_manager_directory(trust.path()).build();
  };
  const auto client = client_builder().build();
  const auto built_before_the_ca = server_with_trust_directory();
  const std::size_t leaf_only = server_flight_bytes(client, built_before_the_ca);

  // The CA under its subject hash, as a trust directory holds certificates.
  const std::string ca_pem = ca.certificate_pem();
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(ca_pem.data(), -1), &BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> ca_cert(
      PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), &X509_free);
  ASSERT_TRUE(ca_cert);
  std::ofstream(trust / fmt::format("{:08x}.0", X509_subject_name_hash(ca_cert.get()))) << ca_pem;
  const int ca_der_bytes = i2d_X509(ca_cert.get(), nullptr);
  ASSERT_GT(ca_der_bytes, 200);

  const std::size_t with_ca = server_flight_bytes(client, server_with_trust_directory());
  EXPECT_GE(with_ca, leaf_only + static_cast<std::size_t>(ca_der_bytes)) << "the CA was not sent";
  EXPECT_LT(server_flight_bytes(client, built_before_the_ca), leaf_only + 100)
      << "the chain was completed again at the handshake";
}

TEST_F(SslEngineTest, UnloadablePemIsAConfigurationError) {
  auto builder = SslContextBuilder::for_server(Pem::memory("not a certificate"),
                                               Pem::memory(leaf.private_key));
  std::error_code ec;
  SslContext context = builder.build(ec);
  EXPECT_TRUE(ec);
  EXPECT_FALSE(context.is_valid());
  EXPECT_THROW(builder.build(), std::system_error);
  test::TempDir dir;
  EXPECT_THROW(
      SslContextBuilder::for_server(Pem::file(dir / "missing.pem"), Pem::file(dir / "missing.key"))
          .build(),
      std::system_error);
  // A key that is not the certificate's.
  auto other = ca.issue();
  EXPECT_THROW(
      SslContextBuilder::for_server(Pem::memory(leaf.certificate), Pem::memory(other.private_key))
          .build(),
      std::system_error);
}

// Counts the client's flights until both sides are done: a ClientHello and a Finished, and a
// second ClientHello after a HelloRetryRequest.
int client_flights(EnginePair& p) {
  int flights = 0;
  for (int round = 0; round < 10; ++round) {
    const std::size_t before = p.to_server.out().position();
    EXPECT_FALSE(test::flush(p.client, p.to_server));
    flights += p.to_server.out().position() > before ? 1 : 0;
    EXPECT_FALSE(p.to_server.deliver(p.server, p.server_received));
    EXPECT_FALSE(test::flush(p.server, p.to_client));
    EXPECT_FALSE(p.to_client.deliver(p.client, p.client_received));
    if (p.to_server.empty() && p.to_client.empty() &&
        p.client.handshake_status() == HandshakeStatus::not_handshaking &&
        p.server.handshake_status() == HandshakeStatus::not_handshaking) {
      break;
    }
  }
  return flights;
}

// The client's first choice (P-256, the one it sends a key share for) is not one the server
// takes: the server asks again for X25519 (HelloRetryRequest), the client sends a second
// ClientHello, and the handshake completes one round trip later.
TEST_F(SslEngineTest, AHelloRetryRequestCostsARoundTripAndCompletes) {
  auto client = client_builder().named_groups({"P-256", "X25519"}).build();
  {
    EnginePair direct = pair(client, server_builder().build());
    EXPECT_EQ(client_flights(direct), 2);  // the server takes P-256 too
  }
  EnginePair p = pair(client, server_builder().named_groups({"X25519"}).build());
  EXPECT_EQ(client_flights(p), 3);
  EXPECT_EQ(p.client.protocol(), "TLSv1.3");
  std::string data = pattern(40000, 7);
  send(p.client, p.to_server, p.server, p.server_received, data);
  EXPECT_EQ(p.server_received, data);
}

TEST_F(SslEngineTest, NoCommonGroupFailsTheHandshake) {
  auto client = client_builder().named_groups({"P-384"}).build();
  EnginePair p = pair(client, server_builder().named_groups({"X25519"}).build());
  auto o = p.handshake();
  EXPECT_FALSE(o.ok());
  EXPECT_TRUE(o.server) << "the server accepted a group it does not allow";
}

TEST_F(SslEngineTest, CiphersNarrowEachVersionsSuites) {
  auto client = client_builder().build();
  {
    EnginePair p = pair(client, server_builder().ciphers({"TLS_CHACHA20_POLY1305_SHA256"}).build());
    ASSERT_TRUE(p.handshake().ok());
    EXPECT_EQ(p.server.cipher_suite(), "TLS_CHACHA20_POLY1305_SHA256");
  }
  {
    auto server = server_builder()
                      .protocols({SslProtocol::tls1_2})
                      .ciphers({"TLS_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"})
                      .build();
    EnginePair p = pair(client, server);
    ASSERT_TRUE(p.handshake().ok());
    EXPECT_EQ(p.client.protocol(), "TLSv1.2");
    EXPECT_EQ(p.client.cipher_suite(), "ECDHE-ECDSA-AES128-GCM-SHA256");
  }
  {
    // The client allows only a suite the server does not: no handshake.
    auto narrow = client_builder().ciphers({"TLS_AES_128_GCM_SHA256"}).build();
    auto server = server_builder().ciphers({"TLS_AES_256_GCM_SHA384"}).build();
    EnginePair p = pair(narrow, server);
    EXPECT_FALSE(p.handshake().ok());
  }
}

// A misspelt name fails the build with OpenSSL's reason, instead of quietly dropping the suite
// or group it meant.
TEST_F(SslEngineTest, UnknownCipherOrGroupNamesAreConfigurationErrors) {
  const std::pair<SslContextBuilder, std::string_view> cases[] = {
      {server_builder().ciphers({"TLS_AES_128_GCM_SHA256", "TLS_AES_128_GCM"}), "no cipher match"},
      {server_builder().ciphers({"ECDHE-ECDSA-AES128-GCM-SHA265"}), "no cipher match"},
      {server_builder().ciphers({""}), "no cipher match"},
      {server_builder().ciphers({"TLS_AES_128_GCM_SHA256:FOO"}), "no cipher match"},
      {server_builder().named_groups({"X25519", "P-257"}), "no suitable groups"},
      {server_builder().named_groups({"X25519:P-256"}), "no suitable groups"},
  };
  for (const auto& [builder, reason] : cases) {
    std::error_code ec;
    SslContext context = builder.build(ec);
    EXPECT_EQ(ec.category(), ssl_category());
    EXPECT_EQ(ec.message(), reason);
    EXPECT_FALSE(context.is_valid());
    EXPECT_THROW(builder.build(), std::system_error);
  }
}

TEST_F(SslEngineTest, DataBothWaysLargeAndSmall) {
  auto server = server_builder().build();
  auto client = client_builder().build();
  EnginePair p = pair(client, server);
  ASSERT_TRUE(p.handshake().ok());
  p.server_received.clear();
  p.client_received.clear();
  const std::string big = pattern(1 << 20, 1);
  send(p.client, p.to_server, p.server, p.server_received, big);
  EXPECT_TRUE(p.server_received == big);
  const std::string small = "x";
  send(p.server, p.to_client, p.client, p.client_received, small);
  const std::string reply = pattern(100'000, 2);
  send(p.server, p.to_client, p.client, p.client_received, reply);
  EXPECT_TRUE(p.client_received == small + reply);
}

TEST_F(SslEngineTest, WrapGathersSeveralSourcesIntoOneRecordAndMovesEachExactly) {
  auto server = server_builder().build();
  auto client = client_builder().build();
  EnginePair p = pair(client, server);
  ASSERT_TRUE(p.handshake().ok());
  std::string a = "head:", b = pattern(20'000, 3), c = ":tail";
  std::vector<ByteBuffer> srcs{ByteBuffer::wrap(std::string_view(a)),
                               ByteBuffer::wrap(std::string_view(b)),
                               ByteBuffer::wrap(std::string_view(c))};
  auto out = ByteBuffer::allocate(SslEngine::packet_buffer_size());
  SslEngineResult r = p.client.wrap(srcs, out);
  ASSERT_EQ(r.status, SslEngineStatus::ok);
  EXPECT_EQ(r.bytes_consumed, SslEngine::application_buffer_size());  // one record's worth
  EXPECT_EQ(srcs[0].remaining(), 0u);
  EXPECT_EQ(srcs[1].position(), SslEngine::application_buffer_size() - a.size());
  EXPECT_EQ(srcs[2].position(), 0u);
  EXPECT_EQ(out.position(), r.bytes_produced);
  out.flip();
  auto plain = ByteBuffer::allocate(SslEngine::application_buffer_size());
  r = p.server.unwrap(out, plain);
  EXPECT_EQ(r.status, SslEngineStatus::ok);
  EXPECT_EQ(r.bytes_produced, SslEngine::application_buffer_size());
  EXPECT_FALSE(out.has_remaining());
  plain.flip();
  EXPECT_EQ(plain.string_view(), (a + b).substr(0, SslEngine::application_buffer_size()));
}

TEST_F(SslEngineTest, PartialRecordIsBufferUnderflowAndConsumesNothing) {
  auto server = server_builder().build();
  auto client = client_builder().build();
  EnginePair p = pair(client, server);
  ASSERT_TRUE(p.handshake().ok());
  auto record = ByteBuffer::allocate(SslEngine::packet_buffer_size());
  auto hello = ByteBuffer::wrap(std::string_view("hello, split record"));
  ASSERT_EQ(p.client.wrap(hello, record).status, SslEngineStatus::ok);
  record.flip();
  const std::size_t whole = record.remaining();
  auto plain = ByteBuffer::allocate(SslEngine::application_buffer_size());
  for (std::size_t cut : {std::size_t{0}, std::size_t{3}, std::size_t{5}, whole - 1}) {
    auto partial = record.slice(0, cut);
    SslEngineResult r = p.server.unwrap(partial, plain);
    EXPECT_EQ(r.status, SslEngineStatus::buffer_underflow) << cut;
    EXPECT_EQ(r.bytes_consumed, 0u);
    EXPECT_EQ(partial.position(), 0u);
    EXPECT_EQ(plain.position(), 0u);
  }
  SslEngineResult r = p.server.unwrap(record, plain);
  EXPECT_EQ(r.status, SslEngineStatus::ok);
  EXPECT_EQ(r.bytes_consumed, whole);
  EXPECT_EQ(plain.flip().string_view(), "hello, split record");
}

TEST_F(SslEngineTest, SmallDestinationIsBufferOverflowAndLosesNothing) {
  auto server = server_builder().build();
  auto client = client_builder().build();
  EnginePair p = pair(client, server);
  ASSERT_TRUE(p.handshake().ok());
  const std::string data = pattern(1000, 4);
  auto src = ByteBuffer::wrap(std::string_view(data));
  auto tiny = ByteBuffer::allocate(100);
  SslEngineResult r = p.client.wrap(src, tiny);
  EXPECT_EQ(r.status, SslEngineStatus::buffer_overflow);
  EXPECT_EQ(r.bytes_consumed, 0u);
  EXPECT_EQ(r.bytes_produced, 0u);
  EXPECT_EQ(src.position(), 0u);
  EXPECT_EQ(tiny.position(), 0u);

  auto record = ByteBuffer::allocate(SslEngine::packet_buffer_size());
  r = p.client.wrap(src, record);
  ASSERT_EQ(r.status, SslEngineStatus::ok);
  EXPECT_EQ(r.bytes_consumed, data.size());
  record.flip();
  auto small_plain = ByteBuffer::allocate(10);
  r = p.server.unwrap(record, small_plain);
  EXPECT_EQ(r.status, SslEngineStatus::buffer_overflow);
  EXPECT_EQ(r.bytes_consumed, 0u);
  EXPECT_EQ(record.position(), 0u);
  EXPECT_EQ(small_plain.position(), 0u);
  auto plain = ByteBuffer::allocate(SslEngine::application_buffer_size());
  r = p.server.unwrap(record, plain);
  EXPECT_EQ(r.status, SslEngineStatus::ok);
  EXPECT_EQ(plain.flip().string_view(), data);
}

TEST_F(SslEngineTest, UnwrapScattersIntoSeveralDestinations) {
  auto server = server_builder().build();
  auto client = client_builder().build();
  EnginePair p = pair(client, server);
  ASSERT_TRUE(p.handshake().ok());
  const std::string data = pattern(3000, 5);
  auto src = ByteBuffer::wrap(std::string_view(data));
  auto record = ByteBuffer::allocate(SslEngine::packet_buffer_size());
  ASSERT_EQ(p.client.wrap(src, record).status, SslEngineStatus::ok);
  record.flip();
  std::vector<ByteBuffer> dsts{ByteBuffer::allocate(1000), ByteBuffer::allocate(1500),
                               ByteBuffer::allocate(4000)};
  SslEngineResult r = p.server.unwrap(record, dsts);
  EXPECT_EQ(r.bytes_produced, data.size());
  EXPECT_EQ(dsts[0].position(), 1000u);
  EXPECT_EQ(dsts[1].position(), 1500u);
  EXPECT_EQ(dsts[2].position(), 500u);
  std::string joined;
  for (auto& d : dsts) {
    joined += d.flip().string_view();
  }
  EXPECT_TRUE(joined == data);
}

struct VerifyCase {
  const char* name;
  int expected;
};

TEST_F(SslEngineTest, WrongHostNameIsRejected) {
  auto server = server_builder().build();
  auto client = client_builder().build();
  EnginePair p = pair(client, server, "example.com");
  auto o = p.handshake();
  EXPECT_TRUE(is_certificate_verify_error(o.client)) << o.client.message();
  EXPECT_EQ(o.client.value(), certificate_verify_failed_base + X509_V_ERR_HOSTNAME_MISMATCH);
  EXPECT_NE(o.client.message().find("hostname mismatch"), std::string::npos) << o.client.message();
  EXPECT_TRUE(o.server) << "the server must see the client's alert";
  EXPECT_TRUE(p.client.is_outbound_done());
}

TEST_F(SslEngineTest, IpAddressIsCheckedAgainstTheCertificateAddresses) {
  auto server = server_builder().build();
  auto client = client_builder().build();
  EnginePair good = pair(client, server, "127.0.0.1");
  EXPECT_TRUE(good.handshake().ok());
  EXPECT_EQ(good.server.server_name(), "") << "an address is never sent as SNI";
  EnginePair bad = pair(client, server, "127.0.0.2");
  auto o = bad.handshake();
  EXPECT_EQ(o.client.value(), certificate_verify_failed_base + X509_V_ERR_IP_ADDRESS_MISMATCH)
      << o.client.message();
}

TEST_F(SslEngineTest, SelfSignedCertificateIsRejectedByDefault) {
  auto self = TestCertificateAuthority::self_signed();
  auto server =
      SslContextBuilder::for_server(Pem::memory(self.certificate), Pem::memory(self.private_key))
          .build();
  auto client = client_builder().build();
  EnginePair p = pair(client, server);
  auto o = p.handshake();
  EXPECT_EQ(o.client.value(),
            certificate_verify_failed_base + X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT)
      << o.client.message();
}

TEST_F(SslEngineTest, ExpiredCertificateIsRejected) {
  test::CertificateSpec spec;
  spec.valid_from_seconds = -7200;
  spec.valid_to_seconds = -3600;
  auto expired = ca.issue(spec);
  auto server = SslContextBuilder::for_server(Pem::memory(expired.certificate),
                                              Pem::memory(expired.private_key))
                    .build();
  auto client = client_builder().build();
  EnginePair p = pair(client, server);
  auto o = p.handshake();
  EXPECT_EQ(o.client.value(), certificate_verify_failed_base + X509_V_ERR_CERT_HAS_EXPIRED)
      << o.client.message();
}

TEST_F(SslEngineTest, UntrustedCaIsRejected) {
  TestCertificateAuthority other("some other CA");
  auto foreign = other.issue();
  auto server = SslContextBuilder::for_server(Pem::memory(foreign.certificate),
                                              Pem::memory(foreign.private_key))
                    .build();
  auto client = client_builder().build();
  EnginePair p = pair(client, server);
  auto o = p.handshake();
  EXPECT_EQ(o.client.value(),
            certificate_verify_failed_base + X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY)
      << o.client.message();
}

TEST_F(SslEngineTest, SystemTrustStoreDoesNotTrustATestCa) {
  auto server = server_builder().build();
  auto client = SslContextBuilder::for_client().build();
  EnginePair p = pair(client, server);
  auto o = p.handshake();
  EXPECT_TRUE(is_certificate_verify_error(o.client)) << o.client.message();
}

TEST_F(SslEngineTest, ClientCertificateRequiredOptionalAndPresented) {
  auto required = server_builder()
                      .client_auth(ClientAuth::require)
                      .trust_manager(Pem::memory(ca.certificate_pem()))
                      .build();
  auto anonymous = client_builder().build();
  EnginePair without = pair(anonymous, required);
  auto o = without.handshake();
  EXPECT_TRUE(o.server) << "a required client certificate was not asked for";

  test::CertificateSpec spec;
  spec.common_name = "client one";
  auto client_leaf = ca.issue(spec);
  auto identified =
      client_builder()
          .key_manager(Pem::memory(client_leaf.certificate), Pem::memory(client_leaf.private_key))
          .build();
  EnginePair with = pair(identified, required);
  o = with.handshake();
  ASSERT_TRUE(o.ok()) << o.client.message() << " / " << o.server.message();
  EXPECT_NE(with.server.peer_subject().find("CN=client one"), std::string::npos)
      << with.server.peer_subject();

  auto optional = server_builder()
                      .client_auth(ClientAuth::optional)
                      .trust_manager(Pem::memory(ca.certificate_pem()))
                      .build();
  EnginePair maybe = pair(anonymous, optional);
  EXPECT_TRUE(maybe.handshake().ok());
  EXPECT_EQ(maybe.server.peer_subject(), "");
}

TEST_F(SslEngineTest, AlpnSelectsTheServersChoiceOrNone) {
  auto server = server_builder().application_protocols({"http/1.1"}).build();
  auto client = client_builder().application_protocols({"h2", "http/1.1"}).build();
  EnginePair p = pair(client, server);
  ASSERT_TRUE(p.handshake().ok());
  EXPECT_EQ(p.client.application_protocol(), "http/1.1");
  EXPECT_EQ(p.server.application_protocol(), "http/1.1");

  auto h2_only = client_builder().application_protocols({"h2"}).build();
  EnginePair none = pair(h2_only, server);
  ASSERT_TRUE(none.handshake().ok());
  EXPECT_EQ(none.client.application_protocol(), "");
}

class SslResumptionTest : public SslEngineTest,
                          public ::testing::WithParamInterface<SslProtocol> {};

TEST_P(SslResumptionTest, SecondConnectionToTheSamePeerResumes) {
  auto server = server_builder().protocols({GetParam()}).build();
  auto client = client_builder().build();
  EnginePair first = pair(client, server, "localhost", 8443);
  ASSERT_TRUE(first.handshake().ok());
  EXPECT_FALSE(first.client.is_session_reused());
  EnginePair second = pair(client, server, "localhost", 8443);
  ASSERT_TRUE(second.handshake().ok());
  EXPECT_TRUE(second.client.is_session_reused());
  EXPECT_TRUE(second.server.is_session_reused());
  EnginePair other_port = pair(client, server, "localhost", 9443);
  ASSERT_TRUE(other_port.handshake().ok());
  EXPECT_FALSE(other_port.client.is_session_reused());

  auto no_resumption = client_builder().session_timeout(std::chrono::seconds(0)).build();
  EnginePair a = pair(no_resumption, server);
  ASSERT_TRUE(a.handshake().ok());
  EnginePair b = pair(no_resumption, server);
  ASSERT_TRUE(b.handshake().ok());
  EXPECT_FALSE(b.client.is_session_reused());
}

INSTANTIATE_TEST_SUITE_P(Versions, SslResumptionTest,
                         ::testing::Values(SslProtocol::tls1_3, SslProtocol::tls1_2),
                         [](const auto& info) {
                           return info.param == SslProtocol::tls1_3 ? "tls1_3" : "tls1_2";
                         });

TEST_F(SslEngineTest, SniSelectsTheCertificateOfTheRequestedName) {
  test::CertificateSpec other_spec;
  other_spec.common_name = "other.test";
  other_spec.dns_names = {"other.test", "*.wild.test"};
  other_spec.ip_addresses = {};
  auto other_leaf = ca.issue(other_spec);
  auto other = SslContextBuilder::for_server(Pem::memory(other_leaf.certificate),
                                             Pem::memory(other_leaf.private_key))
                   .build();
  auto server = server_builder().sni("other.test", other).sni("*.wild.test", other).build();
  auto client = client_builder().build();

  EnginePair to_other = pair(client, server, "other.test");
  auto o = to_other.handshake();
  ASSERT_TRUE(o.ok()) << o.client.message();
  EXPECT_NE(to_other.client.peer_subject().find("CN=other.test"), std::string::npos);
  EXPECT_EQ(to_other.server.server_name(), "other.test");

  EnginePair to_default = pair(client, server, "localhost");
  ASSERT_TRUE(to_default.handshake().ok());
  EXPECT_NE(to_default.client.peer_subject().find("CN=localhost"), std::string::npos);

  EnginePair wild = pair(client, server, "a.wild.test");
  o = wild.handshake();
  ASSERT_TRUE(o.ok()) << o.client.message();
  EXPECT_NE(wild.client.peer_subject().find("CN=other.test"), std::string::npos);

  // A name no mapping covers gets the default certificate, which the client then rejects.
  EnginePair unknown = pair(client, server, "a.b.wild.test");
  o = unknown.handshake();
  EXPECT_EQ(o.client.value(), certificate_verify_failed_base + X509_V_ERR_HOSTNAME_MISMATCH);
}

TEST_F(SslEngineTest, CloseNotifyBothWays) {
  auto server = server_builder().build();
  auto client = client_builder().build();
  EnginePair p = pair(client, server);
  ASSERT_TRUE(p.handshake().ok());
  p.client.close_outbound();
  EXPECT_EQ(p.client.handshake_status(), HandshakeStatus::need_wrap);
  EXPECT_FALSE(p.client.is_outbound_done());
  auto wire = ByteBuffer::allocate(SslEngine::packet_buffer_size());
  ByteBuffer none;
  SslEngineResult r = p.client.wrap(none, wire);
  EXPECT_EQ(r.status, SslEngineStatus::closed);
  EXPECT_GT(r.bytes_produced, 0u);
  EXPECT_TRUE(p.client.is_outbound_done());
  // Application data after close_outbound is refused, not sent.
  auto late = ByteBuffer::wrap(std::string_view("late"));
  r = p.client.wrap(late, wire);
  EXPECT_EQ(r.status, SslEngineStatus::closed);
  EXPECT_EQ(late.position(), 0u);

  wire.flip();
  auto plain = ByteBuffer::allocate(SslEngine::application_buffer_size());
  r = p.server.unwrap(wire, plain);
  EXPECT_EQ(r.status, SslEngineStatus::closed);
  EXPECT_TRUE(p.server.is_inbound_done());
  EXPECT_EQ(p.server.handshake_status(), HandshakeStatus::need_wrap)
      << "the server answers close_notify";
  EXPECT_NO_THROW(p.server.close_inbound());
  auto back = ByteBuffer::allocate(SslEngine::packet_buffer_size());
  r = p.server.wrap(none, back);
  EXPECT_EQ(r.status, SslEngineStatus::closed);
  EXPECT_TRUE(p.server.is_outbound_done());
  back.flip();
  r = p.client.unwrap(back, plain);
  EXPECT_EQ(r.status, SslEngineStatus::closed);
  EXPECT_TRUE(p.client.is_inbound_done());
  EXPECT_NO_THROW(p.client.close_inbound());
}

// While none of its records is encrypted, an engine closed mid-handshake sends the two
// plaintext alerts of RFC 8446 6.1, user_canceled then close_notify, and the handshake is over
// on both sides: the peer reads a cancellation, neither a protocol error nor a truncation.
TEST_F(SslEngineTest, CloseOutboundBeforeAnythingIsEncryptedSendsUserCanceledThenCloseNotify) {
  const unsigned char alert_records[] = {21, 3, 3, 0, 2, 1, 90,  // warning, user_canceled
                                         21, 3, 3, 0, 2, 1, 0};  // warning, close_notify
  const auto alerts = std::as_bytes(std::span(alert_records));
  auto server = server_builder().build();
  auto client = client_builder().build();
  ByteBuffer none;
  {
    // A client whose ClientHello left.
    EnginePair p = pair(client, server);
    ASSERT_FALSE(test::flush(p.client, p.to_server));
    p.client.close_outbound();
    EXPECT_EQ(p.client.handshake_status(), HandshakeStatus::need_wrap);
    auto wire = ByteBuffer::allocate(SslEngine::packet_buffer_size());
    SslEngineResult r = p.client.wrap(none, wire);
    EXPECT_EQ(r.status, SslEngineStatus::closed);
    EXPECT_TRUE(std::ranges::equal(wire.flip().bytes(), alerts));
    EXPECT_TRUE(p.client.is_outbound_done());
    EXPECT_TRUE(p.client.is_inbound_done());
    EXPECT_NO_THROW(p.client.close_inbound());
    auto plain = ByteBuffer::allocate(SslEngine::application_buffer_size());
    auto late = ByteBuffer::wrap(std::string_view("\x16\x03\x03\x00\x01\x00", 6));
    r = p.client.unwrap(late, plain);
    EXPECT_EQ(r.status, SslEngineStatus::closed) << "the handshake is abandoned";
    EXPECT_EQ(r.bytes_consumed, 0u);

    // The server reads the ClientHello (and answers it), then the alerts.
    p.to_server.out().put(wire);
    std::string ignored;
    EXPECT_EQ(p.to_server.deliver(p.server, ignored), SslErrc::handshake_canceled);
    EXPECT_TRUE(p.server.is_inbound_done());
    EXPECT_NO_THROW(p.server.close_inbound());
  }
  {
    // A server that began but has read nothing yet.
    SslEngine engine = server.new_engine();
    engine.begin_handshake();
    engine.close_outbound();
    auto wire = ByteBuffer::allocate(SslEngine::packet_buffer_size());
    engine.wrap(none, wire);
    EXPECT_TRUE(std::ranges::equal(wire.flip().bytes(), alerts));
  }
  {
    // No handshake began: nothing to cancel.
    SslEngine engine = client.new_engine("localhost");
    engine.close_outbound();
    auto wire = ByteBuffer::allocate(SslEngine::packet_buffer_size());
    EXPECT_EQ(engine.wrap(none, wire).bytes_produced, 0u);
    EXPECT_TRUE(engine.is_outbound_done());
  }
}

// Once its records are encrypted an alert needs keys only OpenSSL holds, so the engine reads
// the peer's last flight, which the peer sends without waiting, and close_notify follows: a
// TLS 1.3 server after its flight, a TLS 1.2 client after its Finished.
TEST_F(SslEngineTest, CloseOutboundAfterEncryptedHandshakeRecordsSendsCloseNotifyAfterIt) {
  for (bool tls12 : {false, true}) {
    SCOPED_TRACE(tls12 ? "TLS 1.2, the client closes" : "TLS 1.3, the server closes");
    auto server = tls12 ? server_builder().protocols({SslProtocol::tls1_2}).build()
                        : server_builder().build();
    auto client = client_builder().build();
    EnginePair p = pair(client, server);
    std::string ignored;
    ASSERT_FALSE(test::flush(p.client, p.to_server));  // ClientHello
    ASSERT_FALSE(p.to_server.deliver(p.server, ignored));
    ASSERT_FALSE(test::flush(p.server, p.to_client));
    if (tls12) {
      ASSERT_FALSE(p.to_client.deliver(p.client, ignored));
      ASSERT_FALSE(test::flush(p.client, p.to_server));  // ClientKeyExchange .. Finished
    }
    SslEngine& closing = tls12 ? p.client : p.server;
    SslEngine& peer = tls12 ? p.server : p.client;
    test::Wire& to_closing = tls12 ? p.to_client : p.to_server;
    test::Wire& to_peer = tls12 ? p.to_server : p.to_client;
    closing.close_outbound();
    EXPECT_EQ(closing.handshake_status(), HandshakeStatus::need_unwrap);
    EXPECT_FALSE(closing.is_outbound_done());
    EXPECT_FALSE(closing.is_inbound_done());
    auto nothing = ByteBuffer::allocate(SslEngine::packet_buffer_size());
    ByteBuffer none;
    EXPECT_EQ(closing.wrap(none, nothing).bytes_produced, 0u);

    // The peer finishes its handshake on what it has, and sends its last flight.
    ASSERT_FALSE(to_peer.deliver(peer, ignored));
    ASSERT_FALSE(test::flush(peer, to_closing));
    ASSERT_FALSE(to_closing.deliver(closing, ignored));
    EXPECT_EQ(closing.handshake_status(), HandshakeStatus::need_wrap);
    ASSERT_FALSE(test::flush(closing, to_peer));
    EXPECT_TRUE(closing.is_outbound_done());

    EXPECT_FALSE(to_peer.deliver(peer, ignored));
    ASSERT_FALSE(to_peer.results.empty());
    EXPECT_EQ(to_peer.results.back().status, SslEngineStatus::closed) << "no close_notify";
    EXPECT_TRUE(peer.is_inbound_done());
    EXPECT_NO_THROW(peer.close_inbound());
  }
}

TEST_F(SslEngineTest, InboundClosedWithoutCloseNotifyIsTruncation) {
  auto server = server_builder().build();
  auto client = client_builder().build();
  EnginePair p = pair(client, server);
  ASSERT_TRUE(p.handshake().ok());
  std::error_code ec;
  p.server.close_inbound(ec);
  EXPECT_EQ(ec, SslErrc::truncated);
  EXPECT_TRUE(p.server.is_inbound_done());
  try {
    p.client.close_inbound();
    FAIL() << "close_inbound without close_notify did not throw";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), SslErrc::truncated);
    EXPECT_NE(std::string(e.what()).find("truncation"), std::string::npos) << e.what();
  }
  // Before any byte was exchanged there is nothing to truncate.
  SslEngine fresh = server.new_engine();
  EXPECT_NO_THROW(fresh.close_inbound());
}

TEST_F(SslEngineTest, PlaintextHttpIsAClearError) {
  auto server = server_builder().build();
  SslEngine engine = server.new_engine();
  auto request = ByteBuffer::wrap(std::string_view("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"));
  auto plain = ByteBuffer::allocate(SslEngine::application_buffer_size());
  try {
    engine.unwrap(request, plain);
    FAIL() << "plaintext HTTP was accepted";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), SslErrc::not_ssl_record);
    EXPECT_NE(std::string(e.what()).find("not an SSL/TLS record"), std::string::npos) << e.what();
  }
  std::error_code ec;
  engine.unwrap(request, plain, ec);
  EXPECT_EQ(ec, SslErrc::engine_closed) << "an engine that failed stays failed";
  EXPECT_TRUE(engine.is_outbound_done());
}

TEST_F(SslEngineTest, RandomBytesBeforeTheHandshakeFail) {
  auto server = server_builder().build();
  for (unsigned seed = 0; seed < 64; ++seed) {
    SslEngine engine = server.new_engine();
    std::string noise = pattern(64 << 10, seed);
    if (seed % 2 == 1) {
      noise.replace(0, 5,
                    std::string("\x16\x03\x01\x01\x00", 5));  // a plausible header, then noise
    }
    auto src = ByteBuffer::wrap(std::string_view(noise));
    auto plain = ByteBuffer::allocate(SslEngine::application_buffer_size());
    std::error_code ec;
    while (!ec) {
      SslEngineResult r = engine.unwrap(src, plain, ec);
      if (r.status == SslEngineStatus::buffer_underflow) {
        break;
      }
    }
    EXPECT_TRUE(ec) << "seed " << seed << ": 64 KiB of noise did not fail the handshake";
  }
}

TEST_F(SslEngineTest, OversizedRecordIsRejectedAtItsHeader) {
  auto server = server_builder().build();
  SslEngine engine = server.new_engine();
  const unsigned char header[] = {0x16, 0x03, 0x03, 0x48, 0x01};  // 18433 bytes announced
  auto src =
      ByteBuffer::wrap(std::span<const std::byte>(reinterpret_cast<const std::byte*>(header), 5));
  auto plain = ByteBuffer::allocate(16);
  std::error_code ec;
  engine.unwrap(src, plain, ec);
  EXPECT_EQ(ec, SslErrc::record_overflow);
}

// A raw OpenSSL TLS 1.2 client that asks our server to renegotiate.
TEST_F(SslEngineTest, RenegotiationIsRefused) {
  auto server = server_builder().protocols({SslProtocol::tls1_2}).build();
  SslEngine engine = server.new_engine();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
  SSL* peer = SSL_new(ctx);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  BIO_set_mem_eof_return(in, -1);
  SSL_set_bio(peer, in, out);
  SSL_set_connect_state(peer);

  auto pump = [&](std::error_code& ec) {
    // peer -> engine
    std::vector<char> bytes(BIO_ctrl_pending(out));
    if (!bytes.empty()) {
      BIO_read(out, bytes.data(), static_cast<int>(bytes.size()));
    }
    auto src = ByteBuffer::wrap(std::string_view(bytes.data(), bytes.size()));
    auto plain = ByteBuffer::allocate(SslEngine::application_buffer_size());
    while (src.has_remaining() && !ec) {
      if (engine.unwrap(src, plain, ec).status != SslEngineStatus::ok) {
        break;
      }
    }
    // engine -> peer
    auto wire = ByteBuffer::allocate(1 << 16);
    test::Wire sink;
    test::flush(engine, sink);
    sink.out().flip();
    BIO_write(in, sink.out().bytes().data(), static_cast<int>(sink.out().remaining()));
  };
  std::error_code ec;
  for (int i = 0; i < 10 && SSL_is_init_finished(peer) != 1; ++i) {
    SSL_do_handshake(peer);
    pump(ec);
  }
  SSL_do_handshake(peer);
  ASSERT_EQ(SSL_is_init_finished(peer), 1);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_EQ(SSL_renegotiate(peer), 1);
  SSL_do_handshake(peer);
  pump(ec);
  EXPECT_EQ(ec, SslErrc::renegotiation_refused);
  EXPECT_TRUE(engine.is_outbound_done());
  // The peer's renegotiation did not complete.
  char byte;
  EXPECT_LE(SSL_read(peer, &byte, 1), 0);
  EXPECT_EQ(SSL_renegotiate_pending(peer), 1);
  SSL_free(peer);
  SSL_CTX_free(ctx);
}

TEST_F(SslEngineTest, ErrorCategoryNamesOpensslReasons) {
  auto server = server_builder().protocols({SslProtocol::tls1_2}).build();
  auto client = client_builder().protocols({SslProtocol::tls1_3}).build();
  EnginePair p = pair(client, server);
  auto o = p.handshake();
  ASSERT_TRUE(o.server);
  EXPECT_EQ(o.server.category(), ssl_category());
  EXPECT_STREQ(o.server.category().name(), "niox.ssl");
  EXPECT_FALSE(o.server.message().empty());
  EXPECT_EQ(o.server.message().find("unknown"), std::string::npos) << o.server.message();
}

}  // namespace
}  // namespace niox
