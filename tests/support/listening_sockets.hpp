// How many TCP sockets of this network namespace listen on a port, from the kernel's tables
// (/proc/net/tcp and tcp6): what tells a program test that a server opened one listener per
// loop. Other processes' listeners on the same port count too, so use a port the kernel chose.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace niox::test {

inline int listening_sockets_on(std::uint16_t port) {
  int n = 0;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the column names
    while (std::getline(in, line)) {
      // "  sl  local_address rem_address   st ...": local is ADDR:PORT in hex, st 0A is LISTEN.
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      auto colon = local.rfind(':');
      if (colon == std::string::npos || state != "0A") continue;
      if (std::stoul(local.substr(colon + 1), nullptr, 16) == port) ++n;
    }
  }
  return n;
}

}  // namespace niox::test
