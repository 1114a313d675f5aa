#include "command_line.hpp"

namespace niox::examples {

std::optional<BackendKind> parse_backend(std::string_view text) noexcept {
  if (text == "auto") return BackendKind::automatic;
  if (text == "io_uring") return BackendKind::io_uring;
  if (text == "epoll") return BackendKind::epoll;
  return std::nullopt;
}

std::string invalid_value(std::string_view name, std::string_view value, std::string_view what) {
  return "invalid " + std::string(name) + " '" + std::string(value) + "': " + std::string(what);
}

bool OptionReader::next() noexcept {
  if (next_ >= args_.size()) {
    return false;
  }
  arg_ = args_[next_++];
  name_ = arg_;
  inline_value_.reset();
  if (auto eq = arg_.find('='); arg_.starts_with("--") && eq != std::string_view::npos) {
    name_ = arg_.substr(0, eq);
    inline_value_ = arg_.substr(eq + 1);
  }
  return true;
}

std::optional<std::string_view> OptionReader::value(std::string& error) {
  if (inline_value_) {
    return inline_value_;
  }
  if (next_ >= args_.size()) {
    error = std::string(name_) + " needs a value";
    return std::nullopt;
  }
  return args_[next_++];
}

std::string OptionReader::unknown() const {
  return "unknown argument '" + std::string(arg_) + "' (see --help)";
}

}  // namespace niox::examples
