// The log sink: niox's own diagnostics reach the application's sink, not stderr.
#include <niox/base/log.hpp>
#include <niox/loop/event_loop.hpp>
#include <niox/transport/embedded_channel.hpp>

#include "support/backends.hpp"

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

namespace niox {
namespace {

struct Captured {
  std::mutex mutex;
  std::vector<std::pair<LogLevel, std::string>> lines;
  bool has(LogLevel level, std::string_view part) {
    std::lock_guard lock(mutex);
    for (auto& [l, m] : lines) {
      if (l == level && m.find(part) != std::string::npos) return true;
    }
    return false;
  }
};

// Installs a capturing sink for the test's duration and puts the previous one back.
class LogSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = set_log_sink([c = &captured_](LogLevel level, std::string_view message) {
      std::lock_guard lock(c->mutex);
      c->lines.emplace_back(level, std::string(message));
    });
  }
  void TearDown() override { set_log_sink(std::move(previous_)); }
  Captured captured_;
  LogSink previous_;
};

TEST_F(LogSinkTest, TheApplicationsSinkGetsTheLinesAndStderrNothing) {
  ::testing::internal::CaptureStderr();
  log(LogLevel::warn, "disk {} is {}% full", "sda", 97);
  auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(captured_.has(LogLevel::warn, "disk sda is 97% full"));
  EXPECT_EQ(err, "");
}

TEST_F(LogSinkTest, AHandlerThatThrowsOnTheLoopIsReportedThroughTheSink) {
  EventLoop loop;
  bool after = false;
  loop.execute([] { throw std::runtime_error("task failed"); });
  loop.execute([&] { after = true; });
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 10 && !after; ++i) loop.run_once(std::chrono::milliseconds(10));
  auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(after);
  EXPECT_TRUE(captured_.has(LogLevel::error, "task failed"));
  EXPECT_EQ(err, "");
}

// A handler that throws from exception_caught(): the transport logs it (and closes).
struct ThrowsTwice : ChannelHandler {
  void channel_read(ChannelHandlerContext&, Message&&) override { throw std::runtime_error("bad"); }
  void exception_caught(ChannelHandlerContext&, std::exception_ptr) override {
    throw std::runtime_error("worse");
  }
};

TEST_F(LogSinkTest, ATransportDiagnosticGoesThroughTheSink) {
  EmbeddedChannel ch{std::make_shared<ThrowsTwice>()};
  ::testing::internal::CaptureStderr();
  ch.write_inbound(ByteBuffer::allocate(1));
  auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(captured_.has(LogLevel::warn, "threw from exception_caught: worse"));
  EXPECT_EQ(err, "");
}

TEST_F(LogSinkTest, ASinkThatThrowsIsIgnored) {
  set_log_sink([](LogLevel, std::string_view) { throw std::runtime_error("sink down"); });
  EXPECT_NO_THROW(log(LogLevel::info, "still fine"));
}

TEST(LogSink, AnEmptySinkRestoresStderr) {
  auto previous = set_log_sink(nullptr);
  ::testing::internal::CaptureStderr();
  log(LogLevel::info, "to stderr");
  auto err = ::testing::internal::GetCapturedStderr();
  set_log_sink(std::move(previous));
  EXPECT_EQ(err, "niox: to stderr\n");
  EXPECT_EQ(to_string(LogLevel::warn), "warn");
}

}  // namespace
}  // namespace niox
