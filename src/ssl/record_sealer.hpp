// Private: the TLS 1.3 record protection of one outbound direction (RFC 8446 5.2-5.3), done
// here instead of inside OpenSSL once the handshake is over.
//
// Why: OpenSSL's SSL_write copies the plaintext into its own record buffer, encrypts it there
// and hands the record to the write BIO, which copies it again into the caller's buffer. The
// sealer encrypts from the caller's buffers straight into the destination: one pass over the
// bytes instead of three, and no record buffer inside OpenSSL. The cipher work is OpenSSL's
// (EVP AEAD), exactly the calls its own TLS 1.3 record layer makes.
//
//   record = 0x17 0x03 0x03 len(2) | AEAD(key, iv ^ seq, aad = header,
//                                         plaintext | inner content type) | tag(16)
//
// The one rule that matters: a (key, sequence) pair is used for exactly one record. The engine
// starts a sealer with the sequence number of the next record OpenSSL would have made (it
// counts them), and from then on OpenSSL's own records for that direction are discarded and
// their messages sealed here instead (SslEngine::Impl::on_message), so the sequence lives in
// one place. A KeyUpdate sealed here moves to the next traffic secret (RFC 8446 7.2).
#pragma once

#include <niox/buffer/byte_buffer.hpp>
#include <niox/ssl/traffic_keys.hpp>

#include <openssl/evp.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

namespace niox::detail {

// HKDF-Expand-Label(secret, label, "", length) of RFC 8446 7.1.
bool hkdf_expand_label(const EVP_MD* md, std::span<const unsigned char> secret,
                       std::string_view label, unsigned char* out, std::size_t length);

// The key and IV a traffic secret gives (RFC 8446 7.3), with `sequence` as the next record's.
std::optional<TrafficKeys> derive_traffic_keys(const EVP_MD* md, TrafficCipher cipher,
                                               std::span<const unsigned char> secret,
                                               std::uint64_t sequence);

class RecordSealer {
 public:
  // Bytes a record adds to its plaintext: header, inner content type, tag.
  static constexpr std::size_t overhead = 5 + 1 + 16;

  // Null when OpenSSL cannot set the cipher up (no memory, a provider without it).
  static std::unique_ptr<RecordSealer> make(const EVP_MD* md, TrafficCipher cipher,
                                            std::span<const unsigned char> secret,
                                            std::uint64_t sequence);
  ~RecordSealer();
  RecordSealer(const RecordSealer&) = delete;
  RecordSealer& operator=(const RecordSealer&) = delete;

  // Seals the next `n` bytes of srcs (in order; n <= 16384, and at most what they hold) as one
  // record of inner content type `type` at dst's position, and advances srcs by n and dst by
  // n + overhead, which the caller has checked fit. False when the cipher failed or the
  // sequence numbers ran out; nothing is advanced then.
  bool seal(std::uint8_t type, std::span<ByteBuffer> srcs, std::size_t n, ByteBuffer& dst);
  // After a KeyUpdate was sealed: the next secret, its key and IV, sequence 0.
  bool update_keys();

  // What a driver needs to go on where this left off (kTLS).
  std::optional<TrafficKeys> keys() const;

 private:
  RecordSealer() = default;
  bool begin(std::size_t n, std::byte* header);
  bool finish(std::uint8_t type, std::byte* tail);
  bool load(std::span<const unsigned char> secret);

  const EVP_MD* md_ = nullptr;
  TrafficCipher cipher_ = TrafficCipher::aes_128_gcm;
  EVP_CIPHER_CTX* ctx_ = nullptr;
  std::array<unsigned char, EVP_MAX_MD_SIZE> secret_{};
  std::size_t secret_size_ = 0;
  std::array<unsigned char, 12> iv_{};
  std::uint64_t sequence_ = 0;
};

}  // namespace niox::detail
