#include "ssl/record_sealer.hpp"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/kdf.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace niox::detail {
namespace {

constexpr std::size_t header_size = 5;
constexpr std::size_t tag_size = 16;
constexpr std::size_t max_plaintext = 16384;

// OpenSSL 3 looks an algorithm up in its providers (under a lock) on every implicit use; these
// are looked up once per process and kept (never freed: they live as long as the library).
const EVP_CIPHER* evp_cipher(TrafficCipher cipher) noexcept {
  static EVP_CIPHER* const aes_128_gcm = EVP_CIPHER_fetch(nullptr, "AES-128-GCM", nullptr);
  static EVP_CIPHER* const aes_256_gcm = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
  static EVP_CIPHER* const chacha20_poly1305 =
      EVP_CIPHER_fetch(nullptr, "ChaCha20-Poly1305", nullptr);
  switch (cipher) {
    case TrafficCipher::aes_128_gcm: return aes_128_gcm;
    case TrafficCipher::aes_256_gcm: return aes_256_gcm;
    case TrafficCipher::chacha20_poly1305: return chacha20_poly1305;
  }
  return nullptr;
}

EVP_KDF* hkdf() noexcept {
  static EVP_KDF* const kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  return kdf;
}

}  // namespace

bool hkdf_expand_label(const EVP_MD* md, std::span<const unsigned char> secret,
                       std::string_view label, unsigned char* out, std::size_t length) {
  // HkdfLabel: length(2), "tls13 " + label (one length byte), an empty context (one byte).
  constexpr std::string_view prefix = "tls13 ";
  std::array<unsigned char, 2 + 1 + 6 + 32 + 1> info{};
  if (label.size() > 32) return false;
  std::size_t at = 0;
  info[at++] = static_cast<unsigned char>(length >> 8);
  info[at++] = static_cast<unsigned char>(length & 0xff);
  info[at++] = static_cast<unsigned char>(prefix.size() + label.size());
  at = std::copy(prefix.begin(), prefix.end(), info.begin() + at) - info.begin();
  at = std::copy(label.begin(), label.end(), info.begin() + at) - info.begin();
  info[at++] = 0;
  EVP_KDF_CTX* kctx = hkdf() != nullptr ? EVP_KDF_CTX_new(hkdf()) : nullptr;
  if (kctx == nullptr) return false;
  int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
                                       const_cast<char*>(EVP_MD_get0_name(md)), 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY,
                                        const_cast<unsigned char*>(secret.data()), secret.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info.data(), at),
      OSSL_PARAM_construct_end()};
  const bool ok = EVP_KDF_derive(kctx, out, length, params) == 1;
  EVP_KDF_CTX_free(kctx);
  return ok;
}

std::optional<TrafficKeys> derive_traffic_keys(const EVP_MD* md, TrafficCipher cipher,
                                               std::span<const unsigned char> secret,
                                               std::uint64_t sequence) {
  TrafficKeys keys;
  keys.cipher = cipher;
  keys.key_size = cipher == TrafficCipher::aes_128_gcm ? 16 : 32;
  keys.sequence = sequence;
  if (md == nullptr ||
      !hkdf_expand_label(md, secret, "key", keys.key_bytes.data(), keys.key_size) ||
      !hkdf_expand_label(md, secret, "iv", keys.iv.data(), keys.iv.size())) {
    ERR_clear_error();
    return std::nullopt;
  }
  return keys;
}

std::unique_ptr<RecordSealer> RecordSealer::make(const EVP_MD* md, TrafficCipher cipher,
                                                 std::span<const unsigned char> secret,
                                                 std::uint64_t sequence) {
  std::unique_ptr<RecordSealer> s(new RecordSealer());
  s->md_ = md;
  s->cipher_ = cipher;
  s->ctx_ = EVP_CIPHER_CTX_new();
  if (md == nullptr || secret.size() > s->secret_.size() || s->ctx_ == nullptr ||
      evp_cipher(cipher) == nullptr ||
      EVP_EncryptInit_ex(s->ctx_, evp_cipher(cipher), nullptr, nullptr, nullptr) != 1 ||
      !s->load(secret)) {
    ERR_clear_error();
    return nullptr;
  }
  s->sequence_ = sequence;
  return s;
}

RecordSealer::~RecordSealer() {
  EVP_CIPHER_CTX_free(ctx_);  // cleanses the key schedule
  OPENSSL_cleanse(secret_.data(), secret_.size());
  OPENSSL_cleanse(iv_.data(), iv_.size());
}

bool RecordSealer::load(std::span<const unsigned char> secret) {
  const std::optional<TrafficKeys> keys = derive_traffic_keys(md_, cipher_, secret, 0);
  if (!keys || EVP_EncryptInit_ex(ctx_, nullptr, nullptr, keys->key_bytes.data(), nullptr) != 1) {
    ERR_clear_error();
    return false;
  }
  if (secret.data() != secret_.data()) {
    std::copy(secret.begin(), secret.end(), secret_.begin());
  }
  secret_size_ = secret.size();
  iv_ = keys->iv;
  sequence_ = 0;
  return true;
}

bool RecordSealer::update_keys() {
  std::array<unsigned char, EVP_MAX_MD_SIZE> next{};
  const std::span<const unsigned char> secret(secret_.data(), secret_size_);
  const bool ok = hkdf_expand_label(md_, secret, "traffic upd", next.data(), secret_size_) &&
                  load(std::span<const unsigned char>(next.data(), secret_size_));
  OPENSSL_cleanse(next.data(), next.size());
  if (!ok) ERR_clear_error();
  return ok;
}

std::optional<TrafficKeys> RecordSealer::keys() const {
  return derive_traffic_keys(md_, cipher_, {secret_.data(), secret_size_}, sequence_);
}

bool RecordSealer::begin(std::size_t n, std::byte* header) {
  // The last sequence number would wrap to a used nonce; RFC 8446 5.5 asks for a key update
  // long before (AES-GCM: 2^24.5 records), which a peer of ours would send.
  if (n > max_plaintext || sequence_ == std::numeric_limits<std::uint64_t>::max()) return false;
  const std::size_t length = n + 1 + tag_size;
  const std::uint8_t h[header_size] = {23, 3, 3, static_cast<std::uint8_t>(length >> 8),
                                       static_cast<std::uint8_t>(length & 0xff)};
  std::memcpy(header, h, header_size);
  std::array<unsigned char, 12> nonce = iv_;
  for (std::size_t i = 0; i < 8; ++i) {
    nonce[4 + i] ^= static_cast<unsigned char>(sequence_ >> (56 - 8 * i));
  }
  int outl = 0;
  return EVP_EncryptInit_ex(ctx_, nullptr, nullptr, nullptr, nonce.data()) == 1 &&
         EVP_EncryptUpdate(ctx_, nullptr, &outl, h, header_size) == 1;
}

bool RecordSealer::finish(std::uint8_t type, std::byte* tail) {
  auto* out = reinterpret_cast<unsigned char*>(tail);
  int outl = 0;
  int final_len = 0;
  if (EVP_EncryptUpdate(ctx_, out, &outl, &type, 1) != 1 ||
      EVP_EncryptFinal_ex(ctx_, out + outl, &final_len) != 1 || outl + final_len != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_AEAD_GET_TAG, tag_size, out + 1) != 1) {
    return false;
  }
  ++sequence_;
  return true;
}

bool RecordSealer::seal(std::uint8_t type, std::span<ByteBuffer> srcs, std::size_t n,
                        ByteBuffer& dst) {
  std::byte* const record = dst.writable_bytes().data();
  if (!begin(n, record)) {
    ERR_clear_error();
    return false;
  }
  // GCM and ChaCha20-Poly1305 are stream modes in EVP: each update writes as many bytes as it
  // reads, so the sources go in one after the other, however they are cut.
  std::byte* out = record + header_size;
  std::size_t left = n;
  for (const ByteBuffer& src : srcs) {
    if (left == 0) break;
    const std::size_t take = std::min(src.remaining(), left);
    if (take == 0) continue;
    int outl = 0;
    if (EVP_EncryptUpdate(ctx_, reinterpret_cast<unsigned char*>(out), &outl,
                          reinterpret_cast<const unsigned char*>(src.bytes().data()),
                          static_cast<int>(take)) != 1 ||
        static_cast<std::size_t>(outl) != take) {
      ERR_clear_error();
      return false;
    }
    out += take;
    left -= take;
  }
  if (left != 0 || !finish(type, out)) {
    ERR_clear_error();
    return false;
  }
  for (ByteBuffer& src : srcs) {
    const std::size_t take = std::min(src.remaining(), n);
    src.position(src.position() + take);
    n -= take;
    if (n == 0) break;
  }
  dst.position(dst.position() + static_cast<std::size_t>(out + 1 + tag_size - record));
  return true;
}

}  // namespace niox::detail
