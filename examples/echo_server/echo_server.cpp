#include "echo_server.hpp"

#include <charconv>

namespace niox::echo {

namespace {

template <class T>
bool parse_number(const std::string& s, T& out, T min, T max) {
  unsigned long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < min || v > max) {
    return false;
  }
  out = static_cast<T>(v);
  return true;
}

}  // namespace

std::string usage() {
  return "usage: niox-echo-server [--port P] [--bind ADDR] [--threads N] "
         "[--backend auto|io_uring|epoll]\n"
         "\n"
         "Echoes every byte it receives, through a niox transport pipeline.\n"
         "\n"
         "  --port P       TCP port (default 7007; 0 picks a free one)\n"
         "  --bind ADDR    IPv4/IPv6 address, or a Unix-domain socket path (/path or unix:path)\n"
         "                 (default 0.0.0.0)\n"
         "  --threads N    worker event loops (default: one per CPU)\n"
         "  --backend B    auto, io_uring or epoll (default auto)\n"
         "  --help         this text\n"
         "\n"
         "Prints 'listening on ADDRESS' once bound; stops on SIGINT or SIGTERM.\n"
         "Exit status: 0 after a signal, 1 when the server cannot start, 2 on a usage error.\n";
}

ParseResult parse_args(const std::vector<std::string>& args) {
  ParseResult r;
  EchoServerOptions o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    std::string value;
    bool has_value = false;
    if (auto eq = name.find('='); name.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (name == "--help" || name == "-h") {
      r.help = true;
      return r;
    }
    bool known = name == "--port" || name == "--bind" || name == "--threads" || name == "--backend";
    if (!known) {
      r.error = "unknown option '" + args[i] + "'";
      return r;
    }
    if (!has_value) {
      if (i + 1 >= args.size()) {
        r.error = name + " needs a value";
        return r;
      }
      value = args[++i];
    }
    if (name == "--port") {
      if (!parse_number<std::uint16_t>(value, o.port, 0, 65535)) {
        r.error = "--port wants a number from 0 to 65535, not '" + value + "'";
        return r;
      }
    } else if (name == "--bind") {
      if (value.empty()) {
        r.error = "--bind wants an address";
        return r;
      }
      o.bind = value;
    } else if (name == "--threads") {
      if (!parse_number<std::size_t>(value, o.threads, 1, 1024)) {
        r.error = "--threads wants a number from 1 to 1024, not '" + value + "'";
        return r;
      }
    } else {
      if (value == "auto") {
        o.backend = BackendKind::automatic;
      } else if (value == "io_uring") {
        o.backend = BackendKind::io_uring;
      } else if (value == "epoll") {
        o.backend = BackendKind::epoll;
      } else {
        r.error = "--backend wants auto, io_uring or epoll, not '" + value + "'";
        return r;
      }
    }
  }
  r.options = o;
  return r;
}

}  // namespace niox::echo
