#include <niox/transport/loop_executor.hpp>

#include <memory>
#include <mutex>
#include <unordered_map>

namespace niox {

LoopExecutor& LoopExecutor::of(EventLoop& loop) {
  // Never freed: a promise completed late still finds its executor. A new loop at the address
  // of a dead one reuses the entry, which only ever holds the address.
  static std::mutex mutex;
  static auto* executors = new std::unordered_map<EventLoop*, std::unique_ptr<LoopExecutor>>();
  std::lock_guard lock(mutex);
  auto& e = (*executors)[&loop];
  if (!e) {
    e = std::make_unique<LoopExecutor>(loop);
  }
  return *e;
}

void LoopExecutor::execute(Task task) { loop_->execute(std::move(task)); }

ScheduledFuture LoopExecutor::schedule(std::chrono::nanoseconds delay, Task task) {
  auto state = std::make_shared<detail::ScheduledState>();
  if (delay.count() < 0) {
    delay = std::chrono::nanoseconds(0);
  }
  auto arm = [loop = loop_, delay, state, t = std::move(task)]() mutable {
    loop->schedule(delay, [state, t = std::move(t)](std::error_code ec) mutable {
      if (!ec && state->claim_for_run()) {
        t();
      }
    });
  };
  if (loop_->in_loop_thread()) {
    arm();
  } else {
    loop_->execute(std::move(arm));
  }
  return ScheduledFuture(std::move(state));
}

}  // namespace niox
