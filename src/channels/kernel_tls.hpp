// Private: the descriptor side of kTLS, shared by the transport's SslHandler and the coroutine
// AsynchronousTlsChannel. The keys come from SslEngine::export_traffic_keys (ssl/); everything
// here is socket calls on a connected TCP descriptor.
//
// Errors come back as the errno's std::error_code; the callers fall back to user-space
// records on any of them (log_kernel_tls_fallback says so once per process at warn level, at
// debug level afterwards, so that a kernel refusing every connection does not flood the log).
#pragma once

#include <niox/buffer/byte_buffer.hpp>
#include <niox/ssl/traffic_keys.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

namespace niox::detail {

// TLS record content types (RFC 8446 5.1) as the kernel reports them for TLS_GET_RECORD_TYPE.
inline constexpr std::uint8_t tls_alert_record = 21;
inline constexpr std::uint8_t tls_handshake_record = 22;
inline constexpr std::uint8_t tls_application_data_record = 23;

// setsockopt(SOL_TCP, TCP_ULP, "tls") when the socket does not carry it yet, then SOL_TLS
// TLS_TX or TLS_RX with `keys`. On failure the socket still works as plain TCP in the
// direction that failed (a ULP without keys changes nothing), so the caller keeps
// user-space records there.
std::error_code install_kernel_tls(int fd, TrafficDirection direction,
                                   const TrafficKeys& keys) noexcept;

// Sends one record of `type` (an alert, say close_notify {1, 0}) through a TLS_TX socket:
// sendmsg with a TLS_SET_RECORD_TYPE control message. Blocks only as a send on a
// non-blocking socket does: EAGAIN comes back as an error.
std::error_code send_kernel_tls_record(int fd, std::uint8_t type,
                                       std::span<const std::byte> payload) noexcept;

// One recvmsg (MSG_DONTWAIT) on a TLS_RX socket into `room`. The kernel never mixes records of
// two types in one call, and names the type in a TLS_GET_RECORD_TYPE control message:
// `type` gets it (application data when the kernel sent none). Returns the bytes received,
// 0 at the end of the stream, or -1 with `ec` (EAGAIN when nothing is ready).
long receive_kernel_tls_record(int fd, std::span<std::byte> room, std::uint8_t& type,
                               std::error_code& ec) noexcept;

// Whether a handshake record the kernel decrypted holds only session tickets, which need no
// answer (anything else, a KeyUpdate above all, would need the engine's keys).
bool only_session_tickets(std::span<const std::byte> record) noexcept;

// Logs that a connection keeps user-space records and why.
void log_kernel_tls_fallback(std::string_view why) noexcept;

// Gives one direction's keys from `engine` (an SslEngine; a template so that this piece of
// channels/ does not depend on the engine's library) to the kernel. False, logged, when the
// engine or the kernel refuses: that direction keeps user-space records.
template <class Engine>
bool hand_over_traffic_keys(const Engine& engine, int fd, TrafficDirection direction) {
  if (const std::string_view why = engine.traffic_keys_refusal(direction); !why.empty()) {
    log_kernel_tls_fallback(why);
    return false;
  }
  const auto keys = engine.export_traffic_keys(direction);
  if (!keys) {
    log_kernel_tls_fallback("the traffic keys could not be derived");
    return false;
  }
  if (const std::error_code ec = install_kernel_tls(fd, direction, *keys)) {
    log_kernel_tls_fallback(
        std::string(direction == TrafficDirection::outbound ? "TLS_TX: " : "TLS_RX: ") +
        ec.message());
    return false;
  }
  return true;
}

}  // namespace niox::detail
