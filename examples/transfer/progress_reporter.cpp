#include "progress_reporter.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

namespace niox::transfer {
namespace {

void write_all(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return;  // progress is best effort: never fail a transfer because stderr went away
    }
    s.remove_prefix(static_cast<std::size_t>(n));
  }
}

std::size_t terminal_width(int fd) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    return ws.ws_col;
  }
  return 80;
}

}  // namespace

std::string format_bytes(std::uint64_t bytes) {
  if (bytes < 1024) {
    return fmt::format("{} B", bytes);
  }
  constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes) / 1024.0;
  std::size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(units)) {
    v /= 1024.0;
    ++u;
  }
  // Two decimals below 10 keep three significant digits where one would jump in big steps.
  return v < 10.0 ? fmt::format("{:.2f} {}", v, units[u]) : fmt::format("{:.1f} {}", v, units[u]);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0 || seconds > 359999999.0) {
    return "--:--:--";
  }
  auto s = static_cast<std::uint64_t>(std::llround(seconds));
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

std::string format_progress(std::uint64_t done, std::uint64_t total, double elapsed_seconds,
                            std::size_t width) {
  done = std::min(done, total);
  const double fraction = total == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(total);
  const int percent = static_cast<int>(std::floor(fraction * 100.0));
  std::string rate = "--- B/s";
  std::string eta = format_duration(-1);
  if (elapsed_seconds > 0 && std::isfinite(elapsed_seconds)) {
    const double bytes_per_second = static_cast<double>(done) / elapsed_seconds;
    rate = format_bytes(static_cast<std::uint64_t>(bytes_per_second)) + "/s";
    if (done == total) {
      eta = format_duration(0);
    } else if (bytes_per_second > 0) {
      eta = format_duration(static_cast<double>(total - done) / bytes_per_second);
    }
  }
  std::string text = fmt::format("{:3}%  {} / {}  {}  ETA {}", percent, format_bytes(done),
                                 format_bytes(total), rate, eta);
  // "[" bar "]  " in front of the text, if at least 10 bar cells fit.
  constexpr std::size_t min_bar = 10;
  if (width >= text.size() + 4 + min_bar) {
    const std::size_t cells = width - text.size() - 4;
    const auto filled = static_cast<std::size_t>(fraction * static_cast<double>(cells));
    // Built front to back in one buffer; prepending to `text` ("[" + ... + text) would move
    // it, which is what GCC 12's -Wrestrict misreads as an overlapping copy at -O3.
    std::string line;
    line.reserve(width);
    line.append("[").append(filled, '#').append(cells - filled, '-').append("]  ").append(text);
    text = std::move(line);
  }
  if (text.size() > width) {
    text.resize(width);
  }
  return text;
}

ProgressReporter::ProgressReporter(std::uint64_t total, int fd, Clock::time_point start)
    : ProgressReporter(total, fd, ::isatty(fd) == 1, start) {}

ProgressReporter::ProgressReporter(std::uint64_t total, int fd, bool enabled,
                                   Clock::time_point start)
    : total_(total), fd_(fd), enabled_(enabled), start_(start) {
  if (enabled_) {
    // One column less than the terminal: writing the last column makes some terminals wrap.
    width_ = std::max<std::size_t>(terminal_width(fd_), 2) - 1;
  }
}

void ProgressReporter::update(std::uint64_t done, Clock::time_point now) {
  done_ = done;
  if (!enabled_ || finished_) {
    return;
  }
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) {
    return;
  }
  draw(now);
}

void ProgressReporter::finish(Clock::time_point now) {
  if (!enabled_ || finished_) {
    finished_ = true;
    return;
  }
  draw(now);
  write_all(fd_, "\n");
  finished_ = true;
}

void ProgressReporter::abandon() {
  if (enabled_ && drawn_ && !finished_) {
    write_all(fd_, "\r\x1b[2K");  // carriage return, erase the line
  }
  finished_ = true;
}

void ProgressReporter::draw(Clock::time_point now) {
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  // "\x1b[K" erases what a longer previous line left on the right.
  const std::string progress = format_progress(done_, total_, elapsed, width_);
  std::string line;
  line.reserve(progress.size() + 4);
  line.append("\r").append(progress).append("\x1b[K");
  write_all(fd_, line);
  drawn_ = true;
  last_draw_ = now;
}

}  // namespace niox::transfer
