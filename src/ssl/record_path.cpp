#include <niox/base/log.hpp>
#include <niox/ssl/record_path.hpp>

#include <fstream>
#include <sstream>
#include <string>

namespace niox {

std::string_view to_string(RecordPath path) noexcept {
  return path == RecordPath::ktls ? "ktls" : "user_space";
}

bool ulp_list_offers_tls(std::string_view available_ulps) noexcept {
  std::size_t at = 0;
  while (at < available_ulps.size()) {
    const std::size_t end = available_ulps.find_first_of(" \t\n", at);
    const std::string_view name = available_ulps.substr(
        at, end == std::string_view::npos ? std::string_view::npos : end - at);
    if (name == "tls") return true;
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  return false;
}

bool kernel_tls_available() noexcept {
  static const bool available = [] {
    std::string ulps;
    try {
      std::ifstream in("/proc/sys/net/ipv4/tcp_available_ulp");
      std::stringstream text;
      text << in.rdbuf();
      ulps = text.str();
    } catch (...) {
    }
    const bool tls = ulp_list_offers_tls(ulps);
    log(LogLevel::debug, "TLS records: {}",
        tls ? "ktls where the session allows it (the kernel offers the tls ULP)"
            : "user_space (the kernel does not offer the tls ULP)");
    return tls;
  }();
  return available;
}

}  // namespace niox
