#include "file_server_options.hpp"

#include "command_line.hpp"

namespace niox::http {

using examples::parse_number;

std::string file_server_usage() {
  return "usage: niox-file-server [options]\n"
         "Serves the files under a directory over HTTP/1.1 (GET and HEAD).\n"
         "\n"
         "  --root DIR              directory to serve (default: the built-in site)\n" +
         examples::server_options_usage(FileServerOptions{}, 26, /*allow_unix=*/true) +
         "  --max-header-bytes N    largest request head accepted (default: 8192)\n"
         "  --idle-timeout S        close a connection idle for S seconds, or whose request\n"
         "                          head is not complete S seconds after it began; decimals\n"
         "                          allowed, 0 never (default: 60)\n"
         "  --help                  show this text\n"
         "\n"
         "Stops on SIGINT or SIGTERM. Exit status: 0 after a signal, 1 when the server cannot\n"
         "start, 2 on a usage error.\n";
}

std::optional<FileServerOptions> parse_file_server_args(std::span<const std::string_view> args,
                                                        std::string& error) {
  error.clear();
  FileServerOptions o;
  examples::OptionReader reader(args);
  while (reader.next()) {
    if (reader.is_help()) {
      o.help = true;
      continue;
    }
    if (examples::parse_server_flag(reader.arg(), o)) {
      continue;
    }
    const std::string_view name = reader.name();
    const bool known = examples::is_server_option(name) || name == "--root" ||
                       name == "--max-header-bytes" || name == "--idle-timeout";
    if (!known) {
      error = reader.unknown();
      return std::nullopt;
    }
    auto value = reader.value(error);
    if (!value) {
      return std::nullopt;
    }
    auto bad = [&](std::string_view what) {
      error = examples::invalid_value(name, *value, what);
      return std::nullopt;
    };
    if (examples::is_server_option(name)) {
      if (examples::parse_server_option(name, *value, o, error) != examples::OptionResult::ok) {
        return std::nullopt;
      }
    } else if (name == "--root") {
      if (value->empty()) return bad("empty path");
      o.root = *value;
    } else if (name == "--max-header-bytes") {
      if (!parse_number<std::size_t>(*value, 256, 1 << 20, o.max_header_bytes)) {
        return bad("expected 256-1048576");
      }
    } else if (name == "--idle-timeout") {
      if (!parse_number<double>(*value, 0.0, 86400.0, o.idle_timeout_seconds)) {
        return bad("expected seconds, 0-86400");
      }
    }
  }
  return o;
}

}  // namespace niox::http
