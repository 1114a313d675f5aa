#include <niox/base/file_descriptor.hpp>

#include "progress_reporter.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <string>

namespace niox::transfer {
namespace {

constexpr std::uint64_t MiB = 1024 * 1024;

TEST(Progress, FormatBytes) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.00 KiB");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(120 * MiB), "120.0 MiB");
  EXPECT_EQ(format_bytes(3 * 1024 * MiB + 256 * MiB), "3.25 GiB");
}

TEST(Progress, FormatDuration) {
  EXPECT_EQ(format_duration(0), "0:00:00");
  EXPECT_EQ(format_duration(7.4), "0:00:07");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(-1), "--:--:--");
  EXPECT_EQ(format_duration(1.0 / 0.0), "--:--:--");
}

TEST(Progress, LineWithBarRateAndEta) {
  // 128 MiB of 256 MiB in 2 s: 64 MiB/s, 2 s to go.
  auto line = format_progress(128 * MiB, 256 * MiB, 2.0, 80);
  EXPECT_EQ(line.size(), 80u);
  EXPECT_EQ(line.substr(line.find(']')), "]   50%  128.0 MiB / 256.0 MiB  64.0 MiB/s  ETA 0:00:02");
  const auto bar = line.substr(1, line.find(']') - 1);
  EXPECT_EQ(bar, std::string(bar.size() / 2, '#') + std::string(bar.size() - bar.size() / 2, '-'));
}

TEST(Progress, EdgesOfTheLine) {
  EXPECT_NE(format_progress(0, 100, 0.0).find("  0%  0 B / 100 B  --- B/s  ETA --:--:--"),
            std::string::npos);
  auto done = format_progress(100, 100, 1.0);
  EXPECT_NE(done.find("100%"), std::string::npos);
  EXPECT_NE(done.find("ETA 0:00:00"), std::string::npos);
  EXPECT_EQ(done.find('-'), std::string::npos);                           // a full bar
  EXPECT_NE(format_progress(0, 0, 0.5).find("100%"), std::string::npos);  // empty file
  EXPECT_NE(format_progress(200, 100, 1.0).find("100%  100 B / 100 B"), std::string::npos);
  // Stalled: no rate yet, unknown ETA.
  EXPECT_NE(format_progress(0, 100, 5.0).find("ETA --:--:--"), std::string::npos);
}

TEST(Progress, NarrowTerminalsDropTheBarThenTruncate) {
  auto narrow = format_progress(50, 100, 1.0, 40);
  EXPECT_LE(narrow.size(), 40u);
  EXPECT_EQ(narrow.find('['), std::string::npos);
  EXPECT_EQ(format_progress(50, 100, 1.0, 10).size(), 10u);
  EXPECT_NE(format_progress(50, 100, 1.0, 200).find('['), std::string::npos);
  EXPECT_EQ(format_progress(50, 100, 1.0, 200).size(), 200u);
}

class Pipe {
 public:
  Pipe() {
    int fds[2] = {-1, -1};
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
    reader_.reset(fds[0]);
    writer_.reset(fds[1]);
  }
  int writer() const { return writer_.get(); }
  std::string drain() {
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(reader_.get(), buf, sizeof buf)) > 0)
      out.append(buf, static_cast<std::size_t>(n));
    return out;
  }

 private:
  niox::FileDescriptor reader_, writer_;
};

TEST(ProgressReporter, SilentWhenNotATerminal) {
  Pipe pipe;
  ProgressReporter r(1000, pipe.writer());
  EXPECT_FALSE(r.enabled());
  r.update(10);
  r.update(1000);
  r.finish();
  r.abandon();
  EXPECT_EQ(pipe.drain(), "");
}

TEST(ProgressReporter, DrawsThrottledAndEndsTheLine) {
  Pipe pipe;
  const auto t0 = ProgressReporter::Clock::time_point{};
  using std::chrono::milliseconds;
  ProgressReporter r(1000, pipe.writer(), true, t0);
  r.update(100, t0 + milliseconds(10));
  const auto first = pipe.drain();
  EXPECT_EQ(first.front(), '\r');
  EXPECT_NE(first.find(" 10%"), std::string::npos);
  r.update(200, t0 + milliseconds(50));  // within 100 ms of the last draw: nothing
  EXPECT_EQ(pipe.drain(), "");
  r.update(300, t0 + milliseconds(120));
  EXPECT_NE(pipe.drain().find(" 30%"), std::string::npos);
  r.finish(t0 + milliseconds(130));
  const auto last = pipe.drain();
  EXPECT_NE(last.find(" 30%"), std::string::npos);
  EXPECT_EQ(last.back(), '\n');
  r.finish();
  r.update(1000);
  EXPECT_EQ(pipe.drain(), "");
}

TEST(ProgressReporter, AbandonErasesTheLine) {
  Pipe pipe;
  const auto t0 = ProgressReporter::Clock::time_point{};
  ProgressReporter r(1000, pipe.writer(), true, t0);
  r.update(5, t0 + std::chrono::seconds(1));
  pipe.drain();
  r.abandon();
  EXPECT_EQ(pipe.drain(), "\r\x1b[2K");
  r.finish();
  EXPECT_EQ(pipe.drain(), "");
}

}  // namespace
}  // namespace niox::transfer
