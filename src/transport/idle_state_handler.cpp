#include <niox/transport/channel.hpp>
#include <niox/transport/idle_state_handler.hpp>

#include <algorithm>
#include <mutex>
#include <optional>
#include <vector>

namespace niox {

namespace detail {

// The idle deadlines of every IdleStateHandler on one executor, earliest first (a binary heap),
// behind one timer of that executor armed for the earliest. A handler per connection with a
// timer of its own cost a scheduled state and a loop timer each; an entry here is 24 bytes.
// Used on the executor's thread only. The handlers hold it; it goes away with the last one.
class IdleTimerQueue : public std::enable_shared_from_this<IdleTimerQueue> {
 public:
  using TimePoint = Executor::Clock::time_point;
  using Kind = IdleStateHandler::Kind;

  explicit IdleTimerQueue(Executor& executor) : executor_(&executor), link_(executor.link()) {}
  IdleTimerQueue(const IdleTimerQueue&) = delete;
  IdleTimerQueue& operator=(const IdleTimerQueue&) = delete;
  ~IdleTimerQueue();

  // The executor's queue, made on first use.
  static std::shared_ptr<IdleTimerQueue> of(Executor& executor);

  void add(IdleStateHandler& h, Kind kind, TimePoint deadline);
  void remove(IdleStateHandler& h, Kind kind) noexcept;

 private:
  struct Entry {
    TimePoint deadline;
    std::uint32_t seq;  // equal deadlines come due in the order they were queued
    Kind kind;
    IdleStateHandler* handler;
  };
  static bool earlier(const Entry& a, const Entry& b) noexcept {
    if (a.deadline != b.deadline) {
      return a.deadline < b.deadline;
    }
    return static_cast<std::int32_t>(a.seq - b.seq) < 0;
  }
  void place(std::size_t i) noexcept {
    heap_[i].handler->slot_[heap_[i].kind] = static_cast<std::uint32_t>(i);
  }
  void sift_up(std::size_t i) noexcept;
  void sift_down(std::size_t i) noexcept;
  void erase_at(std::size_t i) noexcept;
  // Keeps the timer armed no later than the earliest deadline, and off when none is left.
  void arm();
  // The timer: every entry now due leaves the queue and its handler decides what comes next.
  void expire();

  struct Registry {
    std::mutex mutex;
    std::vector<std::weak_ptr<IdleTimerQueue>> queues;
  };
  // Never destroyed: a handler may outlive static destruction.
  static Registry& registry() {
    static auto* r = new Registry;
    return *r;
  }

  Executor* executor_;
  std::shared_ptr<ExecutorLink> link_;  // the registry's key; held, so it stays unique
  std::vector<Entry> heap_;
  std::uint32_t next_seq_ = 0;
  ScheduledFuture timer_;
  std::optional<TimePoint> armed_for_;
  bool expiring_ = false;
};

IdleTimerQueue::~IdleTimerQueue() {
  timer_.cancel();
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  std::erase_if(r.queues, [](const std::weak_ptr<IdleTimerQueue>& w) { return w.expired(); });
}

std::shared_ptr<IdleTimerQueue> IdleTimerQueue::of(Executor& executor) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  for (auto& w : r.queues) {
    if (auto q = w.lock(); q && q->link_ == executor.link()) {
      return q;
    }
  }
  auto q = std::make_shared<IdleTimerQueue>(executor);
  r.queues.push_back(q);
  return q;
}

void IdleTimerQueue::sift_up(std::size_t i) noexcept {
  while (i > 0) {
    std::size_t parent = (i - 1) / 2;
    if (!earlier(heap_[i], heap_[parent])) {
      break;
    }
    std::swap(heap_[i], heap_[parent]);
    place(i);
    i = parent;
  }
  place(i);
}

void IdleTimerQueue::sift_down(std::size_t i) noexcept {
  const std::size_t n = heap_.size();
  while (true) {
    std::size_t least = i;
    for (std::size_t c = 2 * i + 1; c <= 2 * i + 2 && c < n; ++c) {
      if (earlier(heap_[c], heap_[least])) {
        least = c;
      }
    }
    if (least == i) {
      break;
    }
    std::swap(heap_[i], heap_[least]);
    place(i);
    i = least;
  }
  place(i);
}

void IdleTimerQueue::add(IdleStateHandler& h, Kind kind, TimePoint deadline) {
  heap_.push_back(Entry{deadline, next_seq_++, kind, &h});
  sift_up(heap_.size() - 1);
  arm();
}

void IdleTimerQueue::remove(IdleStateHandler& h, Kind kind) noexcept {
  erase_at(h.slot_[kind]);
  if (heap_.empty() && !expiring_) {
    timer_.cancel();
    timer_ = ScheduledFuture();
    armed_for_.reset();
  }
}

void IdleTimerQueue::erase_at(std::size_t i) noexcept {
  heap_[i].handler->slot_[heap_[i].kind] = IdleStateHandler::not_queued;
  const std::size_t last = heap_.size() - 1;
  if (i != last) {
    heap_[i] = heap_[last];
    heap_.pop_back();
    if (i > 0 && earlier(heap_[i], heap_[(i - 1) / 2])) {
      sift_up(i);
    } else {
      sift_down(i);
    }
  } else {
    heap_.pop_back();
  }
}

void IdleTimerQueue::arm() {
  if (expiring_) {
    return;  // expire() arms once every due entry was handled
  }
  if (heap_.empty()) {
    timer_.cancel();
    timer_ = ScheduledFuture();
    armed_for_.reset();
    return;
  }
  const TimePoint first = heap_.front().deadline;
  if (armed_for_ && *armed_for_ <= first) {
    return;  // armed for it or earlier: an early expiry finds nothing due and arms again
  }
  timer_.cancel();
  const TimePoint now = executor_->now();
  auto delay = first > now ? first - now : Executor::Clock::duration::zero();
  timer_ = executor_->schedule(delay, [weak = weak_from_this()] {
    if (auto q = weak.lock()) {
      q->expire();
    }
  });
  armed_for_ = first;
}

void IdleTimerQueue::expire() {
  armed_for_.reset();
  timer_ = ScheduledFuture();
  expiring_ = true;
  try {
    const TimePoint now = executor_->now();
    while (!heap_.empty() && heap_.front().deadline <= now) {
      Entry e = heap_.front();
      erase_at(0);
      e.handler->timeout(e.kind);  // may add or remove entries, its own or others'
    }
  } catch (...) {
    expiring_ = false;
    arm();
    throw;
  }
  expiring_ = false;
  arm();
}

}  // namespace detail

IdleStateHandler::IdleStateHandler(Duration reader_idle_time, Duration writer_idle_time,
                                   Duration all_idle_time)
    : reader_idle_(std::max(reader_idle_time, Duration::zero())),
      writer_idle_(std::max(writer_idle_time, Duration::zero())),
      all_idle_(std::max(all_idle_time, Duration::zero())) {}

IdleStateHandler::~IdleStateHandler() { destroy(); }

void IdleStateHandler::handler_added(ChannelHandlerContext& ctx) {
  if (ctx.channel().is_active()) {
    initialize(ctx);
  }
}

void IdleStateHandler::handler_removed(ChannelHandlerContext&) { destroy(); }

void IdleStateHandler::channel_active(ChannelHandlerContext& ctx) {
  initialize(ctx);
  ctx.fire_channel_active();
}

void IdleStateHandler::channel_inactive(ChannelHandlerContext& ctx) {
  destroy();
  ctx.fire_channel_inactive();
}

void IdleStateHandler::channel_read(ChannelHandlerContext& ctx, Message&& msg) {
  if (reader_idle_ > Duration::zero() || all_idle_ > Duration::zero()) {
    reading_ = true;
    first_reader_idle_ = true;
    shared_->first_all_idle = true;
  }
  ctx.fire_channel_read(std::move(msg));
}

void IdleStateHandler::channel_read_complete(ChannelHandlerContext& ctx) {
  if (reading_) {
    last_read_ = ctx.executor().now();
    reading_ = false;
  }
  ctx.fire_channel_read_complete();
}

void IdleStateHandler::write(ChannelHandlerContext& ctx, Message&& msg, ChannelPromise promise) {
  if (writer_idle_ == Duration::zero() && all_idle_ == Duration::zero()) {
    ctx.write(std::move(msg), std::move(promise));
    return;
  }
  if (!promise.valid()) {
    promise = ctx.new_promise();  // a void promise has no completion to observe
  }
  // The listener may outlive this handler: it holds only the shared timestamps.
  promise.future().add_listener(
      [shared = shared_, executor = &ctx.executor()](const std::error_code&) {
        shared->last_write = executor->now();
        shared->first_writer_idle = true;
        shared->first_all_idle = true;
      });
  ctx.write(std::move(msg), std::move(promise));
}

void IdleStateHandler::initialize(ChannelHandlerContext& ctx) {
  if (state_ != 0) {
    return;  // initialized already, or destroyed before (no restart, like Netty)
  }
  state_ = 1;
  ctx_ = &ctx;
  auto now = ctx.executor().now();
  last_read_ = now;
  shared_->last_write = now;
  if (reader_idle_ == Duration::zero() && writer_idle_ == Duration::zero() &&
      all_idle_ == Duration::zero()) {
    return;
  }
  queue_ = detail::IdleTimerQueue::of(ctx.executor());
  if (reader_idle_ > Duration::zero()) {
    queue_->add(*this, reader, now + reader_idle_);
  }
  if (writer_idle_ > Duration::zero()) {
    queue_->add(*this, writer, now + writer_idle_);
  }
  if (all_idle_ > Duration::zero()) {
    queue_->add(*this, all, now + all_idle_);
  }
}

void IdleStateHandler::destroy() noexcept {
  state_ = 2;
  ctx_ = nullptr;
  if (queue_) {
    for (Kind k : {reader, writer, all}) {
      if (slot_[k] != not_queued) {
        queue_->remove(*this, k);
      }
    }
    queue_.reset();
  }
}

void IdleStateHandler::timeout(Kind kind) {
  if (state_ != 1) {
    return;
  }
  switch (kind) {
    case reader: reader_timeout(*ctx_); break;
    case writer: writer_timeout(*ctx_); break;
    case all: all_timeout(*ctx_); break;
  }
}

void IdleStateHandler::reader_timeout(ChannelHandlerContext& ctx) {
  Duration next = reader_idle_;
  if (!reading_) {
    next -= ctx.executor().now() - last_read_;
  }
  fire_or_wait(ctx, next, reader_idle_, reader, IdleState::reader_idle, first_reader_idle_);
}

void IdleStateHandler::writer_timeout(ChannelHandlerContext& ctx) {
  Duration next = writer_idle_ - (ctx.executor().now() - shared_->last_write);
  fire_or_wait(ctx, next, writer_idle_, writer, IdleState::writer_idle, shared_->first_writer_idle);
}

void IdleStateHandler::all_timeout(ChannelHandlerContext& ctx) {
  Duration next = all_idle_;
  if (!reading_) {
    next -= ctx.executor().now() - std::max(last_read_, shared_->last_write);
  }
  fire_or_wait(ctx, next, all_idle_, all, IdleState::all_idle, shared_->first_all_idle);
}

void IdleStateHandler::fire_or_wait(ChannelHandlerContext& ctx, Duration left, Duration period,
                                    Kind kind, IdleState state, bool& first) {
  auto now = ctx.executor().now();
  if (left <= Duration::zero()) {
    queue_->add(*this, kind, now + period);
    bool was_first = first;
    first = false;
    channel_idle(ctx, IdleStateEvent{state, was_first});
  } else {
    queue_->add(*this, kind, now + left);
  }
}

void IdleStateHandler::channel_idle(ChannelHandlerContext& ctx, IdleStateEvent event) {
  ctx.fire_user_event_triggered(event);
}

void ReadTimeoutHandler::channel_idle(ChannelHandlerContext& ctx, IdleStateEvent event) {
  if (event.state != IdleState::reader_idle || closed_) {
    return;
  }
  closed_ = true;
  ctx.fire_exception_caught(std::make_exception_ptr(ReadTimeoutException()));
  ctx.close();
}

}  // namespace niox
