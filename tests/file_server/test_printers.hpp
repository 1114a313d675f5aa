// GoogleTest printers for the file server's types, so failures read "404" rather than bytes.
#pragma once

#include "http_status.hpp"

#include <ostream>

namespace niox::http {
inline void PrintTo(HttpStatus s, std::ostream* os) { *os << code(s) << ' ' << reason_phrase(s); }
}  // namespace niox::http
