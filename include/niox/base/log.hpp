// The log sink: where niox's own diagnostics go (the loop falling back to epoll, a handler
// that threw, an exception that reached the tail of a pipeline). niox writes nothing to
// stderr itself: every line goes through the sink, which writes "niox: <message>" to stderr
// until the embedding application installs its own.
//
//   niox::set_log_sink([](niox::LogLevel level, std::string_view message) {
//     my_logger.log(to_my_level(level), message);
//   });
//
// The sink is called on whichever thread logs (loop threads mostly), possibly from several at
// once; it must be thread-safe and must not block for long. The message carries no trailing
// newline and no "niox:" prefix.
#pragma once

#include <functional>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace niox {

enum class LogLevel { debug, info, warn, error };
std::string_view to_string(LogLevel level) noexcept;

using LogSink = std::function<void(LogLevel level, std::string_view message)>;

// The default sink writes "niox: <line>" to stderr; debug lines only when NIOX_LOG=debug.
// Installs `sink` (thread-safe; an empty function restores the stderr sink) and returns the
// previous one. Lines logged while it is being replaced go to one of the two.
LogSink set_log_sink(LogSink sink);

// Hands one line to the sink. Never throws: a sink that throws is ignored for that line.
void log(LogLevel level, std::string_view message) noexcept;

template <class... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) noexcept {
  try {
    log(level, std::string_view(fmt::format(format, std::forward<Args>(args)...)));
  } catch (...) {
    // Out of memory while formatting a diagnostic: drop the line.
  }
}

}  // namespace niox
