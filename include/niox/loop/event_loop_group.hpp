// niox::EventLoopGroup — N EventLoops on N threads (Netty's EventLoopGroup).
//
// Each loop is built, run and destroyed on its own thread (an io_uring loop's ring belongs to
// the thread that drives it). next() hands out loops round-robin; a connection stays on the
// loop it was given for life. Shutdown is graceful: each loop finishes the tasks already
// queued, closes the transport channels on it (channel_inactive fires, whether or not they
// waited on anything), aborts its pending operations and timers (their handlers run once with
// operation_aborted, on that loop's thread), waits for the kernel to release their buffers,
// and only then is destroyed.
#pragma once

#include <niox/loop/event_loop.hpp>

#include <atomic>
#include <cstddef>
#include <future>
#include <memory>
#include <thread>
#include <vector>

namespace niox {

class EventLoopGroup {
 public:
  struct Options {
    std::size_t threads = 0;  // 0: one per CPU
    // Pins loop i to CPU (first_cpu + i) modulo the CPUs available.
    bool pin_threads = false;
    unsigned first_cpu = 0;
    EventLoop::Options loop{};
  };

  explicit EventLoopGroup(std::size_t threads = 0);
  explicit EventLoopGroup(Options options);
  // shutdown_gracefully() and join.
  ~EventLoopGroup();
  EventLoopGroup(const EventLoopGroup&) = delete;
  EventLoopGroup& operator=(const EventLoopGroup&) = delete;

  // Thread-safe round-robin. Valid until shutdown_gracefully().
  EventLoop& next() noexcept;
  EventLoop& loop(std::size_t i) noexcept { return *loops_[i]; }
  std::size_t size() const noexcept { return loops_.size(); }
  // Thread-safe, idempotent; returns when every loop thread has finished (do not call it from
  // one of the group's own loops).
  void shutdown_gracefully();

 private:
  std::vector<EventLoop*> loops_;
  std::vector<std::thread> threads_;
  std::atomic<std::size_t> next_{0};
  std::atomic<bool> shut_{false};
  std::promise<void> released_;
};

}  // namespace niox
