// Command line of niox-transfer, parsed without side effects.
//
//   niox-transfer recv --port P --out PATH [--bind ADDR] [--max-size BYTES]
//                      [--header-timeout S] [--idle-timeout S] [--backend B]
//   niox-transfer send FILE --to HOST:PORT [--backend B]
//
// HOST is a name, an IPv4 literal or a bracketed IPv6 literal ("[::1]:9000").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace niox::transfer {

struct HostPort {
  std::string host;  // without brackets
  std::uint16_t port = 0;
};

// "host:port", "1.2.3.4:80", "[::1]:9000". Port 1-65535. An unbracketed IPv6 literal is refused
// (its last colon is ambiguous). On error returns nullopt and sets `error`.
std::optional<HostPort> parse_host_port(std::string_view text, std::string& error);

struct TransferOptions {
  enum class Mode : std::uint8_t { none, send, recv };
  Mode mode = Mode::none;
  // send
  std::string file;
  HostPort to;
  // recv
  std::string bind = "0.0.0.0";
  std::uint16_t port = 0;
  std::string out;
  std::uint64_t max_size = std::uint64_t{1} << 40;
  // Seconds (0: never) from the connection to a complete header, and without any byte arriving
  // once the header is in (body and trailer).
  double header_timeout_seconds = 30;
  double idle_timeout_seconds = 60;
  // both
  std::string backend = "auto";
  bool help = false;
};

std::optional<TransferOptions> parse_transfer_args(std::span<const std::string_view> args,
                                                   std::string& error);

std::string transfer_usage();

}  // namespace niox::transfer
