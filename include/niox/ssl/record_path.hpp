// Where a TLS connection's records are encrypted and decrypted: in user space by the
// SslEngine (OpenSSL over memory buffers), or by the kernel (kTLS: the socket carries the
// "tls" upper-layer protocol with the session keys, so write/sendfile send records and read
// returns plaintext).
//
// kTLS needs the kernel's "tls" ULP, listed in /proc/sys/net/ipv4/tcp_available_ulp, and a
// session whose keys the kernel can take (TLS 1.3 with AES-GCM or ChaCha20-Poly1305; see
// SslEngine::export_traffic_keys). Where either is missing, or the kernel refuses the keys,
// the connection uses user_space records; nothing else changes for the caller. The drivers
// (SslHandler, AsynchronousTlsChannel) report the path each connection took.
#pragma once

#include <string_view>

namespace niox {

enum class RecordPath { user_space, ktls };

std::string_view to_string(RecordPath path) noexcept;

// Whether `available_ulps` (the text of tcp_available_ulp: names separated by spaces) offers
// "tls".
bool ulp_list_offers_tls(std::string_view available_ulps) noexcept;

// Whether this kernel offers the "tls" ULP. Read once per process, and logged once at debug
// level with the path connections will take.
bool kernel_tls_available() noexcept;

}  // namespace niox
