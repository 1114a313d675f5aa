// The record protection of one direction of a TLS 1.3 connection, as the kernel's TLS ULP
// (kTLS) takes it: cipher, key, static IV and the sequence number of the next record.
//
// An SslEngine exports these after its handshake (SslEngine::export_traffic_keys) so that a
// driver owning the socket can hand the records to the kernel (setsockopt SOL_TLS TLS_TX /
// TLS_RX). From then on the engine must no longer make (outbound) or read (inbound) records
// of that direction: their sequence numbers now advance in the kernel.
//
// Ownership: a plain value holding secret material; its destructor wipes the key and IV.
// Copies are deliberate (a caller that needs two must ask for them).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace niox {

// The TLS 1.3 cipher suites the kernel can take over (the others stay in user space).
enum class TrafficCipher {
  aes_128_gcm,        // TLS_AES_128_GCM_SHA256
  aes_256_gcm,        // TLS_AES_256_GCM_SHA384
  chacha20_poly1305,  // TLS_CHACHA20_POLY1305_SHA256
};

// outbound: the records this side sends (the kernel's TLS_TX); inbound: those it receives
// (TLS_RX).
enum class TrafficDirection { outbound, inbound };

std::string_view to_string(TrafficCipher cipher) noexcept;
std::string_view to_string(TrafficDirection direction) noexcept;

struct TrafficKeys {
  TrafficCipher cipher = TrafficCipher::aes_128_gcm;
  std::array<std::uint8_t, 32> key_bytes{};
  std::size_t key_size = 0;  // 16 (AES-128) or 32
  // The 12-byte static IV of RFC 8446 5.3. The kernel's GCM structures split it into a 4-byte
  // salt and an 8-byte iv; ChaCha20-Poly1305 takes all 12 as its iv.
  std::array<std::uint8_t, 12> iv{};
  // The sequence number of the next record in this direction: records already made or read
  // under these keys (a server's session tickets, data) count.
  std::uint64_t sequence = 0;

  std::span<const std::uint8_t> key() const noexcept { return {key_bytes.data(), key_size}; }
  // rec_seq as the kernel wants it: big-endian.
  std::array<std::uint8_t, 8> sequence_bytes() const noexcept {
    std::array<std::uint8_t, 8> out{};
    for (std::size_t i = 0; i < 8; ++i) {
      out[i] = static_cast<std::uint8_t>(sequence >> (56 - 8 * i));
    }
    return out;
  }

  TrafficKeys() = default;
  TrafficKeys(const TrafficKeys&) = default;
  TrafficKeys& operator=(const TrafficKeys&) = default;
  ~TrafficKeys();
};

}  // namespace niox
