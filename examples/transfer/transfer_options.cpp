#include "transfer_options.hpp"

#include "command_line.hpp"

namespace niox::transfer {

using examples::parse_number;

std::optional<HostPort> parse_host_port(std::string_view text, std::string& error) {
  HostPort hp;
  std::string_view port_text;
  if (text.starts_with('[')) {
    auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      error = "expected [IPv6]:PORT in '" + std::string(text) + "'";
      return std::nullopt;
    }
    hp.host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      error = "expected HOST:PORT in '" + std::string(text) + "'";
      return std::nullopt;
    }
    if (text.find(':') != colon) {
      error = "put an IPv6 address in brackets: [" + std::string(text.substr(0, colon)) +
              "]:" + std::string(text.substr(colon + 1));
      return std::nullopt;
    }
    hp.host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  if (hp.host.empty()) {
    error = "empty host in '" + std::string(text) + "'";
    return std::nullopt;
  }
  if (!parse_number<std::uint16_t>(port_text, 1, 65535, hp.port)) {
    error = "invalid port '" + std::string(port_text) + "' (expected 1-65535)";
    return std::nullopt;
  }
  return hp;
}

std::string transfer_usage() {
  return "usage: niox-transfer recv --port P --out PATH [--bind ADDR] [--max-size BYTES]\n"
         "                          [--header-timeout S] [--idle-timeout S]\n"
         "       niox-transfer send FILE --to HOST:PORT\n"
         "Sends one file over TCP, zero-copy at both ends, verified end to end (XXH3-64).\n"
         "\n"
         "  recv               wait for one file, store it at PATH (or PATH/<name> if PATH is\n"
         "                     a directory); a broken or corrupt transfer leaves nothing behind\n"
         "  send FILE          send FILE to a waiting receiver\n"
         "  --port P           port to listen on (recv)\n"
         "  --bind ADDR        address to listen on (recv, default: 0.0.0.0)\n"
         "  --out PATH         where to store the file (recv); its directory must exist\n"
         "  --max-size BYTES   largest file accepted (recv, default: 1 TiB); a file larger\n"
         "                     than the free disk space is refused too\n"
         "  --header-timeout S give up on a sender whose header is not complete S seconds\n"
         "                     after it connected (recv; decimals allowed, 0 never; default: 30)\n"
         "  --idle-timeout S   give up on a sender that sends nothing for S seconds once its\n"
         "                     header is in (recv; decimals allowed, 0 never; default: 60)\n"
         "  --to HOST:PORT     receiver to send to (send); IPv6 as [addr]:port\n"
         "  --backend B        auto, io_uring or epoll (default: auto)\n"
         "  --help             show this text\n"
         "\n"
         "A progress bar with rate and ETA is shown when stderr is a terminal. When the receiver\n"
         "refuses or fails, both ends print its reason.\n"
         "Exit status: 0 on a verified transfer, 1 on a failed one, 2 on a usage error (or a\n"
         "missing --out directory); recv also: 3 no header in time, 4 the sender went silent,\n"
         "5 no room for the file on the receiver's disk.\n";
}

std::optional<TransferOptions> parse_transfer_args(std::span<const std::string_view> args,
                                                   std::string& error) {
  error.clear();
  TransferOptions o;
  bool have_port = false;
  examples::OptionReader reader(args);
  for (bool first = true; reader.next(); first = false) {
    std::string_view arg = reader.arg();
    if (reader.is_help()) {
      o.help = true;
      return o;
    }
    if (first) {
      if (arg == "send") {
        o.mode = TransferOptions::Mode::send;
      } else if (arg == "recv") {
        o.mode = TransferOptions::Mode::recv;
      } else {
        error = "expected 'send' or 'recv', got '" + std::string(arg) + "' (see --help)";
        return std::nullopt;
      }
      continue;
    }
    if (!reader.is_option()) {
      if (o.mode == TransferOptions::Mode::send && o.file.empty()) {
        o.file = arg;
        continue;
      }
      error = "unexpected argument '" + std::string(arg) + "'";
      return std::nullopt;
    }
    const std::string_view name = reader.name();
    const bool send = o.mode == TransferOptions::Mode::send;
    const bool known =
        name == "--backend" ||
        (send ? name == "--to"
              : (name == "--port" || name == "--bind" || name == "--out" || name == "--max-size" ||
                 name == "--header-timeout" || name == "--idle-timeout"));
    if (!known) {
      error = "unknown option '" + std::string(name) + "' for " + (send ? "send" : "recv");
      return std::nullopt;
    }
    auto value = reader.value(error);
    if (!value) {
      return std::nullopt;
    }
    if (name == "--to") {
      auto hp = parse_host_port(*value, error);
      if (!hp) return std::nullopt;
      o.to = *hp;
    } else if (name == "--port") {
      if (!parse_number<std::uint16_t>(*value, 0, 65535, o.port)) {
        error = examples::invalid_value(name, *value, "expected 0-65535");
        return std::nullopt;
      }
      have_port = true;
    } else if (name == "--bind") {
      o.bind = *value;
    } else if (name == "--out") {
      o.out = *value;
    } else if (name == "--max-size") {
      if (!parse_number<std::uint64_t>(*value, 0, std::uint64_t{1} << 62, o.max_size)) {
        error = examples::invalid_value(name, *value, "expected a number of bytes");
        return std::nullopt;
      }
    } else if (name == "--header-timeout" || name == "--idle-timeout") {
      double& seconds =
          name == "--header-timeout" ? o.header_timeout_seconds : o.idle_timeout_seconds;
      if (!parse_number<double>(*value, 0.0, 86400.0, seconds)) {
        error = examples::invalid_value(name, *value, "expected seconds, 0-86400");
        return std::nullopt;
      }
    } else if (name == "--backend") {
      if (!examples::parse_backend(*value)) {
        error = examples::invalid_value(name, *value, "expected auto, io_uring or epoll");
        return std::nullopt;
      }
      o.backend = *value;
    }
  }
  switch (o.mode) {
    case TransferOptions::Mode::none:
      error = "expected 'send' or 'recv' (see --help)";
      return std::nullopt;
    case TransferOptions::Mode::send:
      if (o.file.empty())
        error = "send needs a FILE";
      else if (o.to.host.empty())
        error = "send needs --to HOST:PORT";
      break;
    case TransferOptions::Mode::recv:
      if (!have_port)
        error = "recv needs --port P";
      else if (o.out.empty())
        error = "recv needs --out PATH";
      break;
  }
  if (!error.empty()) {
    return std::nullopt;
  }
  return o;
}

}  // namespace niox::transfer
