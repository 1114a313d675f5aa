// The material SslEngine exports for kTLS, checked without the kernel: a record sealed in user
// space (EVP AEAD) with the exported outbound keys must unwrap in the peer's engine, and a
// record the peer's engine wrapped must open with the exported inbound keys, for each cipher
// the kernel takes and with records (session tickets, data) already sent under the keys. This
// is what proves the hand-over to TLS_TX / TLS_RX right on a kernel without the tls ULP.
#include "ssl/ssl_engine_impl.hpp"
#include "ssl/ssl_test_pump.hpp"
#include "support/test_certificates.hpp"

#include <niox/ssl/record_path.hpp>
#include <niox/ssl/ssl_context.hpp>
#include <niox/ssl/ssl_engine.hpp>
#include <niox/ssl/traffic_keys.hpp>

#include <gtest/gtest.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>

#include <optional>
#include <string>
#include <vector>

namespace niox {
namespace {

using test::EnginePair;
using test::TestCertificateAuthority;

constexpr std::size_t tag_size = 16;

const EVP_CIPHER* evp_cipher(TrafficCipher c) {
  switch (c) {
    case TrafficCipher::aes_128_gcm: return EVP_aes_128_gcm();
    case TrafficCipher::aes_256_gcm: return EVP_aes_256_gcm();
    case TrafficCipher::chacha20_poly1305: return EVP_chacha20_poly1305();
  }
  return nullptr;
}

// RFC 8446 5.3: the static IV with the sequence number xored into its last 8 bytes.
std::array<unsigned char, 12> nonce(const TrafficKeys& k, std::uint64_t seq) {
  std::array<unsigned char, 12> n;
  std::copy(k.iv.begin(), k.iv.end(), n.begin());
  for (std::size_t i = 0; i < 8; ++i) {
    n[4 + i] ^= static_cast<unsigned char>(seq >> (56 - 8 * i));
  }
  return n;
}

// A TLS 1.3 application_data record holding `text`, as the kernel's TLS_TX would make it.
std::vector<std::byte> seal(const TrafficKeys& k, std::uint64_t seq, std::string_view text,
                            std::uint8_t inner_type = 23) {
  std::vector<unsigned char> inner(text.begin(), text.end());
  inner.push_back(inner_type);
  const std::size_t length = inner.size() + tag_size;
  std::vector<unsigned char> record = {23, 3, 3, static_cast<unsigned char>(length >> 8),
                                       static_cast<unsigned char>(length & 0xff)};
  record.resize(5 + length);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  const auto iv = nonce(k, seq);
  int n = 0;
  EXPECT_EQ(EVP_EncryptInit_ex(ctx, evp_cipher(k.cipher), nullptr, k.key_bytes.data(), iv.data()),
            1);
  EXPECT_EQ(EVP_EncryptUpdate(ctx, nullptr, &n, record.data(), 5), 1);
  EXPECT_EQ(
      EVP_EncryptUpdate(ctx, record.data() + 5, &n, inner.data(), static_cast<int>(inner.size())),
      1);
  EXPECT_EQ(EVP_EncryptFinal_ex(ctx, record.data() + 5 + n, &n), 1);
  EXPECT_EQ(
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, tag_size, record.data() + 5 + inner.size()),
      1);
  EVP_CIPHER_CTX_free(ctx);
  std::vector<std::byte> out(record.size());
  std::memcpy(out.data(), record.data(), record.size());
  return out;
}

// Opens one record as the kernel's TLS_RX would: the plaintext and its inner content type, or
// nothing when authentication fails.
std::optional<std::pair<std::string, std::uint8_t>> open(const TrafficKeys& k, std::uint64_t seq,
                                                         std::span<const std::byte> record) {
  if (record.size() < 5 + tag_size) return std::nullopt;
  const auto* bytes = reinterpret_cast<const unsigned char*>(record.data());
  const std::size_t length = static_cast<std::size_t>(bytes[3]) << 8 | bytes[4];
  if (record.size() != 5 + length) return std::nullopt;
  std::vector<unsigned char> plain(length - tag_size + 16);
  std::vector<unsigned char> tag(bytes + 5 + length - tag_size, bytes + 5 + length);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  const auto iv = nonce(k, seq);
  int n = 0;
  int total = 0;
  bool ok =
      EVP_DecryptInit_ex(ctx, evp_cipher(k.cipher), nullptr, k.key_bytes.data(), iv.data()) == 1 &&
      EVP_DecryptUpdate(ctx, nullptr, &n, bytes, 5) == 1 &&
      EVP_DecryptUpdate(ctx, plain.data(), &n, bytes + 5, static_cast<int>(length - tag_size)) == 1;
  total = n;
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, tag_size, tag.data()) == 1 &&
       EVP_DecryptFinal_ex(ctx, plain.data() + total, &n) == 1;
  EVP_CIPHER_CTX_free(ctx);
  if (!ok) return std::nullopt;
  total += n;
  while (total > 0 && plain[static_cast<std::size_t>(total) - 1] == 0) --total;  // padding
  if (total == 0) return std::nullopt;
  const std::uint8_t type = plain[static_cast<std::size_t>(total) - 1];
  return std::pair{std::string(plain.begin(), plain.begin() + total - 1), type};
}

// The bytes of the next record the engine wraps from `text`.
std::vector<std::byte> wrap_one(SslEngine& engine, std::string_view text) {
  ByteBuffer src = ByteBuffer::wrap(text);
  ByteBuffer dst = ByteBuffer::allocate(SslEngine::packet_buffer_size());
  SslEngineResult r = engine.wrap(src, dst);
  EXPECT_EQ(r.bytes_consumed, text.size());
  dst.flip();
  auto bytes = dst.bytes();
  return {bytes.begin(), bytes.end()};
}

// Feeds `record` to the engine's unwrap; the plaintext it gave.
std::string unwrap_one(SslEngine& engine, std::span<const std::byte> record) {
  ByteBuffer src = ByteBuffer::allocate(record.size());
  src.put(record).flip();
  ByteBuffer dst = ByteBuffer::allocate(SslEngine::application_buffer_size());
  std::error_code ec;
  SslEngineResult r = engine.unwrap(src, dst, ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(r.bytes_consumed, record.size());
  dst.flip();
  return std::string(dst.string_view());
}

void expect_same(const TrafficKeys& a, const TrafficKeys& b) {
  EXPECT_EQ(a.cipher, b.cipher);
  EXPECT_EQ(a.key_size, b.key_size);
  EXPECT_TRUE(std::equal(a.key().begin(), a.key().end(), b.key().begin(), b.key().end()));
  EXPECT_EQ(a.iv, b.iv);
  EXPECT_EQ(a.sequence, b.sequence);
}

class TrafficKeysTest : public ::testing::Test {
 protected:
  TestCertificateAuthority ca;
  test::PemPair leaf = ca.issue();

  SslContextBuilder server_builder() const {
    return SslContextBuilder::for_server(Pem::memory(leaf.certificate),
                                         Pem::memory(leaf.private_key))
        .export_traffic_keys(true);  // also where this kernel has no kTLS
  }
  SslContextBuilder client_builder() const {
    return SslContextBuilder::for_client()
        .trust_manager(Pem::memory(ca.certificate_pem()))
        .export_traffic_keys(true);
  }
  static EnginePair pair(const SslContext& client, const SslContext& server) {
    return EnginePair{client.new_engine("localhost", 443), server.new_engine(), {}, {}, {}, {}};
  }
};

struct CipherCase {
  const char* suite;
  TrafficCipher cipher;
  std::size_t key_size;
};

class TrafficKeysCipherTest : public TrafficKeysTest,
                              public ::testing::WithParamInterface<CipherCase> {};

TEST_P(TrafficKeysCipherTest, ExportedKeysMakeAndReadThePeersRecords) {
  const CipherCase c = GetParam();
  auto server = server_builder().build();
  auto client = client_builder().build();
  EnginePair p = pair(client, server);
  // The client offers only this suite, so the server must pick it.
  ASSERT_EQ(SSL_set_ciphersuites(detail::SslEngineAccess::ssl(p.client), c.suite), 1);
  ASSERT_TRUE(p.handshake().ok());
  ASSERT_EQ(p.client.cipher_suite(), c.suite);
  // Data one way after the tickets the other way: both sequences past zero.
  p.server_received.clear();
  for (const char* text : {"one", "two", "three"}) {
    auto record = wrap_one(p.client, text);
    EXPECT_EQ(unwrap_one(p.server, record), text);
  }
  for (auto* engine : {&p.client, &p.server}) {
    for (auto d : {TrafficDirection::outbound, TrafficDirection::inbound}) {
      EXPECT_EQ(engine->traffic_keys_refusal(d), "") << to_string(d);
    }
  }
  auto client_tx = p.client.export_traffic_keys(TrafficDirection::outbound);
  auto client_rx = p.client.export_traffic_keys(TrafficDirection::inbound);
  auto server_tx = p.server.export_traffic_keys(TrafficDirection::outbound);
  auto server_rx = p.server.export_traffic_keys(TrafficDirection::inbound);
  ASSERT_TRUE(client_tx && client_rx && server_tx && server_rx);
  EXPECT_EQ(client_tx->cipher, c.cipher);
  EXPECT_EQ(client_tx->key_size, c.key_size);
  EXPECT_EQ(client_tx->sequence, 3u);
  // OpenSSL's server sends two session tickets after the handshake.
  EXPECT_EQ(server_tx->sequence, 2u);
  expect_same(*client_tx, *server_rx);
  expect_same(*server_tx, *client_rx);
  EXPECT_NE(client_tx->iv, server_tx->iv);

  // What the client's kernel would send, the server's engine reads; two records in a row.
  for (std::uint64_t i = 0; i < 2; ++i) {
    const std::string text = "kernel record " + std::to_string(i);
    EXPECT_EQ(unwrap_one(p.server, seal(*client_tx, client_tx->sequence + i, text)), text);
  }
  // What the server's kernel would send, the client's engine reads.
  EXPECT_EQ(unwrap_one(p.client, seal(*server_tx, server_tx->sequence, "to the client")),
            "to the client");

  // What the engines wrap, the peer's kernel would read (each at its own next sequence).
  auto from_server = wrap_one(p.server, "from the server's engine");
  auto opened = open(*client_rx, client_rx->sequence, from_server);
  ASSERT_TRUE(opened);
  EXPECT_EQ(opened->first, "from the server's engine");
  EXPECT_EQ(opened->second, 23);
  auto from_client = wrap_one(p.client, "from the client's engine");
  opened = open(*server_rx, server_rx->sequence, from_client);
  ASSERT_TRUE(opened);
  EXPECT_EQ(opened->first, "from the client's engine");
  // A wrong sequence number does not open: the count is what makes it work.
  EXPECT_FALSE(open(*server_rx, server_rx->sequence + 1, from_client));
}

INSTANTIATE_TEST_SUITE_P(
    Ciphers, TrafficKeysCipherTest,
    ::testing::Values(CipherCase{"TLS_AES_128_GCM_SHA256", TrafficCipher::aes_128_gcm, 16},
                      CipherCase{"TLS_AES_256_GCM_SHA384", TrafficCipher::aes_256_gcm, 32},
                      CipherCase{"TLS_CHACHA20_POLY1305_SHA256", TrafficCipher::chacha20_poly1305,
                                 32}),
    [](const auto& info) {
      return std::string(info.param.cipher == TrafficCipher::aes_128_gcm   ? "Aes128Gcm"
                         : info.param.cipher == TrafficCipher::aes_256_gcm ? "Aes256Gcm"
                                                                           : "Chacha20Poly1305");
    });

TEST_F(TrafficKeysTest, WithoutTicketsTheServersSequenceStartsAtZero) {
  auto server = server_builder().session_timeout(std::chrono::seconds(0)).build();
  auto client = client_builder().build();
  EnginePair p = pair(client, server);
  ASSERT_TRUE(p.handshake().ok());
  auto server_tx = p.server.export_traffic_keys(TrafficDirection::outbound);
  auto client_rx = p.client.export_traffic_keys(TrafficDirection::inbound);
  ASSERT_TRUE(server_tx && client_rx);
  EXPECT_EQ(server_tx->sequence, 0u);
  expect_same(*server_tx, *client_rx);
  EXPECT_EQ(unwrap_one(p.client, seal(*server_tx, 0, "first")), "first");
}

// Export off: nothing is recorded, and the refusal names the setting. By default it is on
// only where this kernel offers kTLS.
TEST_F(TrafficKeysTest, AContextThatDoesNotExportSaysSoAndTheDefaultFollowsTheKernel) {
  auto off_server = server_builder().export_traffic_keys(false).build();
  auto off_client = client_builder().export_traffic_keys(false).build();
  EnginePair off = pair(off_client, off_server);
  ASSERT_TRUE(off.handshake().ok());
  for (SslEngine* e : {&off.client, &off.server}) {
    EXPECT_NE(e->traffic_keys_refusal(TrafficDirection::outbound).find("does not export"),
              std::string_view::npos)
        << e->traffic_keys_refusal(TrafficDirection::outbound);
    EXPECT_FALSE(e->export_traffic_keys(TrafficDirection::inbound));
  }
  auto server =
      SslContextBuilder::for_server(Pem::memory(leaf.certificate), Pem::memory(leaf.private_key))
          .build();
  auto client =
      SslContextBuilder::for_client().trust_manager(Pem::memory(ca.certificate_pem())).build();
  EnginePair p = pair(client, server);
  ASSERT_TRUE(p.handshake().ok());
  EXPECT_EQ(p.server.export_traffic_keys(TrafficDirection::outbound).has_value(),
            kernel_tls_available())
      << p.server.traffic_keys_refusal(TrafficDirection::outbound);
}

TEST_F(TrafficKeysTest, BeforeTheHandshakeNothingIsExported) {
  auto client = client_builder().build();
  SslEngine engine = client.new_engine("localhost", 443);
  EXPECT_EQ(engine.traffic_keys_refusal(TrafficDirection::outbound),
            "the handshake has not finished");
  EXPECT_FALSE(engine.export_traffic_keys(TrafficDirection::inbound));
}

TEST_F(TrafficKeysTest, Tls12KeepsUserSpaceRecordsAndSaysSo) {
  auto server = server_builder().protocols({SslProtocol::tls1_2}).build();
  auto client = client_builder().build();
  EnginePair p = pair(client, server);
  ASSERT_TRUE(p.handshake().ok());
  ASSERT_EQ(p.client.protocol(), "TLSv1.2");
  for (auto* engine : {&p.client, &p.server}) {
    EXPECT_NE(engine->traffic_keys_refusal(TrafficDirection::outbound).find("TLS 1.2"),
              std::string_view::npos);
    EXPECT_FALSE(engine->export_traffic_keys(TrafficDirection::inbound));
  }
}

TEST_F(TrafficKeysTest, AKeyUpdateKeepsUserSpaceRecordsAndSaysSo) {
  auto server = server_builder().build();
  auto client = client_builder().build();
  EnginePair p = pair(client, server);
  ASSERT_TRUE(p.handshake().ok());
  ASSERT_EQ(SSL_key_update(detail::SslEngineAccess::ssl(p.client), SSL_KEY_UPDATE_NOT_REQUESTED),
            1);
  // The KeyUpdate leaves with the next record.
  auto record_with_update = ByteBuffer::allocate(2 * SslEngine::packet_buffer_size());
  ByteBuffer src = ByteBuffer::wrap(std::string_view("after the update"));
  p.client.wrap(src, record_with_update);
  record_with_update.flip();
  std::string got;
  ByteBuffer dst = ByteBuffer::allocate(SslEngine::application_buffer_size());
  while (record_with_update.has_remaining()) {
    SslEngineResult r = p.server.unwrap(record_with_update, dst);
    ASSERT_GT(r.bytes_consumed, 0u);
  }
  dst.flip();
  EXPECT_EQ(dst.string_view(), "after the update");
  EXPECT_NE(p.client.traffic_keys_refusal(TrafficDirection::outbound).find("key update"),
            std::string_view::npos);
  EXPECT_NE(p.server.traffic_keys_refusal(TrafficDirection::inbound).find("key update"),
            std::string_view::npos);
  // The other direction did not change.
  EXPECT_EQ(p.client.traffic_keys_refusal(TrafficDirection::inbound), "");
  EXPECT_EQ(p.server.traffic_keys_refusal(TrafficDirection::outbound), "");
}

TEST_F(TrafficKeysTest, AfterCloseNotifyTheOutboundSideIsNotExported) {
  auto server = server_builder().build();
  auto client = client_builder().build();
  EnginePair p = pair(client, server);
  ASSERT_TRUE(p.handshake().ok());
  p.client.close_outbound();
  EXPECT_NE(p.client.traffic_keys_refusal(TrafficDirection::outbound), "");
  EXPECT_FALSE(p.client.export_traffic_keys(TrafficDirection::outbound));
}

TEST(TrafficKeysNames, Names) {
  EXPECT_EQ(to_string(TrafficCipher::chacha20_poly1305), "CHACHA20-POLY1305");
  EXPECT_EQ(to_string(TrafficDirection::inbound), "inbound");
  TrafficKeys k;
  k.sequence = 0x0102030405060708ull;
  EXPECT_EQ(k.sequence_bytes(), (std::array<std::uint8_t, 8>{1, 2, 3, 4, 5, 6, 7, 8}));
}

}  // namespace
}  // namespace niox
