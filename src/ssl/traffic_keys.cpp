#include <niox/ssl/traffic_keys.hpp>

#include <openssl/crypto.h>

namespace niox {

std::string_view to_string(TrafficCipher cipher) noexcept {
  switch (cipher) {
    case TrafficCipher::aes_128_gcm: return "AES-128-GCM";
    case TrafficCipher::aes_256_gcm: return "AES-256-GCM";
    case TrafficCipher::chacha20_poly1305: return "CHACHA20-POLY1305";
  }
  return "?";
}

std::string_view to_string(TrafficDirection direction) noexcept {
  return direction == TrafficDirection::outbound ? "outbound" : "inbound";
}

TrafficKeys::~TrafficKeys() {
  OPENSSL_cleanse(key_bytes.data(), key_bytes.size());
  OPENSSL_cleanse(iv.data(), iv.size());
}

}  // namespace niox
