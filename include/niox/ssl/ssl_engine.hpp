// niox::SslEngine — javax.net.ssl.SSLEngine for C++: TLS as a transformation between
// application bytes and network bytes, with no socket in sight. The pipeline's SslHandler and
// the coroutine TLS stream both drive one of these; so can any caller with its own I/O.
//
//   application data --wrap()-->  network data (records to send)
//   application data <--unwrap()-- network data (bytes received)
//
// The contract is Java's:
//   - wrap() produces at most one record (or pending handshake/alert bytes) and unwrap()
//     consumes at most one record. bytes_consumed/bytes_produced in the result are exactly how
//     far the source and destination positions moved; nothing else in them is touched.
//   - BUFFER_UNDERFLOW: src does not yet hold a whole record; nothing was consumed. Read more
//     network bytes after the remaining ones and call again.
//   - BUFFER_OVERFLOW: dst has too little room for what the next step produces; nothing was
//     consumed or produced. Make room (application_buffer_size() or packet_buffer_size()
//     bytes always suffice) and call again.
//   - CLOSED: this direction is done (close_notify sent, or received).
//   - The handshake status says what the engine needs next: NEED_WRAP (it has bytes to
//     send), NEED_UNWRAP (it waits for the peer), FINISHED (reported once, by the call that
//     completed the handshake), NOT_HANDSHAKING. NEED_TASK never occurs: OpenSSL does its
//     work inside wrap/unwrap.
//   - Closing: close_outbound() queues close_notify (NEED_WRAP until it is wrapped, then
//     is_outbound_done()). Receiving the peer's close_notify makes unwrap return CLOSED,
//     is_inbound_done() true and queues ours. close_inbound() before the peer's close_notify
//     arrived is the truncation Java warns of: it throws SslErrc::truncated (and still marks
//     the inbound done), so a cut connection never passes for a clean end of stream.
//   - Closing during the handshake (OpenSSL's SSL_shutdown refuses to): while none of our
//     records is encrypted yet, close_outbound() queues a user_canceled and a close_notify
//     alert, as plaintext records, and abandons the handshake (unwrap returns CLOSED from then
//     on; close_inbound() reports no truncation). Once ours are encrypted (a TLS 1.3 server's
//     flight, a TLS 1.2 client's Finished) an alert needs keys only OpenSSL holds: the
//     handshake goes on through the peer's last flight (NEED_UNWRAP) and close_notify is
//     queued when it ends. A peer's close_notify during the handshake fails it with
//     SslErrc::handshake_canceled.
//   - A fatal error (bad record, failed verification, refused renegotiation) throws a
//     std::system_error in the niox.ssl category; the engine then holds the alert for the
//     peer: wrap() until it returns CLOSED sends it. Later calls fail with
//     SslErrc::engine_closed. The std::error_code& overloads report the same without throwing.
//
// Records.  Once a TLS 1.3 handshake is done (AES-GCM or ChaCha20-Poly1305) and a full record
// is wrapped, or 64 KiB in smaller ones, wrap() seals application data itself, with OpenSSL's
// AEAD and the connection's traffic keys, from the sources straight into dst; SSL_write would
// copy every byte twice more (into its record buffer, and from there into dst). The engine has
// those keys when its context gave them (most of the time: a context whose recent connections
// did not seal starts new engines without them, to spare their handshakes the cost; see
// docs/ssl.md). OpenSSL still decides the other records of that side (alerts, close_notify,
// the KeyUpdate a peer asks for, which the engine queues as NEED_WRAP); the engine seals those
// too, so that one sequence number counts every record. TLS 1.2, TLS_AES_128_CCM_SHA256 and a peer's max_fragment_length stay with SSL_write.
// Unwrap is OpenSSL's throughout.
//
// Ownership.  The engine is move-only and owns its OpenSSL connection and its BIOs. It
// holds its SslContext alive. Buffers passed to wrap/unwrap are used only during the call.
// Threads: one thread at a time, like Java's.
#pragma once

#include <niox/buffer/byte_buffer.hpp>
#include <niox/ssl/ssl_context.hpp>
#include <niox/ssl/ssl_error.hpp>
#include <niox/ssl/traffic_keys.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

namespace niox {

namespace detail {
struct SslEngineAccess;
}

enum class SslEngineStatus { ok, buffer_underflow, buffer_overflow, closed };
enum class HandshakeStatus { not_handshaking, finished, need_wrap, need_unwrap, need_task };

std::string_view to_string(SslEngineStatus status) noexcept;
std::string_view to_string(HandshakeStatus status) noexcept;

// Java's SSLEngineResult.
struct SslEngineResult {
  SslEngineStatus status = SslEngineStatus::ok;
  HandshakeStatus handshake_status = HandshakeStatus::not_handshaking;
  std::size_t bytes_consumed = 0;
  std::size_t bytes_produced = 0;

  bool operator==(const SslEngineResult&) const = default;
};

class SslEngine {
 public:
  SslEngine(SslEngine&&) noexcept;
  SslEngine& operator=(SslEngine&&) noexcept;
  ~SslEngine();

  bool is_client_mode() const noexcept;

  // Starts the handshake explicitly; the first wrap/unwrap starts it too.
  void begin_handshake();
  HandshakeStatus handshake_status() const noexcept;

  // Encrypts from srcs (in order, at most one record's worth) into dst.
  SslEngineResult wrap(std::span<ByteBuffer> srcs, ByteBuffer& dst);
  SslEngineResult wrap(std::span<ByteBuffer> srcs, ByteBuffer& dst, std::error_code& ec);
  SslEngineResult wrap(ByteBuffer& src, ByteBuffer& dst);
  SslEngineResult wrap(ByteBuffer& src, ByteBuffer& dst, std::error_code& ec);

  // Decrypts at most one record from src into dsts (filled in order).
  SslEngineResult unwrap(ByteBuffer& src, std::span<ByteBuffer> dsts);
  SslEngineResult unwrap(ByteBuffer& src, std::span<ByteBuffer> dsts, std::error_code& ec);
  SslEngineResult unwrap(ByteBuffer& src, ByteBuffer& dst);
  SslEngineResult unwrap(ByteBuffer& src, ByteBuffer& dst, std::error_code& ec);

  void close_outbound() noexcept;
  bool is_outbound_done() const noexcept;
  void close_inbound();
  void close_inbound(std::error_code& ec) noexcept;
  bool is_inbound_done() const noexcept;

  // Room that always suffices: for one record's network bytes, and for its plaintext.
  static constexpr std::size_t packet_buffer_size() noexcept { return 16709; }
  static constexpr std::size_t application_buffer_size() noexcept { return 16384; }

  // The negotiated session (empty before the handshake finished): "TLSv1.3", the IANA-less
  // OpenSSL cipher name ("TLS_AES_256_GCM_SHA384"), the ALPN protocol ("" when none), the
  // peer certificate's subject in RFC 2253 form ("" when the peer sent none).
  std::string protocol() const;
  std::string cipher_suite() const;
  std::string application_protocol() const;
  std::string peer_subject() const;
  // The SNI name a client sent (server side) or sends (client side); "" when none.
  std::string server_name() const;
  // Whether the handshake resumed an earlier session instead of a full exchange.
  bool is_session_reused() const noexcept;

  // kTLS (traffic_keys.hpp): a driver that owns the socket may hand a direction's records to
  // the kernel once this says "" for it. Otherwise it says why not, and the records stay here:
  // the handshake has not finished; TLS 1.2 was negotiated (only TLS 1.3 keys are exported);
  // the cipher has no kernel counterpart (TLS_AES_128_CCM_SHA256); a key update changed the
  // keys; the direction is closed or the engine failed; outbound, records the engine made
  // still wait to be wrapped out; inbound, received bytes wait inside the engine. The engine
  // cannot see the driver's own buffers: ciphertext the driver read but has not unwrapped
  // yet must be unwrapped before the inbound side is handed over.
  std::string_view traffic_keys_refusal(TrafficDirection direction) const noexcept;
  // The direction's cipher, key, IV and next record sequence number, or nothing when
  // traffic_keys_refusal(direction) is not "". After handing them to the kernel the driver must
  // not wrap (outbound) or unwrap (inbound) records of that direction again: the engine's
  // sequence numbers no longer match. Its handshake status and session queries still work.
  std::optional<TrafficKeys> export_traffic_keys(TrafficDirection direction) const;

  class Impl;

 private:
  friend class SslContext;
  friend struct detail::SslEngineAccess;
  explicit SslEngine(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

}  // namespace niox

template <>
struct fmt::formatter<niox::SslEngineResult> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(const niox::SslEngineResult& r, Ctx& ctx) const {
    return fmt::format_to(ctx.out(), "SslEngineResult[{} {} consumed={} produced={}]",
                          niox::to_string(r.status), niox::to_string(r.handshake_status),
                          r.bytes_consumed, r.bytes_produced);
  }
};
