// The command line of the Asio peers: [--port N] [--host ADDR], or the port alone; 127.0.0.1
// and port 7000 by default.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

struct AsioPeerAddress {
  std::string host = "127.0.0.1";
  unsigned short port = 7000;
};

// nullopt, with the usage printed on stderr, for anything else.
inline std::optional<AsioPeerAddress> parse_asio_peer_args(int argc, char** argv) {
  AsioPeerAddress a;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--port" && i + 1 < argc) {
      a.port = static_cast<unsigned short>(std::atoi(argv[++i]));
    } else if (arg == "--host" && i + 1 < argc) {
      a.host = argv[++i];
    } else if (!arg.empty() && arg[0] != '-') {
      a.port = static_cast<unsigned short>(std::atoi(argv[i]));
    } else {
      std::fprintf(stderr, "usage: %s [--port N] [--host ADDR]\n", argv[0]);
      return std::nullopt;
    }
  }
  return a;
}
