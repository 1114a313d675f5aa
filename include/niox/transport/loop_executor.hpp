// LoopExecutor: the transport's Executor over an EventLoop (an adapter, so the loop layer does
// not depend on the transport).
//
// One LoopExecutor exists per EventLoop and lives for the rest of the process: promises and
// channels keep a plain Executor& and may complete (or run listeners) after whoever asked for
// the executor is gone. It only forwards to the loop; a task handed to a loop that has been
// shut down is dropped by the loop like any other task.
#pragma once

#include <niox/loop/event_loop.hpp>
#include <niox/transport/executor.hpp>

namespace niox {

class LoopExecutor final : public Executor {
 public:
  // The executor of `loop` (created on first use; thread-safe).
  static LoopExecutor& of(EventLoop& loop);

  EventLoop& loop() const noexcept { return *loop_; }

  void execute(Task task) override;
  bool in_event_loop() const noexcept override { return loop_->in_loop_thread(); }
  // From any thread; off the loop the timer is armed by a task. cancel() on the returned future
  // prevents the run (the loop's timer still fires once and finds it cancelled).
  ScheduledFuture schedule(std::chrono::nanoseconds delay, Task task) override;

  explicit LoopExecutor(EventLoop& loop) noexcept : loop_(&loop) {}

 private:
  EventLoop* loop_;
};

}  // namespace niox
