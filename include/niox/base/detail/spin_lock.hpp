// SpinLock: a one-byte lock for sections of a few instructions (swap a flag, move a
// std::function), where std::mutex's out-of-line calls and its second atomic at unlock cost
// more than the section. A waiter yields its time slice instead of sleeping in the kernel, so
// never hold it across anything that waits.
#pragma once

#include <atomic>
#include <thread>

namespace niox::detail {

class SpinLock {
 public:
  void lock() noexcept {
    while (flag_.test_and_set(std::memory_order_acquire)) {
      // Wait reading, not writing: a test_and_set loop would bounce the line between cores.
      while (flag_.test(std::memory_order_relaxed)) std::this_thread::yield();
    }
  }
  bool try_lock() noexcept { return !flag_.test_and_set(std::memory_order_acquire); }
  void unlock() noexcept { flag_.clear(std::memory_order_release); }

 private:
  std::atomic_flag flag_;  // clear since C++20
};

}  // namespace niox::detail
