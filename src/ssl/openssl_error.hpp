// Turning OpenSSL's thread-local error queue into one std::error_code of the niox.ssl category.
#pragma once

#include <niox/ssl/ssl_error.hpp>

#include <openssl/ssl.h>

#include <system_error>

namespace niox::detail {

// The first queued error (the cause; later entries are its consequences), or, when the
// handshake failed on the peer's certificate, that certificate's verify result. Empties the
// queue. `fallback` when the queue was empty.
std::error_code take_openssl_error(const SSL* ssl, std::error_code fallback);

}  // namespace niox::detail
