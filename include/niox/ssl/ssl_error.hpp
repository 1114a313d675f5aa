// Error codes of the ssl layer ("niox.ssl" category), carried by the std::system_error that
// SslContextBuilder and SslEngine throw and by their std::error_code& overloads.
//
// One category holds three kinds of value, so that an error_code alone says what went wrong:
//   - niox's own conditions (SslErrc below, small values): what OpenSSL has no reason for, or
//     what a caller must tell apart (a truncated stream is not a clean end of stream);
//   - a certificate that failed verification: certificate_verify_failed_base + the X.509
//     verify result, so "expired" and "hostname mismatch" are different codes with
//     OpenSSL's own text;
//   - any other OpenSSL error: its packed library/reason code, whose message is OpenSSL's
//     reason text ("wrong version number", "no shared cipher", ...).
#pragma once

#include <string>
#include <system_error>

namespace niox {

enum class SslErrc {
  not_ssl_record = 1,      // bytes that cannot start a TLS record (plaintext HTTP, garbage)
  record_overflow,         // a record header announcing more than TLS allows (2^14 + 2048)
  truncated,               // the inbound side ended without the peer's close_notify
  renegotiation_refused,   // the peer asked to renegotiate: niox never does
  engine_closed,           // wrap or unwrap on an engine already closed by an earlier error
  handshake_timeout,       // the handshake did not complete within the configured time
  bad_configuration,       // a builder setting OpenSSL would not take (unreadable PEM, ...)
  alert_received,          // kTLS: the peer sent an alert other than close_notify
  kernel_tls_unsupported,  // kTLS: a post-handshake message the kernel's records cannot follow
  handshake_canceled,      // the connection was closed during the handshake (ours, or the
                           // peer's close_notify)
};

// certificate_verify_failed_base + X509_V_ERR_*: the peer's certificate was not accepted.
inline constexpr int certificate_verify_failed_base = 1000;

const std::error_category& ssl_category() noexcept;

inline std::error_code make_error_code(SslErrc e) noexcept {
  return {static_cast<int>(e), ssl_category()};
}

// Whether `ec` says the peer's certificate failed verification (any reason).
bool is_certificate_verify_error(const std::error_code& ec) noexcept;

}  // namespace niox

template <>
struct std::is_error_code_enum<niox::SslErrc> : std::true_type {};
