// OpenSSL's record buffers (about 16 KiB each way) as the engine uses them: a handshake takes
// each of its buffers once rather than once per record, and a connection that went idle after
// its handshake and an exchange holds none. Counted through OpenSSL's own allocation hooks,
// installed before any OpenSSL allocation of this process.
#include "ssl/ssl_test_pump.hpp"
#include "support/test_certificates.hpp"

#include <niox/ssl/ssl_context.hpp>
#include <niox/ssl/ssl_engine.hpp>

#include <gtest/gtest.h>

#include <openssl/crypto.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_set>

namespace niox {
namespace {

// A record buffer holds a maximal record's ciphertext: 16 KiB and its overhead, under 20 KiB.
// (OpenSSL's handshake message buffer grows to 21,848 bytes: not counted.)
constexpr std::size_t record_buffer_size = 16 * 1024, record_buffer_max = 20 * 1024;

struct BigBlocks {
  std::mutex mutex;
  std::unordered_set<void*> live;
  std::size_t taken = 0;
};
BigBlocks& big_blocks() {
  static auto* b = new BigBlocks;  // never destroyed: OpenSSL frees into it at exit
  return *b;
}

void note_taken(void* p, std::size_t n) {
  if (p == nullptr || n < record_buffer_size || n >= record_buffer_max) return;
  BigBlocks& b = big_blocks();
  std::lock_guard lock(b.mutex);
  b.live.insert(p);
  ++b.taken;
}
void note_freed(void* p) {
  if (p == nullptr) return;
  BigBlocks& b = big_blocks();
  std::lock_guard lock(b.mutex);
  b.live.erase(p);
}

void* hooked_malloc(std::size_t n, const char*, int) {
  void* p = std::malloc(n);
  note_taken(p, n);
  return p;
}
void* hooked_realloc(void* old, std::size_t n, const char*, int) {
  note_freed(old);
  void* p = std::realloc(old, n);
  note_taken(p, n);
  return p;
}
void hooked_free(void* p, const char*, int) {
  note_freed(p);
  std::free(p);
}

// Before main: OpenSSL accepts hooks only before its first allocation.
const bool hooks_installed = CRYPTO_set_mem_functions(hooked_malloc, hooked_realloc, hooked_free);

std::size_t taken() {
  std::lock_guard lock(big_blocks().mutex);
  return big_blocks().taken;
}
std::size_t live() {
  std::lock_guard lock(big_blocks().mutex);
  return big_blocks().live.size();
}

class RecordBuffersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(hooks_installed) << "OpenSSL allocated before the hooks could be installed";
  }
  test::TestCertificateAuthority ca;
  test::PemPair leaf = ca.issue();
  SslContext server =
      SslContextBuilder::for_server(Pem::memory(leaf.certificate), Pem::memory(leaf.private_key))
          .build();
  SslContext client =
      SslContextBuilder::for_client().trust_manager(Pem::memory(ca.certificate_pem())).build();

  test::EnginePair pair() {
    return test::EnginePair{
        client.new_engine("localhost", 443), server.new_engine(), {}, {}, {}, {}};
  }
  static void send(SslEngine& from, test::Wire& wire, SslEngine& to, std::string& received,
                   const std::string& data) {
    auto src = ByteBuffer::wrap(std::string_view(data));
    while (src.has_remaining()) {
      ASSERT_EQ(from.wrap(src, wire.out()).status, SslEngineStatus::ok);
      ASSERT_FALSE(wire.deliver(to, received));
    }
  }
};

// Released whenever they emptied, the buffers were taken once per record read and once per
// flight written: 33 for one TLS 1.3 handshake between two engines.
TEST_F(RecordBuffersTest, AHandshakeTakesEachRecordBufferOnce) {
  test::EnginePair p = pair();
  const std::size_t before = taken();
  ASSERT_TRUE(p.handshake().ok());
  // A read and a write buffer on each side for the handshake; after it, a write buffer on the
  // server for its session tickets and a read buffer on the client for each of them (two).
  EXPECT_LE(taken() - before, 10u);
}

TEST_F(RecordBuffersTest, AnIdleConnectionHoldsNoRecordBuffer) {
  const std::size_t before = live();
  {
    test::EnginePair p = pair();
    ASSERT_TRUE(p.handshake().ok());
    p.server_received.clear();
    send(p.client, p.to_server, p.server, p.server_received, "GET / HTTP/1.1\r\n\r\n");
    send(p.server, p.to_client, p.client, p.client_received, std::string(4096, 'x'));
    EXPECT_EQ(p.server_received, "GET / HTTP/1.1\r\n\r\n");
    // Both engines idle now: neither keeps a record buffer.
    EXPECT_EQ(live(), before);
  }
  EXPECT_EQ(live(), before);
}

}  // namespace
}  // namespace niox
