#include "echo_server.hpp"

#include "command_line.hpp"

#include <string_view>

namespace niox::echo {

std::string usage() {
  return "usage: niox-echo-server [--port P] [--bind ADDR] [--threads N] "
         "[--backend auto|io_uring|epoll] [--reuseport]\n"
         "\n"
         "Echoes every byte it receives, through a niox transport pipeline.\n"
         "\n" +
         examples::server_options_usage(EchoServerOptions{}, 17, /*allow_unix=*/true) +
         "  --help         this text\n"
         "\n"
         "Prints 'listening on ADDRESS' once bound; stops on SIGINT or SIGTERM.\n"
         "Exit status: 0 after a signal, 1 when the server cannot start, 2 on a usage error.\n";
}

ParseResult parse_args(const std::vector<std::string>& args) {
  ParseResult r;
  EchoServerOptions o;
  std::vector<std::string_view> views(args.begin(), args.end());
  examples::OptionReader reader(views);
  while (reader.next()) {
    if (reader.is_help()) {
      r.help = true;
      return r;
    }
    if (examples::parse_server_flag(reader.arg(), o)) {
      continue;
    }
    if (!examples::is_server_option(reader.name())) {
      r.error = reader.unknown();
      return r;
    }
    auto value = reader.value(r.error);
    if (!value || examples::parse_server_option(reader.name(), *value, o, r.error) !=
                      examples::OptionResult::ok) {
      return r;
    }
  }
  r.options = o;
  return r;
}

}  // namespace niox::echo
