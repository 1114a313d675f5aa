// Backend parametrisation for tests that run through an EventLoop.
//
//   class MyTest : public niox::test::BackendTest {};
//   TEST_P(MyTest, Works) { niox::EventLoop loop(options()); ... GetParam().kind ... }
//   NIOX_INSTANTIATE_BACKENDS(MyTest);
//
// Instantiates every backend variant niox has: io_uring, io_uring with every operation forced
// through its per-operation fallback (readiness poll + syscall, as on a kernel missing the
// opcodes), io_uring with single-shot receives (EventLoop::Options::multishot_receive off), and
// epoll. SetUp() skips (never fails) a variant this machine cannot run, and one
// excluded by NIOX_BACKEND=io_uring|epoll (so `NIOX_BACKEND=epoll ctest` runs the whole suite
// once more on epoll alone).
#pragma once

#include <niox/loop/event_loop.hpp>
#include <niox/loop/event_loop_group.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace niox::test {

struct BackendVariant {
  BackendKind kind;
  bool io_uring_readiness_only = false;
  const char* name = "";
  bool multishot_receive = true;  // EventLoop::Options::multishot_receive
  friend std::ostream& operator<<(std::ostream& os, const BackendVariant& v) {
    return os << v.name;
  }
};

inline std::vector<BackendVariant> all_backends() {
  return {{BackendKind::io_uring, false, "io_uring"},
          {BackendKind::io_uring, true, "io_uring_fallback"},
          {BackendKind::io_uring, false, "io_uring_single_shot", false},
          {BackendKind::epoll, false, "epoll"}};
}

// Why `kind` cannot run in this process, or nullopt when it can.
inline std::optional<std::string> backend_skip_reason(BackendKind kind) {
  if (const char* env = std::getenv("NIOX_BACKEND");
      env && *env && std::string_view(env) != "auto" && std::string_view(env) != to_string(kind)) {
    return "NIOX_BACKEND=" + std::string(env) + " excludes " + std::string(to_string(kind));
  }
  if (!EventLoop::backend_available(kind))
    return std::string(to_string(kind)) + " unavailable here";
  return std::nullopt;
}

inline std::string backend_test_name(const ::testing::TestParamInfo<BackendVariant>& info) {
  return info.param.name;
}

class BackendTest : public ::testing::TestWithParam<BackendVariant> {
 protected:
  void SetUp() override {
    if (auto why = backend_skip_reason(GetParam().kind)) GTEST_SKIP() << *why;
  }
  EventLoop::Options options() const {
    EventLoop::Options o;
    o.backend = GetParam().kind;
    o.io_uring_readiness_only = GetParam().io_uring_readiness_only;
    o.multishot_receive = GetParam().multishot_receive;
    return o;
  }
  // options() with the smallest queues the backends take: a ring of two entries (a completion
  // queue of four) and epoll batches of two.
  EventLoop::Options tiny_ring_options() const {
    EventLoop::Options o = options();
    o.ring_entries = 2;
    o.epoll_batch = 2;
    return o;
  }
  // `threads` loops, each as options() makes them.
  EventLoopGroup::Options group_options(std::size_t threads) const {
    EventLoopGroup::Options g;
    g.threads = threads;
    g.loop = options();
    return g;
  }
};

}  // namespace niox::test

#define NIOX_INSTANTIATE_BACKENDS(Suite)                                                       \
  INSTANTIATE_TEST_SUITE_P(Backends, Suite, ::testing::ValuesIn(::niox::test::all_backends()), \
                           ::niox::test::backend_test_name)
