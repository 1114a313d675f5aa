// The example programs' command lines: options as "--name value" or "--name=value", parsed
// without side effects so that each program's main is "parse, print usage or error, run".
//
//   OptionReader r(args);
//   while (r.next()) {
//     if (r.is_help()) { ...; continue; }
//     auto value = r.value(error);            // after '=' or the next argument
//     if (!value) return std::nullopt;        // error: "--port needs a value"
//     if (r.name() == "--port" && !parse_number(*value, 0, 65535, port)) ...
//   }
//
// Error messages share one style: "invalid --port '70000': expected 0-65535",
// "--port needs a value", "unknown argument '--verbose' (see --help)".
#pragma once

#include <niox/loop/event_loop.hpp>

#include <charconv>
#include <cstddef>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

namespace niox::examples {

// The whole of `text` as a number in [min, max] (integers, or a decimal for floating types);
// false for anything else (empty, trailing bytes, out of range, NaN).
template <class T>
bool parse_number(std::string_view text, T min, T max, T& out) {
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() ||
      !(v >= min && v <= max)) {
    return false;
  }
  out = v;
  return true;
}

// "auto", "io_uring" or "epoll"; nullopt for anything else.
std::optional<BackendKind> parse_backend(std::string_view text) noexcept;

// "invalid NAME 'VALUE': WHAT"
std::string invalid_value(std::string_view name, std::string_view value, std::string_view what);

// main's answer to a parsed command line (`help`, `options` and `error`) that leaves nothing to
// run: the usage on stdout and 0 for --help, the error and the usage on stderr and 2 when
// there are no options. nullopt when the program is to run.
template <class Parsed>
std::optional<int> answer_help_or_error(const Parsed& parsed, std::string_view program,
                                        std::string_view usage) {
  if (parsed.help) {
    std::cout << usage;
    return 0;
  }
  if (!parsed.options) {
    std::cerr << program << ": " << parsed.error << "\n\n" << usage;
    return 2;
  }
  return std::nullopt;
}

class OptionReader {
 public:
  explicit OptionReader(std::span<const std::string_view> args) noexcept : args_(args) {}

  // Moves to the next argument; false when none is left.
  bool next() noexcept;
  // The whole argument, and its name: the part before '=' of "--name=value".
  std::string_view arg() const noexcept { return arg_; }
  std::string_view name() const noexcept { return name_; }
  bool is_help() const noexcept { return arg_ == "--help" || arg_ == "-h"; }
  bool is_option() const noexcept { return arg_.starts_with("--"); }
  // The option's value: what follows '=', else the next argument (consumed). nullopt with
  // `error` set ("--port needs a value") when there is none.
  std::optional<std::string_view> value(std::string& error);
  // "unknown argument '...' (see --help)"
  std::string unknown() const;

 private:
  std::span<const std::string_view> args_;
  std::size_t next_ = 0;
  std::string_view arg_;
  std::string_view name_;
  std::optional<std::string_view> inline_value_;
};

}  // namespace niox::examples
