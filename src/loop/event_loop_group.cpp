#include <niox/loop/event_loop_group.hpp>

#include <exception>

#include <pthread.h>
#include <sched.h>

namespace niox {

EventLoopGroup::EventLoopGroup(std::size_t threads) : EventLoopGroup(Options{threads}) {}

EventLoopGroup::EventLoopGroup(Options options) {
  std::size_t n =
      options.threads ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  loops_.resize(n, nullptr);
  std::vector<std::future<void>> ready;
  std::shared_future<void> release = released_.get_future().share();
  for (std::size_t i = 0; i < n; ++i) {
    std::promise<void> built;
    ready.push_back(built.get_future());
    threads_.emplace_back(
        [this, i, options, cpus, built = std::move(built), may_destroy = release]() mutable {
          if (options.pin_threads) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET((options.first_cpu + i) % cpus, &set);
            pthread_setaffinity_np(pthread_self(), sizeof set, &set);
          }
          std::unique_ptr<EventLoop> loop;
          try {
            loop = std::make_unique<EventLoop>(options.loop);
          } catch (...) {
            built.set_exception(std::current_exception());
            return;
          }
          // One turn binds the loop to this thread before anyone else can see it: from then on an
          // operation started from another thread is refused instead of racing with the loop.
          loop->run_once(std::chrono::milliseconds(0));
          loops_[i] = loop.get();
          built.set_value();
          loop->run();
          loop->shutdown();    // aborts what is pending, on this thread, until the kernel lets go
          may_destroy.wait();  // stop() callers may still be touching the loop
        });
  }
  std::exception_ptr failure;
  for (auto& f : ready) {
    try {
      f.get();
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) {
    shutdown_gracefully();
    std::rethrow_exception(failure);
  }
}

EventLoopGroup::~EventLoopGroup() { shutdown_gracefully(); }

EventLoop& EventLoopGroup::next() noexcept {
  return *loops_[next_.fetch_add(1, std::memory_order_relaxed) % loops_.size()];
}

void EventLoopGroup::shutdown_gracefully() {
  if (!shut_.exchange(true)) {
    for (EventLoop* l : loops_) {
      if (l) l->stop();
    }
    released_.set_value();
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

}  // namespace niox
