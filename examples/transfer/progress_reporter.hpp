// ProgressReporter — a one-line progress bar with rate and ETA, drawn only on a terminal.
//
//   [##############---------------]  47%  120.0 MiB / 256.0 MiB  310.2 MiB/s  ETA 0:00:01
//
// When the descriptor is not a terminal (a pipe, a file, a CI log) the reporter writes nothing
// at all, so scripts see only what the program means to say. Redraws are throttled (10 per
// second) and use '\r', so the cost per update() is a clock read and a compare.
//
// format_progress() is the pure formatting, for tests and for callers with their own output.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace niox::transfer {

// "512 B", "1.5 KiB", "120.0 MiB", "3.25 GiB": binary units, 1-2 decimals above bytes.
std::string format_bytes(std::uint64_t bytes);
// "0:00:07", "1:02:03"; "--:--:--" for a negative or non-finite duration (unknown ETA).
std::string format_duration(double seconds);

// One progress line (without '\r' or '\n') at most `width` columns wide: the bar shrinks to fit
// and disappears below a minimum. The rate is the average since the start (done / elapsed); the
// ETA is the time the remaining bytes take at that rate. total == 0 means an empty transfer
// (100%). Before any time has elapsed the rate and ETA are shown as unknown.
std::string format_progress(std::uint64_t done, std::uint64_t total, double elapsed_seconds,
                            std::size_t width = 80);

class ProgressReporter {
 public:
  using Clock = std::chrono::steady_clock;

  // Draws on `fd` only if isatty(fd); `total` is the number of bytes expected.
  explicit ProgressReporter(std::uint64_t total, int fd = 2,
                            Clock::time_point start = Clock::now());
  // Draws on `fd` when `enabled`, whatever `fd` is (tests).
  ProgressReporter(std::uint64_t total, int fd, bool enabled, Clock::time_point start);

  // Records that `done` bytes are through; redraws if 100 ms passed since the last redraw.
  void update(std::uint64_t done, Clock::time_point now = Clock::now());
  // Draws the final state and ends the line. Idempotent.
  void finish(Clock::time_point now = Clock::now());
  // Clears the line without a final state (on failure, before printing the error).
  void abandon();

  bool enabled() const noexcept { return enabled_; }

 private:
  void draw(Clock::time_point now);

  std::uint64_t total_;
  std::uint64_t done_ = 0;
  int fd_;
  bool enabled_;
  bool finished_ = false;
  bool drawn_ = false;
  Clock::time_point start_;
  Clock::time_point last_draw_{};
  std::size_t width_ = 80;
};

}  // namespace niox::transfer
