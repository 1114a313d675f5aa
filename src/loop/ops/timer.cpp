// The timer family: no descriptor and no backend; it waits for its deadline in the core's
// heap, whose expiry is its result.
#include "loop/ops/family.hpp"

namespace niox::detail {

const OpFamily timer_family{
    .descriptors = 0,
    .result =
        [](LoopCore& core, Operation& op, long, bool) {
          if (op.period.count() <= 0) {
            AtomicCounters::add(core.stats().timers_fired, 1);
            return core.finish(&op, {});
          }
          ++op.ticks;
          core.push_completed(&op);
          auto now = std::chrono::steady_clock::now().time_since_epoch();
          do op.deadline += op.period;
          while (op.deadline <= now);
          core.arm_timer(&op);
        },
    // Firings that pile up before the handler runs are one call: missed periods are skipped.
    .interim = [](LoopCore& core, Operation& op) -> std::size_t {
      if (op.ticks == 0 || op.state == OpState::finished) return 0;
      op.ticks = 0;
      Completion c;
      core.hand(op, c);
      AtomicCounters::add(core.stats().timers_fired, 1);
      return 1;
    }};

}  // namespace niox::detail
