#include "openssl_error.hpp"

#include <niox/ssl/ssl_error.hpp>

#include <openssl/err.h>
#include <openssl/x509.h>

#include <fmt/format.h>

namespace niox {
namespace {

// OpenSSL packs library << 23 | reason; every library number is > 0, so its errors never
// collide with SslErrc or the verify range below.
constexpr int openssl_packed_min = 1 << 23;

class SslCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "niox.ssl"; }
  std::string message(int ev) const override {
    if (ev >= openssl_packed_min) {
      const char* reason = ERR_reason_error_string(static_cast<unsigned long>(ev));
      if (reason != nullptr) {
        return reason;
      }
      return fmt::format("OpenSSL error (library {}, reason {})",
                         ERR_GET_LIB(static_cast<unsigned long>(ev)),
                         ERR_GET_REASON(static_cast<unsigned long>(ev)));
    }
    if (ev >= certificate_verify_failed_base) {
      return fmt::format("certificate verify failed: {}",
                         X509_verify_cert_error_string(ev - certificate_verify_failed_base));
    }
    switch (static_cast<SslErrc>(ev)) {
      case SslErrc::not_ssl_record: return "not an SSL/TLS record (plaintext or garbage)";
      case SslErrc::record_overflow: return "TLS record longer than the protocol allows";
      case SslErrc::truncated:
        return "connection closed before the peer's close_notify (possible truncation)";
      case SslErrc::renegotiation_refused: return "renegotiation refused";
      case SslErrc::engine_closed: return "SSL engine closed by an earlier error";
      case SslErrc::handshake_timeout: return "TLS handshake timed out";
      case SslErrc::bad_configuration: return "invalid SSL configuration";
      case SslErrc::alert_received: return "the peer sent a TLS alert";
      case SslErrc::kernel_tls_unsupported:
        return "a TLS message the kernel's records cannot follow (key update)";
      case SslErrc::handshake_canceled:
        return "TLS handshake canceled: the connection was closed before it finished";
    }
    return "unknown niox.ssl error";
  }
};

}  // namespace

const std::error_category& ssl_category() noexcept {
  static const SslCategory category;
  return category;
}

bool is_certificate_verify_error(const std::error_code& ec) noexcept {
  return ec.category() == ssl_category() && ec.value() >= certificate_verify_failed_base &&
         ec.value() < openssl_packed_min;
}

namespace detail {

std::error_code take_openssl_error(const SSL* ssl, std::error_code fallback) {
  const unsigned long first = ERR_get_error();
  ERR_clear_error();
  if (first == 0) {
    return fallback;
  }
  if (ERR_SYSTEM_ERROR(first)) {
    return {static_cast<int>(ERR_GET_REASON(first)), std::system_category()};
  }
  if (ssl != nullptr && ERR_GET_LIB(first) == ERR_LIB_SSL &&
      ERR_GET_REASON(first) == SSL_R_CERTIFICATE_VERIFY_FAILED) {
    const long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) {
      return {certificate_verify_failed_base + static_cast<int>(verify), ssl_category()};
    }
  }
  const unsigned long packed = ERR_PACK(ERR_GET_LIB(first), 0, ERR_GET_REASON(first));
  return {static_cast<int>(packed), ssl_category()};
}

}  // namespace detail
}  // namespace niox
