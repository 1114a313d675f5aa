// niox-echo-server's parts: the command line and the server.
#pragma once

#include <niox/loop/event_loop.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace niox::echo {

struct EchoServerOptions {
  std::uint16_t port = 7007;
  // An IPv4 or IPv6 literal, or a path (starting with '/' or "unix:") for a Unix-domain socket.
  std::string bind = "0.0.0.0";
  std::size_t threads = 0;  // 0: one per CPU
  BackendKind backend = BackendKind::automatic;
};

struct ParseResult {
  std::optional<EchoServerOptions> options;  // set when the server should run
  bool help = false;                         // --help: print usage(), exit 0
  std::string error;                         // a usage error: print it and usage(), exit 2
};

ParseResult parse_args(const std::vector<std::string>& args);
std::string usage();

}  // namespace niox::echo
