// Backend parametrisation for tests that run through an EventLoop.
//
//   class MyTest : public niox::test::BackendTest {};
//   TEST_P(MyTest, Works) { niox::EventLoop loop(options()); ... }
//   NIOX_INSTANTIATE_BACKENDS(MyTest);
//
// Every backend niox has is instantiated; SetUp() skips (never fails) one this machine cannot
// run, and one excluded by NIOX_BACKEND=io_uring|epoll (so `NIOX_BACKEND=epoll ctest` runs the
// whole suite once more on epoll alone).
#pragma once

#include <niox/loop/event_loop.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace niox::test {

inline std::vector<BackendKind> all_backends() { return {BackendKind::io_uring, BackendKind::epoll}; }

// Why `kind` cannot run in this process, or nullopt when it can.
inline std::optional<std::string> backend_skip_reason(BackendKind kind) {
  if (const char* env = std::getenv("NIOX_BACKEND"); env && *env && std::string_view(env) != "auto" &&
                                                     std::string_view(env) != to_string(kind)) {
    return "NIOX_BACKEND=" + std::string(env) + " excludes " + std::string(to_string(kind));
  }
  if (!EventLoop::backend_available(kind)) return std::string(to_string(kind)) + " unavailable here";
  return std::nullopt;
}

inline std::string backend_test_name(const ::testing::TestParamInfo<BackendKind>& info) {
  return std::string(to_string(info.param));
}

class BackendTest : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override {
    if (auto why = backend_skip_reason(GetParam())) GTEST_SKIP() << *why;
  }
  EventLoop::Options options() const {
    EventLoop::Options o;
    o.backend = GetParam();
    return o;
  }
};

}  // namespace niox::test

#define NIOX_INSTANTIATE_BACKENDS(Suite)                                                     \
  INSTANTIATE_TEST_SUITE_P(Backends, Suite, ::testing::ValuesIn(::niox::test::all_backends()), \
                           ::niox::test::backend_test_name)
