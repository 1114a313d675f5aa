#include <niox/base/log.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>

namespace niox {

namespace {

void stderr_sink(LogLevel level, std::string_view message) {
  // Debug lines only on request: programs' standard error stays quiet by default.
  static const bool debug = [] {
    const char* env = std::getenv("NIOX_LOG");
    return env != nullptr && std::string_view(env) == "debug";
  }();
  if (level == LogLevel::debug && !debug) return;
  // One fwrite per line, so that lines from several threads do not interleave.
  std::string line;
  line.reserve(message.size() + 7);
  line.append("niox: ").append(message).push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stderr);
}

// A shared_ptr swapped under a mutex: a line being logged keeps the sink it started with
// alive while another thread replaces it.
std::mutex sink_mutex;
std::shared_ptr<const LogSink>& current_sink() {
  static auto* sink =
      new std::shared_ptr<const LogSink>(std::make_shared<const LogSink>(stderr_sink));
  return *sink;
}

}  // namespace

std::string_view to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warn";
    case LogLevel::error: return "error";
  }
  return "unknown";
}

LogSink set_log_sink(LogSink sink) {
  auto next = std::make_shared<const LogSink>(sink ? std::move(sink) : LogSink(stderr_sink));
  std::lock_guard lock(sink_mutex);
  auto previous = std::move(current_sink());
  current_sink() = std::move(next);
  return *previous;
}

void log(LogLevel level, std::string_view message) noexcept {
  std::shared_ptr<const LogSink> sink;
  {
    std::lock_guard lock(sink_mutex);
    sink = current_sink();
  }
  try {
    (*sink)(level, message);
  } catch (...) {
    // A sink that fails must not take the loop down with it.
  }
}

}  // namespace niox
