#include "file_server_options.hpp"

#include <charconv>

namespace niox::http {
namespace {

template <class T>
bool parse_number(std::string_view text, T min, T max, T& out) {
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || !(v >= min && v <= max)) {
    return false;
  }
  out = v;
  return true;
}

}  // namespace

std::string file_server_usage() {
  return "usage: niox-file-server [options]\n"
         "Serves the files under a directory over HTTP/1.1 (GET and HEAD).\n"
         "\n"
         "  --root DIR              directory to serve (default: the built-in site)\n"
         "  --port P                TCP port, 0 for any free port (default: 8080)\n"
         "  --bind ADDR             address to listen on (default: 0.0.0.0)\n"
         "  --threads N             event loops, 0 for one per CPU (default: 0)\n"
         "  --backend B             auto, io_uring or epoll (default: auto)\n"
         "  --max-header-bytes N    largest request head accepted (default: 8192)\n"
         "  --idle-timeout S        close a connection idle for S seconds, or whose request\n"
         "                          head is not complete S seconds after it began; decimals\n"
         "                          allowed, 0 never (default: 60)\n"
         "  --help                  show this text\n";
}

std::optional<FileServerOptions> parse_file_server_args(std::span<const std::string_view> args,
                                                        std::string& error) {
  error.clear();
  FileServerOptions o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      continue;
    }
    std::string_view name = arg;
    std::optional<std::string_view> value;
    if (auto eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    const bool known = name == "--root" || name == "--port" || name == "--bind" ||
                       name == "--threads" || name == "--backend" || name == "--max-header-bytes" ||
                       name == "--idle-timeout";
    if (!known) {
      error = "unknown argument '" + std::string(arg) + "' (see --help)";
      return std::nullopt;
    }
    if (!value) {
      if (i + 1 == args.size()) {
        error = std::string(name) + " needs a value";
        return std::nullopt;
      }
      value = args[++i];
    }
    auto bad = [&](std::string_view what) {
      error = "invalid " + std::string(name) + " '" + std::string(*value) + "': " + std::string(what);
      return std::nullopt;
    };
    if (name == "--root") {
      if (value->empty()) return bad("empty path");
      o.root = *value;
    } else if (name == "--bind") {
      if (value->empty()) return bad("empty address");
      o.bind = *value;
    } else if (name == "--port") {
      if (!parse_number<std::uint16_t>(*value, 0, 65535, o.port)) return bad("expected 0-65535");
    } else if (name == "--threads") {
      if (!parse_number<unsigned>(*value, 0, 1024, o.threads)) return bad("expected 0-1024");
    } else if (name == "--backend") {
      if (*value != "auto" && *value != "io_uring" && *value != "epoll") {
        return bad("expected auto, io_uring or epoll");
      }
      o.backend = *value;
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
