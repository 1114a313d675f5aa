// The engine's own TLS 1.3 record sealer (src/ssl/record_sealer.hpp): once the handshake is
// done, application data is encrypted from the caller's buffers straight into the destination
// instead of through SSL_write. The peer here is another engine, i.e. OpenSSL's record layer
// reading what the sealer made; traffic_keys_test.cpp opens the sealer's records with an
// independent AEAD as well. What OpenSSL still makes on that side (alerts, a KeyUpdate it
// answers) must be sealed again under the sealer's numbers, or the peer fails.
#include "ssl/ssl_engine_impl.hpp"
#include "ssl/ssl_test_pump.hpp"
#include "support/test_certificates.hpp"

#include <niox/ssl/ssl_context.hpp>
#include <niox/ssl/ssl_engine.hpp>

#include <gtest/gtest.h>

#include <openssl/ssl.h>

#include <array>
#include <string>

namespace niox {
namespace {

using test::EnginePair;
using test::pattern;
using test::TestCertificateAuthority;

class RecordSealerTest : public ::testing::Test {
 protected:
  TestCertificateAuthority ca;
  test::PemPair leaf = ca.issue();

  SslContext server_context(bool exports = false) const {
    return SslContextBuilder::for_server(Pem::memory(leaf.certificate),
                                         Pem::memory(leaf.private_key))
        .export_traffic_keys(exports)
        .build();
  }
  SslContext client_context() const {
    return SslContextBuilder::for_client().trust_manager(Pem::memory(ca.certificate_pem())).build();
  }
  SslContext server = server_context();
  SslContext client = client_context();

  static EnginePair pair(const SslContext& client, const SslContext& server) {
    return EnginePair{client.new_engine("localhost", 443), server.new_engine(), {}, {}, {}, {}};
  }
  // Whether `engine` started from its context's SSL_CTX with the key-log callback (see
  // SslContext::Impl), which it may still be on after SNI.
  static bool started_with_keys(SslEngine& engine) {
    return SSL_CTX_get_keylog_callback(SSL_get_SSL_CTX(detail::SslEngineAccess::ssl(engine))) !=
           nullptr;
  }
  // A finished handshake, then a full record from the server, which starts its sealer, and
  // then `text`; `got` holds what the client received.
  static void first_data_from_server(EnginePair& p, std::string_view text, std::string& got) {
    ASSERT_TRUE(p.handshake().ok());
    const std::string full = pattern(SslEngine::application_buffer_size(), 1);
    std::array<ByteBuffer, 2> data = {ByteBuffer::wrap(std::string_view(full)),
                                      ByteBuffer::wrap(text)};
    send(p.server, data, p.to_client, p.client, got);
    ASSERT_TRUE(detail::SslEngineAccess::sealing(p.server));
    ASSERT_EQ(got, full + std::string(text));
    got = text;
  }

  // Wraps all of `srcs` (one record per call, as the contract says), checking each result
  // against the positions, then delivers the records to `to`.
  static void send(SslEngine& from, std::span<ByteBuffer> srcs, test::Wire& wire, SslEngine& to,
                   std::string& received) {
    for (;;) {
      std::size_t left = 0;
      for (const ByteBuffer& b : srcs) left += b.remaining();
      if (left == 0) break;
      const std::size_t out_before = wire.out().position();
      SslEngineResult r = from.wrap(srcs, wire.out());
      ASSERT_EQ(r.status, SslEngineStatus::ok) << fmt::format("{}", r);
      ASSERT_EQ(r.bytes_consumed, std::min(left, SslEngine::application_buffer_size()));
      ASSERT_EQ(wire.out().position() - out_before, r.bytes_produced);
      if (detail::SslEngineAccess::sealing(from)) {
        // One record: header, inner content type and a 16-byte tag.
        ASSERT_EQ(r.bytes_produced, r.bytes_consumed + 22);
      }
    }
    ASSERT_FALSE(wire.deliver(to, received));
  }
};

class RecordSealerSuiteTest : public RecordSealerTest,
                              public ::testing::WithParamInterface<const char*> {};

TEST_P(RecordSealerSuiteTest, GatheredSourcesArriveExactlyAtThePeer) {
  EnginePair p = pair(client, server);
  ASSERT_EQ(SSL_set_ciphersuites(detail::SslEngineAccess::ssl(p.client), GetParam()), 1);
  ASSERT_TRUE(p.handshake().ok());
  ASSERT_EQ(p.client.cipher_suite(), GetParam());

  // Odd sizes, so records start and end inside sources; an empty source in the middle.
  const std::string data = pattern(40'000, 7);
  std::array<std::size_t, 5> cuts = {1, 16'383, 0, 5'000, 18'616};
  std::array<ByteBuffer, 5> srcs;
  std::size_t at = 0;
  for (std::size_t i = 0; i < cuts.size(); ++i) {
    srcs[i] = ByteBuffer::wrap(std::string_view(data).substr(at, cuts[i]));
    at += cuts[i];
  }
  ASSERT_EQ(at, data.size());
  std::string got;
  send(p.server, srcs, p.to_client, p.client, got);
  EXPECT_TRUE(detail::SslEngineAccess::sealing(p.server));
  EXPECT_EQ(got, data);

  // And the other way, from a client, one byte and then a full record.
  std::array<ByteBuffer, 1> one = {ByteBuffer::wrap(std::string_view("x"))};
  std::string server_got;
  send(p.client, one, p.to_server, p.server, server_got);
  const std::string full = pattern(16'384, 8);
  std::array<ByteBuffer, 1> whole = {ByteBuffer::wrap(std::string_view(full))};
  send(p.client, whole, p.to_server, p.server, server_got);
  EXPECT_TRUE(detail::SslEngineAccess::sealing(p.client));
  EXPECT_EQ(server_got, "x" + full);
}

INSTANTIATE_TEST_SUITE_P(Ciphers, RecordSealerSuiteTest,
                         ::testing::Values("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                                           "TLS_CHACHA20_POLY1305_SHA256"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::erase(n, '_');
                           return n;
                         });

TEST_F(RecordSealerTest, APeerAskingForAKeyUpdateGetsOneAndTheNewKeysAfterIt) {
  EnginePair p = pair(client, server_context(/*exports=*/true));
  std::string client_got;
  ASSERT_NO_FATAL_FAILURE(first_data_from_server(p, "before", client_got));
  auto before = p.server.export_traffic_keys(TrafficDirection::outbound);
  ASSERT_TRUE(before);

  // The client updates its keys and asks the server to update its own.
  ASSERT_EQ(SSL_key_update(detail::SslEngineAccess::ssl(p.client), SSL_KEY_UPDATE_REQUESTED), 1);
  std::array<ByteBuffer, 1> ping = {ByteBuffer::wrap(std::string_view("ping"))};
  std::string server_got;
  send(p.client, ping, p.to_server, p.server, server_got);   // the KeyUpdate, then "ping"
  EXPECT_FALSE(detail::SslEngineAccess::sealing(p.client));  // its secret moved on in OpenSSL
  EXPECT_EQ(server_got, "ping");
  // The server's answer waits in the engine, sealed under the old keys.
  EXPECT_EQ(p.server.handshake_status(), HandshakeStatus::need_wrap);
  ASSERT_FALSE(test::flush(p.server, p.to_client));
  auto after = p.server.export_traffic_keys(TrafficDirection::outbound);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->sequence, 0u);
  EXPECT_NE(after->iv, before->iv);

  // Data under the new keys both ways, twice.
  for (int i = 0; i < 2; ++i) {
    const std::string text = pattern(20'000, 10 + i);
    std::array<ByteBuffer, 1> src = {ByteBuffer::wrap(std::string_view(text))};
    client_got.clear();
    send(p.server, src, p.to_client, p.client, client_got);
    EXPECT_EQ(client_got, text) << i;
    std::array<ByteBuffer, 1> back = {ByteBuffer::wrap(std::string_view(text))};
    server_got.clear();
    send(p.client, back, p.to_server, p.server, server_got);
    EXPECT_EQ(server_got, text);
  }
  EXPECT_EQ(p.server.export_traffic_keys(TrafficDirection::outbound)->sequence, 4u);
}

TEST_F(RecordSealerTest, CloseNotifyIsSealedAndEndsThePeersInputCleanly) {
  EnginePair p = pair(client, server);
  std::string got;
  ASSERT_NO_FATAL_FAILURE(first_data_from_server(p, "last words", got));
  p.server.close_outbound();
  ASSERT_FALSE(test::flush(p.server, p.to_client));
  EXPECT_TRUE(p.server.is_outbound_done());
  EXPECT_FALSE(p.to_client.deliver(p.client, got));
  EXPECT_EQ(got, "last words");
  ASSERT_FALSE(p.to_client.results.empty());
  EXPECT_EQ(p.to_client.results.back().status, SslEngineStatus::closed);
  EXPECT_TRUE(p.client.is_inbound_done());
  std::error_code ec;
  p.client.close_inbound(ec);
  EXPECT_FALSE(ec) << ec.message();  // close_notify arrived: no truncation
}

TEST_F(RecordSealerTest, AnAlertOpenSslSendsIsSealedSoThePeerReadsIt) {
  EnginePair p = pair(client, server);
  std::string got;
  ASSERT_NO_FATAL_FAILURE(first_data_from_server(p, "hello", got));

  // A client record with one bit flipped: the server fails and answers bad_record_mac.
  ByteBuffer record = ByteBuffer::allocate(SslEngine::packet_buffer_size());
  ByteBuffer src = ByteBuffer::wrap(std::string_view("tampered"));
  p.client.wrap(src, record);
  record.flip();
  record.put(std::size_t{10}, static_cast<std::uint8_t>(record.get(10) ^ 1u));
  ByteBuffer plain = ByteBuffer::allocate(SslEngine::application_buffer_size());
  std::error_code ec;
  p.server.unwrap(record, plain, ec);
  ASSERT_TRUE(ec);
  test::flush(p.server, p.to_client);
  // The client reads the alert itself (it decrypts under the sealer's numbers), rather than
  // failing to decrypt it.
  std::error_code client_ec = p.to_client.deliver(p.client, got);
  ASSERT_TRUE(client_ec);
  EXPECT_NE(client_ec.message().find("alert"), std::string::npos) << client_ec.message();
}

// Deriving the sealer's keys costs more than the copies of one small response would: a
// connection that answers one request and closes never starts it; one that goes on does, once
// its small writes add up (64 KiB).
TEST_F(RecordSealerTest, SmallWritesStayWithOpenSslUntilTheyAddUp) {
  EnginePair p = pair(client, server);
  ASSERT_TRUE(p.handshake().ok());
  const std::string response = pattern(4096, 2);
  std::string got;
  std::size_t sent = 0;
  for (int i = 0; i < 16; ++i) {
    std::array<ByteBuffer, 1> src = {ByteBuffer::wrap(std::string_view(response))};
    send(p.server, src, p.to_client, p.client, got);
    sent += response.size();
    EXPECT_EQ(detail::SslEngineAccess::sealing(p.server), sent > 64 * 1024) << sent;
  }
  std::array<ByteBuffer, 1> last = {ByteBuffer::wrap(std::string_view(response))};
  send(p.server, last, p.to_client, p.client, got);
  EXPECT_TRUE(detail::SslEngineAccess::sealing(p.server));
  EXPECT_EQ(got.size(), 17 * response.size());
}

TEST_F(RecordSealerTest, APeerAskingForSmallRecordsGetsThemFromOpenSsl) {
  EnginePair p = pair(client, server);
  ASSERT_EQ(SSL_set_tlsext_max_fragment_length(detail::SslEngineAccess::ssl(p.client),
                                               TLSEXT_max_fragment_length_512),
            1);
  ASSERT_TRUE(p.handshake().ok());
  const std::string text = pattern(3'000, 4);
  auto src = ByteBuffer::wrap(std::string_view(text));
  ByteBuffer& wire = p.to_client.out();
  while (src.has_remaining()) {
    ASSERT_EQ(p.server.wrap(src, wire).status, SslEngineStatus::ok);
  }
  EXPECT_FALSE(detail::SslEngineAccess::sealing(p.server));
  // Every record the server made holds at most 512 bytes of plaintext.
  for (std::size_t at = 0; at < wire.position();) {
    const std::size_t length = std::size_t{wire.get(at + 3)} << 8 | wire.get(at + 4);
    EXPECT_LE(length, 512u + 1 + 16) << at;
    at += 5 + length;
  }
  std::string got;
  ASSERT_FALSE(p.to_client.deliver(p.client, got));
  EXPECT_EQ(got, text);
}

TEST_F(RecordSealerTest, Tls12KeepsOpenSslsRecords) {
  auto tls12 =
      SslContextBuilder::for_server(Pem::memory(leaf.certificate), Pem::memory(leaf.private_key))
          .protocols({SslProtocol::tls1_2})
          .build();
  EnginePair p = pair(client, tls12);
  ASSERT_TRUE(p.handshake().ok());
  ASSERT_EQ(p.server.protocol(), "TLSv1.2");
  const std::string text = pattern(30'000, 3);
  std::string got;
  auto src = ByteBuffer::wrap(std::string_view(text));
  while (src.has_remaining()) {
    SslEngineResult r = p.server.wrap(src, p.to_client.out());
    ASSERT_EQ(r.status, SslEngineStatus::ok);
  }
  EXPECT_FALSE(detail::SslEngineAccess::sealing(p.server));
  ASSERT_FALSE(p.to_client.deliver(p.client, got));
  EXPECT_EQ(got, text);
}

// The key-log callback costs every handshake its secrets formatted as text, and only a
// connection that seals uses them (see SslContext::Impl). Connections that end without sealing
// (one small answer each, as with a handshake per request) make the next ones start without
// it: such a connection writes even 1 MiB, through SSL_write. Connections that would have
// sealed turn it back on within a few.
TEST_F(RecordSealerTest, AContextAsksForKeysOnlyWhileItsConnectionsUseThem) {
  // Whether the server's engine started with the key-log callback, and whether it sealed.
  struct Seen {
    bool keys = false;
    bool sealed = false;
  };
  auto exchange = [&](std::size_t bytes) {
    EnginePair p = pair(client, server);
    EXPECT_TRUE(p.handshake().ok());
    Seen seen;
    seen.keys = started_with_keys(p.server);
    const std::string data = pattern(bytes, 3);
    std::array<ByteBuffer, 1> src = {ByteBuffer::wrap(std::string_view(data))};
    std::string got;
    send(p.server, src, p.to_client, p.client, got);
    EXPECT_EQ(got.size(), data.size());
    EXPECT_TRUE(got == data);
    seen.sealed = detail::SslEngineAccess::sealing(p.server);
    return seen;
  };
  Seen first = exchange(1 << 20);
  EXPECT_TRUE(first.keys && first.sealed) << "a new context starts with keys";
  for (int i = 0; i < 64; ++i) exchange(100);
  Seen quiet = exchange(1 << 20);
  EXPECT_FALSE(quiet.keys) << "short connections did not turn the keys off";
  EXPECT_FALSE(quiet.sealed);
  int without_keys = 1;
  while (!exchange(1 << 20).keys && without_keys < 16) ++without_keys;
  EXPECT_LE(without_keys, 3) << "connections that would have sealed did not turn keys back on";
}

// The context's two SSL_CTXs share their ticket keys: a session the server gave out while it
// asked for keys resumes on an engine that does not, and the other way round. (Each pair stays
// open: OpenSSL drops the session of a connection freed without a close.)
TEST_F(RecordSealerTest, ASessionResumesWhetherTheServerAskedForKeysOrNot) {
  const SslContext others = client_context();  // moves the server's choice, not `client`'s session
  EnginePair keyed = pair(client, server);
  ASSERT_TRUE(keyed.handshake().ok());
  EXPECT_TRUE(started_with_keys(keyed.server));
  for (int i = 0; i < 64; ++i) {
    EnginePair p = pair(others, server);
    ASSERT_TRUE(p.handshake().ok());
  }
  EnginePair quiet = pair(client, server);
  ASSERT_TRUE(quiet.handshake().ok());
  EXPECT_FALSE(started_with_keys(quiet.server));
  EXPECT_TRUE(quiet.server.is_session_reused()) << "a session from the keyed SSL_CTX";
  EXPECT_TRUE(quiet.client.is_session_reused());
  for (int i = 0; i < 4; ++i) {
    EnginePair p = pair(others, server);
    ASSERT_TRUE(p.handshake().ok());
    const std::string data = pattern(1 << 17, 5);
    std::array<ByteBuffer, 1> src = {ByteBuffer::wrap(std::string_view(data))};
    std::string got;
    send(p.server, src, p.to_client, p.client, got);  // would have sealed: keys come back
  }
  EnginePair keyed_again = pair(client, server);
  ASSERT_TRUE(keyed_again.handshake().ok());
  EXPECT_TRUE(started_with_keys(keyed_again.server));
  EXPECT_TRUE(keyed_again.server.is_session_reused()) << "a session from the quiet SSL_CTX";
}
// SNI moves a connection to another context's SSL_CTX of the same kind: one that started
// without the key-log callback stays without it, with the other context's certificate.
TEST_F(RecordSealerTest, SniKeepsAConnectionWithoutKeysWithoutThem) {
  test::CertificateSpec other_spec;
  other_spec.common_name = "other.test";
  other_spec.dns_names = {"other.test"};
  other_spec.ip_addresses = {};
  const test::PemPair other_leaf = ca.issue(other_spec);
  const SslContext other = SslContextBuilder::for_server(Pem::memory(other_leaf.certificate),
                                                         Pem::memory(other_leaf.private_key))
                               .export_traffic_keys(false)
                               .build();
  const SslContext named =
      SslContextBuilder::for_server(Pem::memory(leaf.certificate), Pem::memory(leaf.private_key))
          .export_traffic_keys(false)
          .sni("other.test", other)
          .build();
  auto to_other = [&] {
    return EnginePair{client.new_engine("other.test", 443), named.new_engine(), {}, {}, {}, {}};
  };
  EnginePair keyed = to_other();
  ASSERT_TRUE(keyed.handshake().ok());
  EXPECT_TRUE(started_with_keys(keyed.server));
  for (int i = 0; i < 64; ++i) {
    EnginePair p = pair(client, named);
    ASSERT_TRUE(p.handshake().ok());
  }
  EnginePair quiet = to_other();
  auto o = quiet.handshake();
  ASSERT_TRUE(o.ok()) << o.client.message() << " / " << o.server.message();
  EXPECT_NE(quiet.client.peer_subject().find("CN=other.test"), std::string::npos);
  EXPECT_EQ(quiet.server.server_name(), "other.test");
  EXPECT_FALSE(started_with_keys(quiet.server));
}

// The twin without keys presents what the first SSL_CTX loaded and completed: the same chain.
TEST_F(RecordSealerTest, AServerWithoutKeysPresentsTheSameChain) {
  const SslContext completed =
      SslContextBuilder::for_server(Pem::memory(leaf.certificate), Pem::memory(leaf.private_key))
          .export_traffic_keys(false)
          .trust_manager(Pem::memory(ca.certificate_pem()))
          .build();
  // The server's first flight, and whether its engine started with keys.
  auto flight = [&] {
    EnginePair p = pair(client, completed);
    EXPECT_FALSE(test::flush(p.client, p.to_server));
    EXPECT_FALSE(p.to_server.deliver(p.server, p.server_received));
    EXPECT_FALSE(test::flush(p.server, p.to_client));
    return std::pair{p.to_client.out().position(), started_with_keys(p.server)};
  };
  const auto [keyed_bytes, keyed] = flight();
  ASSERT_TRUE(keyed);
  for (int i = 0; i < 64; ++i) {
    EnginePair p = pair(client, completed);
    ASSERT_TRUE(p.handshake().ok());
  }
  const auto [quiet_bytes, quiet_keyed] = flight();
  ASSERT_FALSE(quiet_keyed);
  // ECDSA signatures differ by a few bytes; a missing CA would be hundreds.
  EXPECT_LT(quiet_bytes > keyed_bytes ? quiet_bytes - keyed_bytes : keyed_bytes - quiet_bytes, 16u);
}

}  // namespace
}  // namespace niox
