#include <niox/buffer/buffer_pool.hpp>
#include <niox/loop/executor.hpp>

#include <sys/syscall.h>
#include <unistd.h>

namespace niox {

namespace detail {

int current_thread_id() noexcept {
  thread_local int tid = static_cast<int>(::syscall(SYS_gettid));
  return tid;
}

std::shared_ptr<ScheduledState> new_scheduled_state() {
  // From the per-thread block cache: scheduling allocates nothing once warm.
  return std::allocate_shared<ScheduledState>(CachedObjectAllocator<ScheduledState>());
}

bool ExecutorLink::execute(Runnable& task) {
  // On the executor's own bound thread it cannot retire meanwhile: no lock.
  if (is_bound_thread(thread_.load(std::memory_order_acquire))) {
    target_->execute(std::move(task));
    return true;
  }
  // Held while handing over, so that retire() cannot complete (and the executor be freed)
  // between the check and the push.
  std::lock_guard lock(mutex_);
  if (!alive_.load(std::memory_order_relaxed)) {
    return false;
  }
  target_->execute(std::move(task));
  return true;
}

bool ExecutorLink::ask_executor() const noexcept {
  std::lock_guard lock(mutex_);
  return alive_.load(std::memory_order_relaxed) && target_->in_event_loop();
}

}  // namespace detail

Executor::Executor(ThreadCheck check)
    : link_(std::make_shared<detail::ExecutorLink>(
          this, check == ThreadCheck::any_thread ? detail::ExecutorLink::any_thread
                : check == ThreadCheck::ask      ? detail::ExecutorLink::ask
                                                 : 0)) {}

Executor::~Executor() { retire(); }

void Executor::retire() noexcept {
  std::lock_guard lock(link_->mutex_);
  link_->alive_.store(false, std::memory_order_release);
  link_->thread_.store(0, std::memory_order_release);
}

void Executor::bind_thread(int thread_id) noexcept {
  if (link_->alive_.load(std::memory_order_relaxed) &&
      link_->thread_.load(std::memory_order_relaxed) >= 0) {
    link_->thread_.store(thread_id, std::memory_order_release);
  }
}

}  // namespace niox

namespace niox::detail {

namespace {
thread_local int loop_depth = 0;
}  // namespace

bool on_loop_thread() noexcept { return loop_depth > 0; }
void enter_loop_thread() noexcept { ++loop_depth; }
void leave_loop_thread() noexcept { --loop_depth; }

}  // namespace niox::detail
