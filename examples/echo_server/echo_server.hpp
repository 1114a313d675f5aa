// niox-echo-server's parts: the command line and the server.
#pragma once

#include "server_program.hpp"

#include <niox/loop/event_loop.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace niox::echo {

struct EchoServerOptions : examples::ServerOptions {
  // --bind may also be a path (starting with '/' or "unix:") for a Unix-domain socket.
  EchoServerOptions() { port = 7007; }
};

struct ParseResult {
  std::optional<EchoServerOptions> options;  // set when the server should run
  bool help = false;                         // --help: print usage(), exit 0
  std::string error;                         // a usage error: print it and usage(), exit 2
};

ParseResult parse_args(const std::vector<std::string>& args);
std::string usage();

}  // namespace niox::echo
