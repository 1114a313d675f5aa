// IdleStateHandler: fires an IdleStateEvent user event when a channel has not read, written, or
// done either for a while (Netty's io.netty.handler.timeout.IdleStateHandler), and
// ReadTimeoutHandler, which closes a connection that sends nothing for too long — the defence
// against slowloris-style peers.
//
// Timing uses the channel's Executor: now() for the clock and schedule() for one timer per
// executor, shared by every IdleStateHandler on it (a queue ordered by deadline), so it runs on
// the event loop in production and on EmbeddedChannel's manual clock in tests. An idle
// connection costs a queue entry and no timer of its own. A read counts when
// channel_read_complete ends a batch of reads; a write counts when it completes (its bytes were
// taken by the kernel), not when it is queued.
//
// A zero duration disables that kind of idleness. The first event of an idle period has
// first == true; while the channel stays idle the event repeats every period with first false.
#pragma once

#include <niox/transport/channel_handler.hpp>
#include <niox/loop/executor.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>

namespace niox {

namespace detail {
class IdleTimerQueue;
}

enum class IdleState { reader_idle, writer_idle, all_idle };

struct IdleStateEvent {
  IdleState state;
  bool first;
  bool operator==(const IdleStateEvent&) const = default;
};

class IdleStateHandler : public ChannelDuplexHandler {
 public:
  using Duration = std::chrono::nanoseconds;

  IdleStateHandler(Duration reader_idle_time, Duration writer_idle_time, Duration all_idle_time);
  ~IdleStateHandler() override;

  Duration reader_idle_time() const noexcept { return reader_idle_; }
  Duration writer_idle_time() const noexcept { return writer_idle_; }
  Duration all_idle_time() const noexcept { return all_idle_; }

  void handler_added(ChannelHandlerContext& ctx) override;
  void handler_removed(ChannelHandlerContext& ctx) override;
  void channel_active(ChannelHandlerContext& ctx) override;
  void channel_inactive(ChannelHandlerContext& ctx) override;
  void channel_read(ChannelHandlerContext& ctx, Message&& msg) override;
  void channel_read_complete(ChannelHandlerContext& ctx) override;
  void write(ChannelHandlerContext& ctx, Message&& msg, ChannelPromise promise) override;

 protected:
  // Called for each idle period; fires the event down the pipeline by default.
  virtual void channel_idle(ChannelHandlerContext& ctx, IdleStateEvent event);

 private:
  friend class detail::IdleTimerQueue;
  using TimePoint = Executor::Clock::time_point;
  struct Shared {
    TimePoint last_write;
    bool first_writer_idle = true;
    bool first_all_idle = true;
  };
  enum Kind : std::uint8_t { reader = 0, writer = 1, all = 2 };
  static constexpr std::uint32_t not_queued = ~std::uint32_t{0};

  void initialize(ChannelHandlerContext& ctx);
  void destroy() noexcept;
  // The queue calls this when `kind`'s deadline has come (the entry is already out of it).
  void timeout(Kind kind);
  void reader_timeout(ChannelHandlerContext& ctx);
  void writer_timeout(ChannelHandlerContext& ctx);
  void all_timeout(ChannelHandlerContext& ctx);
  // The end of every timeout: with no time `left` the channel has been idle for the whole
  // period, so `kind` waits a full one and the event fires (`first` only the first time);
  // otherwise `kind` waits out what is left.
  void fire_or_wait(ChannelHandlerContext& ctx, Duration left, Duration period, Kind kind,
                    IdleState state, bool& first);

  Duration reader_idle_;
  Duration writer_idle_;
  Duration all_idle_;
  std::uint8_t state_ = 0;  // 0 new, 1 initialized, 2 destroyed
  bool reading_ = false;
  bool first_reader_idle_ = true;
  // Where each kind's deadline sits in queue_ (an index the queue keeps up to date).
  std::uint32_t slot_[3] = {not_queued, not_queued, not_queued};
  TimePoint last_read_{};
  ChannelHandlerContext* ctx_ = nullptr;                         // while initialized
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();  // also held by write listeners
  std::shared_ptr<detail::IdleTimerQueue> queue_;  // the executor's, while initialized
};

// Thrown into exception_caught by ReadTimeoutHandler.
class ReadTimeoutException : public std::runtime_error {
 public:
  ReadTimeoutException() : std::runtime_error("read timed out") {}
};

// Closes the channel (after firing ReadTimeoutException) when nothing was read for `timeout`.
class ReadTimeoutHandler : public IdleStateHandler {
 public:
  explicit ReadTimeoutHandler(Duration timeout)
      : IdleStateHandler(timeout, Duration::zero(), Duration::zero()) {}

 protected:
  void channel_idle(ChannelHandlerContext& ctx, IdleStateEvent event) override;

 private:
  bool closed_ = false;
};

}  // namespace niox
