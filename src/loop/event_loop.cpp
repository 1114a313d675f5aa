#include "loop/loop_core.hpp"
#include "loop/ops/family.hpp"

#include "channels/fd_io.hpp"

#include <niox/base/log.hpp>
#include <niox/buffer/buffer_exceptions.hpp>
#include <niox/buffer/gather.hpp>
#include <niox/loop/event_loop.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <fmt/format.h>

namespace niox {

namespace {

class LoopCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "niox.loop"; }
  std::string message(int c) const override {
    switch (static_cast<LoopError>(c)) {
      case LoopError::end_of_file: return "end of file before the requested count";
    }
    return "unknown niox.loop error";
  }
};

int current_tid() noexcept { return detail::current_thread_id(); }

void ignore_sigpipe_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old {};
    if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL &&
        !(old.sa_flags & SA_SIGINFO)) {
      ::signal(SIGPIPE, SIG_IGN);
    }
  });
}

// Nothing throws across the loop: a handler or task that throws is reported and the loop
// carries on with the next one (Netty logs and continues the same way).
template <class F, class... A>
void invoke_guarded(F& f, A&... a) noexcept {
  try {
    f(a...);
  } catch (const std::exception& e) {
    log(LogLevel::error, "a loop handler threw: {}", e.what());
  } catch (...) {
    log(LogLevel::error, "a loop handler threw a non-standard exception");
  }
}

BackendKind env_backend() {
  const char* v = std::getenv("NIOX_BACKEND");
  if (!v || !*v) return BackendKind::automatic;
  std::string_view s(v);
  if (s == "io_uring" || s == "uring" || s == "io-uring") return BackendKind::io_uring;
  if (s == "epoll") return BackendKind::epoll;
  if (s != "auto") {
    static std::once_flag once;
    std::call_once(
        once, [&] { log(LogLevel::warn, "ignoring NIOX_BACKEND={} (io_uring|epoll|auto)", s); });
  }
  return BackendKind::automatic;
}

}  // namespace

const std::error_category& loop_category() noexcept {
  static const LoopCategory c;
  return c;
}

std::string_view to_string(BackendKind k) noexcept {
  switch (k) {
    case BackendKind::io_uring: return "io_uring";
    case BackendKind::epoll: return "epoll";
    case BackendKind::automatic: break;
  }
  return "auto";
}

namespace detail {

// ---------------------------------------------------------------------------------------------

LoopCore::LoopCore(const EventLoop::Options& options) : options_(options) {
  ignore_sigpipe_once();
  // A throw below closes wake_fd_ with the half-built core.
  wake_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd_) throw std::system_error(errno, std::generic_category(), "eventfd");

  BackendKind want = options.backend;
  if (want == BackendKind::automatic) want = env_backend();
  std::error_code ec;
  if (want == BackendKind::io_uring || want == BackendKind::automatic) {
    backend_ = make_io_uring_backend(*this, options_, ec);
    if (!backend_ && want == BackendKind::io_uring) {
      throw std::system_error(ec, "niox: io_uring backend unavailable");
    }
    if (!backend_) {
      static std::once_flag once;
      std::call_once(once, [&] {
        log(LogLevel::info, "io_uring unavailable ({}), using epoll", ec.message());
      });
    }
  }
  if (!backend_) {
    backend_ = make_epoll_backend(*this, options_, ec);
    if (!backend_) {
      throw std::system_error(ec, "niox: epoll backend unavailable");
    }
  }
  kind_ = backend_->kind();
  backend_->watch_internal(wake_fd_.get(), InternalFd::wake);
  to_start_.reserve(64);
  starting_.reserve(64);
  completed_.reserve(64);
  completing_.reserve(64);
}

LoopCore::~LoopCore() {
  if (live_ops_ > 0 || has_tasks_.load() || !local_tasks_.empty()) shutdown();
  backend_.reset();
  if (leak_in_backend_) {
    for (auto& slab : ops_) {
      bool leaked = false;
      for (std::uint32_t i = 0; i < ops_per_slab; ++i) {
        Operation& op = slab[i];
        if (!op.in_kernel()) continue;
        // The kernel may still write into its iovecs, msghdr or address.
        if (op.side) (void)sides_[op.side->index].release();
        leaked = true;
      }
      if (leaked) (void)slab.release();  // the whole block: the kernel holds part of it
    }
  }
  timer_fd_.reset();
  wake_fd_.reset();
}

Operation* LoopCore::acquire() {
  Operation* op = free_;
  if (op) {
    free_ = op->lane_next;
    op->lane_next = nullptr;
  } else {
    auto slab = std::make_unique<Operation[]>(ops_per_slab);
    for (std::uint32_t i = 0; i < ops_per_slab; ++i) slab[i].index = op_count_ + i;
    // The first is taken; the rest go to the free list, lowest index first.
    for (std::uint32_t i = ops_per_slab - 1; i > 0; --i) {
      slab[i].lane_next = free_;
      free_ = &slab[i];
    }
    op = &slab[0];
    ops_.push_back(std::move(slab));
    op_count_ += ops_per_slab;
  }
  ++live_ops_;
  return op;
}

OpSide* LoopCore::acquire_side() {
  OpSide* side = free_sides_;
  if (side) {
    free_sides_ = side->next_free;
    side->next_free = nullptr;
    return side;
  }
  auto owned = std::make_unique<OpSide>();
  side = owned.get();
  side->index = static_cast<std::uint32_t>(sides_.size());
  side->iov.resize(2);
  side->accepted.reserve(1);  // a single accept's connection, whichever side block it runs on
  sides_.push_back(std::move(owned));
  return side;
}

void LoopCore::recycle_side(OpSide* side) noexcept {
  side->accepted.clear();  // never handed over: no handler, no loop has used them
  side->addrlen = 0;
  side->deferred_res = 0;
  side->next_free = free_sides_;
  free_sides_ = side;
}

void LoopCore::recycle(Operation* op) noexcept {
  op->fn.reset();
  op->bufs.clear();  // the room stays with the pooled operation (see prepare_receive)
  if (op->side) recycle_side(op->side);
  op->side = nullptr;
  op->iov_in_side = false;
  op->ec.clear();
  op->move_to(OpState::free);
  op->in_completed = op->connect_started = false;
  op->bstate = BackendState::none;
  op->lane = Lane::none;
  op->done = 0;
  op->value = 0;
  op->ticks = 0;
  op->fd = op->fd_out = op->home_fd = -1;
  op->stop_asked = op->small_read = op->short_read = op->rearm_due = false;
  if (++op->generation == 0) op->generation = 1;
  op->lane_next = free_;
  free_ = op;
  --live_ops_;
}

Operation* LoopCore::find(std::uint32_t index, std::uint32_t generation) noexcept {
  if (index >= op_count_) return nullptr;
  Operation* op = &op_at(index);
  return op->state != OpState::free && op->generation == generation ? op : nullptr;
}

LoopCore::FdState& LoopCore::new_fd_state(int fd) {
  if (static_cast<std::size_t>(fd) >= fds_.size()) grow_fd_table(fds_, fd);
  FdState& fs = fds_[fd];
  if (!fs.classified) {
    struct stat st {};
    fs.is_socket = ::fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
    fs.classified = true;
  }
  return fs;
}

void LoopCore::link(Operation* op) {
  FdState& fs = fd_state(op->home_fd);
  op->fd_prev = nullptr;
  op->fd_next = fs.all;
  if (fs.all) fs.all->fd_prev = op;
  fs.all = op;
  if (op->lane != Lane::none) {
    int l = lane_slot(op->lane);
    op->lane_next = nullptr;
    if (fs.lane_tail[l])
      fs.lane_tail[l]->lane_next = op;
    else
      fs.lane_head[l] = op;
    fs.lane_tail[l] = op;
  }
}

void LoopCore::unlink(Operation* op) noexcept {
  FdState& fs = fds_[op->home_fd];
  op->home_fd = -1;
  if (op->fd_prev)
    op->fd_prev->fd_next = op->fd_next;
  else
    fs.all = op->fd_next;
  if (op->fd_next) op->fd_next->fd_prev = op->fd_prev;
  op->fd_prev = op->fd_next = nullptr;
  if (op->lane == Lane::none) return;
  int l = lane_slot(op->lane);
  Operation* prev = nullptr;
  for (Operation* p = fs.lane_head[l]; p && p != op; p = p->lane_next) prev = p;
  bool was_head = prev == nullptr;
  if (prev)
    prev->lane_next = op->lane_next;
  else
    fs.lane_head[l] = op->lane_next;
  if (fs.lane_tail[l] == op) fs.lane_tail[l] = prev;
  op->lane_next = nullptr;
  Operation* next = fs.lane_head[l];
  if (was_head && next && next->state == OpState::waiting) {
    next->move_to(OpState::queued);
    to_start_.push_back(next);
  }
}

OperationHandle LoopCore::start(const OpArgs& a, CompletionFn fn) {
  if (int bound = thread_tid_.load(std::memory_order_relaxed);
      bound != 0 && bound != current_tid()) {
    // The loop's state belongs to its thread: an operation started elsewhere would race with
    // it and might never be seen. Say so now instead of losing it.
    throw IllegalStateException(
        "niox: an EventLoop operation was started off the loop's thread; hand it over with "
        "EventLoop::execute()");
  }
  const OpFamily& family = family_of(a.kind);
  if (family.fills_buffers) {
    if (a.single && a.single->is_read_only() && a.single->has_remaining())
      throw ReadOnlyBufferException();
    for (const ByteBuffer& b : a.many) {
      if (b.is_read_only() && b.has_remaining()) throw ReadOnlyBufferException();
    }
  }
  Operation* op = acquire();
  op->family = &family;
  op->fd = a.fd;
  op->fd_out = a.fd_out;
  op->offset = a.offset;
  op->length = a.length;
  op->events = a.events;
  op->more = a.more;
  op->zero_copy = a.zero_copy;
  op->fn = std::move(fn);
  if (a.single)
    op->bufs.push_back(std::move(*a.single));
  else
    op->bufs.assign(a.many.begin(), a.many.end());
  if (family.side == SideUse::always ||
      (family.side == SideUse::many_buffers && op->bufs.size() > 1)) {
    op->side = acquire_side();
    op->side->offset_out = a.offset_out;
    if (a.address) op->side->addrlen = a.address->to_native(op->side->addr);
  }
  OperationHandle h{op->index, op->generation};

  if (shutting_down_) {
    finish(op, operation_aborted());
    return h;
  }
  if (family.descriptors == 0) {
    op->deadline =
        (std::chrono::steady_clock::now() + std::max(a.delay, std::chrono::nanoseconds(0)))
            .time_since_epoch();
    op->period = a.period;
    op->move_to(OpState::armed);
    arm_timer(op);
    return h;
  }
  if (op->fd < 0 || (family.descriptors == 2 && op->fd_out < 0)) {
    finish(op, std::make_error_code(std::errc::bad_file_descriptor));  // reported later, not thrown
    return h;
  }
  op->lane = family.lane;
  op->home_fd = family.descriptors == 2 && !family.belongs_to_input ? a.fd_out : a.fd;
  link(op);
  // Only the descriptor it belongs to is classified and remembered: a transfer's file is
  // borrowed, closed without the loop, and its number may name a socket the next time.
  op->fd_is_socket = fds_[op->home_fd].is_socket;
  int l = lane_slot(op->lane);
  if (op->lane == Lane::none || fds_[op->home_fd].lane_head[l] == op) {
    op->move_to(OpState::queued);
    to_start_.push_back(op);
  } else {
    op->move_to(OpState::waiting);
  }
  return h;
}

void LoopCore::begin_attempt(Operation* op) {
  if (op->family->prepare && !op->family->prepare(*this, *op)) {
    finish(op, {});
    return;
  }
  op->move_to(OpState::in_kernel);
  AtomicCounters::add(stats_.ops_submitted, 1);
  backend_->start(*op);
}

void LoopCore::on_result(Operation& op, long res, bool more) {
  op.family->result(*this, op, res, more);
}

LastRead* LoopCore::last_read(const Operation& op) noexcept {
  return op.home_fd >= 0 ? &fds_[op.home_fd].last_read : nullptr;
}

std::uint32_t LoopCore::last_read_bytes(const Operation& op) const noexcept {
  return op.home_fd >= 0 ? fds_[op.home_fd].last_read_bytes : 0;
}

void LoopCore::record_read(int fd, std::size_t got, std::size_t asked) {
  FdState& fs = fd_state(fd);
  fs.last_read = got < asked ? LastRead::drained : LastRead::filled;
  if (got > 0)
    fs.last_read_bytes = static_cast<std::uint32_t>(std::min<std::size_t>(got, UINT32_MAX));
}

void LoopCore::push_completed(Operation* op) noexcept {
  if (op->in_completed) return;
  op->in_completed = true;
  completed_.push_back(op);
}

void LoopCore::finish(Operation* op, std::error_code ec) noexcept {
  if (op->state == OpState::finished) return;
  op->move_to(OpState::finished);
  op->ec = ec;
  if (op->home_fd >= 0) unlink(op);
  push_completed(op);
}

void LoopCore::hand(Operation& op, Completion& c) noexcept { invoke_guarded(op.fn, c); }

// The one way an operation is stopped: cancel(), close(fd)/release(fd) and shutdown. Its
// handler runs once, later, with operation_aborted; until then the buffers stay with it.
void LoopCore::abort(Operation* op) {
  switch (op->state) {
    case OpState::armed:
      ++stale_timers_;  // its heap entry stays until popped or compacted
      [[fallthrough]];
    case OpState::waiting:  // behind its lane head: nothing of it reached the backend
      return finish(op, operation_aborted());
    case OpState::queued:  // start_queued() ends it
      return op->move_to(OpState::cancelling);
    case OpState::in_kernel:
      // The result (-ECANCELED, or the real one if it raced) may come before cancel() returns.
      op->move_to(OpState::cancelling);
      return backend_->cancel(*op);
    default:  // already on its way out
      return;
  }
}

bool LoopCore::cancel(OperationHandle h) {
  Operation* op = find(h.index, h.generation);
  if (!op || op->state == OpState::finished) return false;
  abort(op);
  return true;
}

void LoopCore::declare_accepted_socket(int fd) {
  if (fd < 0) return;
  if (static_cast<std::size_t>(fd) >= fds_.size()) grow_fd_table(fds_, fd);
  fds_[fd].classified = true;
  fds_[fd].is_socket = true;
  // accept returns once the handshake's last ACK is in; the peer's first bytes travel behind
  // it and are seldom there yet (most of the time under connection churn), so the first read
  // waits for them (IORING_RECVSEND_POLL_FIRST, epoll's edge) instead of a recv finding EAGAIN.
  // Bytes already there complete that wait at once.
  fds_[fd].last_read = LastRead::drained;
  backend_->declare_accepted(fd);
}

void LoopCore::close_at_shutdown(int fd, ClosedAtShutdown& owner) {
  if (fd < 0) return;
  if (static_cast<std::size_t>(fd) >= fds_.size()) grow_fd_table(fds_, fd);
  FdState& fs = fds_[fd];
  if (fs.owner == nullptr) ++owned_;
  fs.owner = &owner;
}

void LoopCore::forget(int fd, bool closing) {
  if (fd < 0) return;
  if (static_cast<std::size_t>(fd) < fds_.size()) {
    // Detach everything first: from here on no operation refers to this descriptor's state, so
    // a new descriptor with the same number starts clean whatever the old ones still report.
    std::vector<Operation*>& victims = starting_;  // reused scratch, empty between turns
    std::size_t base = victims.size();
    for (Operation* op = fds_[fd].all; op; op = op->fd_next) victims.push_back(op);
    for (std::size_t i = base; i < victims.size(); ++i) victims[i]->home_fd = -1;
    if (fds_[fd].owner != nullptr) --owned_;
    fds_[fd] = FdState{};
    for (std::size_t i = base; i < victims.size(); ++i) abort(victims[i]);
    victims.resize(base);
  }
  backend_->forget_fd(fd, closing);
}

// ---- The turn -------------------------------------------------------------------------------

std::size_t LoopCore::run_queued_tasks(bool remote) {
  // Both batches are taken before either runs: what their tasks queue runs next turn, after
  // both (see execute()).
  if (remote) {
    std::lock_guard lock(task_mutex_);
    std::swap(tasks_, running_tasks_);
    has_tasks_.store(false, std::memory_order_relaxed);
  }
  std::swap(local_tasks_, running_local_tasks_);
  std::size_t n = running_local_tasks_.size() + running_tasks_.size();
  for (auto& t : running_local_tasks_) invoke_guarded(t);
  running_local_tasks_.clear();
  for (auto& t : running_tasks_) invoke_guarded(t);
  running_tasks_.clear();
  AtomicCounters::add(stats_.tasks_run, n);
  return n;
}

void LoopCore::start_queued() {
  while (!to_start_.empty()) {
    std::swap(to_start_, starting_);
    for (Operation* op : starting_) {
      if (op->state == OpState::cancelling || shutting_down_)
        finish(op, operation_aborted());
      else
        begin_attempt(op);
    }
    starting_.clear();
  }
}

std::size_t LoopCore::run_completions() {
  if (completed_.empty()) return 0;
  std::swap(completed_, completing_);
  std::size_t n = 0;
  Completion c;
  for (Operation* op : completing_) {
    op->in_completed = false;
    if (op->family->interim) n += op->family->interim(*this, *op);
    if (op->state == OpState::finished && !op->in_completed) {
      c = Completion{};
      c.ec = op->ec;
      c.bytes = op->done;
      c.value = op->value;
      c.buffers = std::span<ByteBuffer>(op->bufs);
      if (OpSide* side = op->side) {
        if (!side->accepted.empty()) {  // a single accept's connection (multishot hands its own)
          c.fd = std::move(side->accepted.front());
          side->accepted.clear();
        }
        if (!op->ec && side->addrlen > 0) {  // recvmsg: the sender (others ignore it)
          c.peer = &side->addr;
          c.peer_len = side->addrlen;
        }
      }
      invoke_guarded(op->fn, c);
      AtomicCounters::add(stats_.ops_completed, 1);
      recycle(op);
      ++n;
    }
  }
  completing_.clear();
  return n;
}

void LoopCore::arm_timer(Operation* op) {
  // Idle-timeout patterns cancel and re-arm a timer per message: drop the cancelled entries
  // once they dominate, so the heap stays proportional to the live timers.
  if (stale_timers_ > 256 && stale_timers_ * 2 > timers_.size()) {
    std::erase_if(timers_, [](const TimerEntry& e) {
      return e.op->generation != e.generation || e.op->state != OpState::armed;
    });
    std::make_heap(timers_.begin(), timers_.end(), TimerLater{});
    stale_timers_ = 0;
  }
  timers_.push_back(
      {std::chrono::steady_clock::time_point(op->deadline), timer_seq_++, op, op->generation});
  std::push_heap(timers_.begin(), timers_.end(), TimerLater{});
}

std::size_t LoopCore::run_timers() {
  if (timers_.empty()) return 0;
  auto now = turn_time();
  std::size_t n = 0;
  while (!timers_.empty() && timers_.front().deadline <= now) {
    TimerEntry e = timers_.front();
    std::pop_heap(timers_.begin(), timers_.end(), TimerLater{});
    timers_.pop_back();
    Operation* op = e.op;
    if (op->generation != e.generation || op->state != OpState::armed) {
      if (stale_timers_ > 0) --stale_timers_;
      continue;
    }
    ++n;
    on_result(*op, 0);
  }
  return n;
}

std::chrono::nanoseconds LoopCore::next_timeout(std::chrono::nanoseconds limit) const noexcept {
  if (timers_.empty()) return limit;
  auto d = timers_.front().deadline - std::chrono::steady_clock::now();
  auto ns = std::max(std::chrono::duration_cast<std::chrono::nanoseconds>(d),
                     std::chrono::nanoseconds(0));
  return limit.count() < 0 ? ns : std::min(ns, limit);
}

std::size_t LoopCore::run_once(std::chrono::nanoseconds timeout) {
  thread_tid_.store(current_tid(), std::memory_order_relaxed);
  AtomicCounters::add(stats_.loop_turns, 1);
  if (embedded_) backend_->clear_pollable();
  std::size_t n = run_tasks();
  start_queued();
  backend_->flush();
  auto t = has_immediate_work() || n > 0 ? std::chrono::nanoseconds(0) : next_timeout(timeout);
  backend_->wait(t);
  turn_time_ = {};  // read again when first asked for in this turn
  n += run_completions();
  n += run_timers();
  n += run_completions();
  if (embedded_) {
    // The host only looks at pollable_fd(): make it readable when work is already waiting, and
    // let the timerfd carry the next deadline.
    if (has_immediate_work()) self_wake();
    backend_->submit_pending();
    auto deadline =
        timers_.empty() ? std::chrono::steady_clock::time_point{} : timers_.front().deadline;
    if (deadline != timer_fd_deadline_) {
      itimerspec its{};
      if (!timers_.empty()) {
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch())
                      .count();
        if (ns <= 0) ns = 1;
        its.it_value.tv_sec = ns / 1000000000;
        its.it_value.tv_nsec = ns % 1000000000;
      }
      ::timerfd_settime(timer_fd_.get(), TFD_TIMER_ABSTIME, &its, nullptr);
      timer_fd_deadline_ = deadline;
    }
  }
  return n;
}

void LoopCore::run() {
  while (!stop_.load(std::memory_order_acquire)) run_once(std::chrono::nanoseconds(-1));
  // Tasks queued before stop() still run.
  run_tasks();
  stop_.store(false);
}

void LoopCore::stop() noexcept {
  stop_.store(true, std::memory_order_release);
  self_wake();
}

void LoopCore::self_wake() noexcept {
  if (!wake_pending_.exchange(true)) {
    std::uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(wake_fd_.get(), &one, sizeof one);
  }
}

void LoopCore::execute(UniqueFunction<void()> task) {
  // The loop thread's own task needs no lock while no other thread's waits: it then comes
  // before all of those still to be queued, which run_tasks() keeps.
  if (in_loop_thread() && !has_tasks_.load(std::memory_order_acquire)) {
    local_tasks_.push_back(std::move(task));
    if (embedded_) self_wake();
    return;
  }
  {
    std::lock_guard lock(task_mutex_);
    tasks_.push_back(std::move(task));
    has_tasks_.store(true, std::memory_order_release);
  }
  if (!in_loop_thread() || embedded_) self_wake();
}

bool LoopCore::in_loop_thread() const noexcept {
  return thread_tid_.load(std::memory_order_relaxed) == current_tid();
}

void LoopCore::on_internal(InternalFd which) {
  if (which == InternalFd::wake) AtomicCounters::add(stats_.wakeups, 1);
}

void LoopCore::close_owners() {
  if (owned_ == 0) return;
  std::vector<int> owned;
  owned.reserve(owned_);
  for (std::size_t fd = 0; fd < fds_.size(); ++fd) {
    if (fds_[fd].owner != nullptr) owned.push_back(static_cast<int>(fd));
  }
  for (int fd : owned) {
    // An earlier owner's handlers may have closed this one (its state is then forgotten), or
    // even opened another descriptor with its number, which is closed as well.
    ClosedAtShutdown* owner = std::exchange(fds_[static_cast<std::size_t>(fd)].owner, nullptr);
    if (owner == nullptr) continue;
    --owned_;
    owner->close_at_loop_shutdown();
  }
}

void LoopCore::abort_all() {
  shutting_down_ = true;
  owned_ = 0;
  for (auto& fs : fds_) fs = FdState{};
  for (std::uint32_t i = 0; i < op_count_; ++i) {
    Operation& op = op_at(i);
    op.home_fd = -1;
    abort(&op);
  }
}

void LoopCore::shutdown() {
  thread_tid_.store(current_tid(), std::memory_order_relaxed);
  // What their close starts is aborted at once, as the handlers of aborted operations' is.
  shutting_down_ = true;
  close_owners();
  abort_all();
  // Run until the kernel has let go of every operation: their buffers die only after that.
  std::size_t last_live = live_ops_, idle_rounds = 0;
  while (live_ops_ > 0 || has_tasks_.load() || !local_tasks_.empty() || !completed_.empty() ||
         !to_start_.empty()) {
    if (live_ops_ > 0 && live_ops_ == last_live && ++idle_rounds > 100) {
      // The kernel does not answer (a ring driven from a thread that is not its issuer): leak
      // what it may still write into rather than free it under the kernel's feet.
      log(LogLevel::error, "{} operations still in the kernel at shutdown, leaking them",
          live_ops_);
      leak_in_backend_ = true;
      break;
    }
    if (live_ops_ != last_live) idle_rounds = 0;
    last_live = live_ops_;
    run_tasks();
    start_queued();
    backend_->flush();
    if (live_ops_ == 0 && !has_immediate_work()) break;  // the tasks were the last of it
    backend_->wait(has_immediate_work() ? std::chrono::nanoseconds(0)
                                        : std::chrono::milliseconds(100));
    run_completions();  // what their handlers start is aborted at once (shutting_down_)
  }
  timers_.clear();
  stale_timers_ = 0;
}

int LoopCore::pollable_fd() {
  if (!embedded_) {
    timer_fd_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    if (!timer_fd_) throw std::system_error(errno, std::generic_category(), "timerfd_create");
    backend_->watch_internal(timer_fd_.get(), InternalFd::timer);
    embedded_ = true;
    self_wake();  // whatever is already queued gets a first turn
  }
  return backend_->pollable_fd();
}

LoopCounters LoopCore::counters() const noexcept {
  auto r = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  LoopCounters c;
  c.loop_turns = r(stats_.loop_turns);
  c.kernel_entries = r(stats_.kernel_entries);
  c.ops_submitted = r(stats_.ops_submitted);
  c.ops_completed = r(stats_.ops_completed);
  c.bytes_read = r(stats_.bytes_read);
  c.bytes_written = r(stats_.bytes_written);
  c.gathering_writes = r(stats_.gathering_writes);
  c.gathered_buffers = r(stats_.gathered_buffers);
  c.tasks_run = r(stats_.tasks_run);
  c.wakeups = r(stats_.wakeups);
  c.timers_fired = r(stats_.timers_fired);
  c.sq_full_submits = r(stats_.sq_full_submits);
  c.cq_overflow_flushes = r(stats_.cq_overflow_flushes);
  c.ring_receives = r(stats_.ring_receives);
  c.ring_fallbacks = r(stats_.ring_fallbacks);
  c.multishot_arms = r(stats_.multishot_arms);
  c.ring_exhausted = r(stats_.ring_exhausted);
  c.receive_bound_stops = r(stats_.receive_bound_stops);
  c.speculative_receives = r(stats_.speculative_receives);
  c.speculative_misses = r(stats_.speculative_misses);
  c.bulk_receives = r(stats_.bulk_receives);
  c.zero_copy_sends = r(stats_.zero_copy_sends);
  c.zero_copy_fallbacks = r(stats_.zero_copy_fallbacks);
  c.would_block = r(stats_.would_block);
  return c;
}

}  // namespace detail

// ---- EventLoop ------------------------------------------------------------------------------

EventLoop::EventLoop() : EventLoop(Options{}) {}
EventLoop::EventLoop(Options options)
    : Executor(ThreadCheck::bound), core_(std::make_unique<detail::LoopCore>(options)) {}

namespace {
// Marks the calling thread as a loop thread while the loop runs handlers on it, so that a
// blocking wait there is refused instead of freezing the loop.
struct LoopThreadScope {
  LoopThreadScope() noexcept { detail::enter_loop_thread(); }
  ~LoopThreadScope() { detail::leave_loop_thread(); }
  LoopThreadScope(const LoopThreadScope&) = delete;
  LoopThreadScope& operator=(const LoopThreadScope&) = delete;
};
}  // namespace

EventLoop::~EventLoop() {
  // Channels still open close while the loop stands, as under a group's shutdown: their
  // handlers run on a live loop, and a channel waiting on nothing is not left open.
  if (core_->has_owned_descriptors()) shutdown();
  // From now on channels, promises and timers that outlive the loop find it gone. What is
  // still queued runs (or is aborted) below, on this thread.
  retire();
  LoopThreadScope scope;
  core_.reset();
}

bool EventLoop::backend_available(BackendKind kind) {
  if (kind == BackendKind::automatic) return true;
  std::error_code ec;
  return kind == BackendKind::epoll || detail::io_uring_usable(ec);
}

BackendKind EventLoop::backend() const noexcept { return core_->kind(); }
bool EventLoop::has_multishot_receive() const noexcept { return core_->multishot_receive(); }

std::int64_t EventLoop::receive_now(int fd, ByteBuffer& dst, std::error_code& ec) {
  ec.clear();
  const auto room = dst.writable_bytes();
  if (room.empty()) return 0;
  ssize_t n;
  do {
    n = ::recv(fd, room.data(), room.size(), MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      core_->record_read(fd, 0, room.size());
    } else {
      ec = std::error_code(errno, std::generic_category());
    }
    return 0;
  }
  if (n == 0) return -1;
  const auto got = static_cast<std::size_t>(n);
  dst.position(dst.position() + got);
  detail::AtomicCounters::add(core_->stats().bytes_read, got);
  core_->record_read(fd, got, room.size());
  return n;
}

std::size_t EventLoop::write_now(int fd, std::span<ByteBuffer> bufs) {
  if (fd < 0 || core_->write_pending(fd)) return 0;
  std::error_code ec;  // full, or an error (ENOTSOCK too): the loop's write takes over
  const auto sent = static_cast<std::size_t>(detail::send_available(fd, bufs, ec));
  detail::AtomicCounters::add(core_->stats().bytes_written, sent);
  return sent;
}

std::size_t EventLoop::write_now(int fd, std::span<const iovec> iov, WriteFlags flags) {
  if (fd < 0 || iov.empty() || core_->write_pending(fd)) return 0;
  const int more = has_flag(flags, WriteFlags::more) ? MSG_MORE : 0;
  ssize_t n;
  do {
    n = detail::write_once(fd, detail::FdKind::socket, iov.data(), iov.size(), -1,
                           MSG_DONTWAIT | more);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return 0;  // full, or an error (ENOTSOCK too): the loop's write takes over
  const auto sent = static_cast<std::size_t>(n);
  detail::AtomicCounters::add(core_->stats().bytes_written, sent);
  return sent;
}

void EventLoop::run() {
  bind_thread(detail::current_thread_id());
  LoopThreadScope scope;
  core_->run();
}
std::size_t EventLoop::run_once(std::chrono::milliseconds timeout) {
  bind_thread(detail::current_thread_id());
  LoopThreadScope scope;
  return core_->run_once(std::chrono::duration_cast<std::chrono::nanoseconds>(timeout));
}
void EventLoop::stop() { core_->stop(); }
void EventLoop::shutdown() {
  bind_thread(detail::current_thread_id());
  LoopThreadScope scope;
  core_->shutdown();
}
bool EventLoop::in_event_loop() const noexcept { return core_->in_loop_thread(); }
EventLoop::Clock::time_point EventLoop::now() const noexcept {
  return core_->in_loop_thread() ? core_->turn_time() : Clock::now();
}
void EventLoop::execute(Runnable task) { core_->execute(std::move(task)); }

ScheduledFuture EventLoop::schedule(std::chrono::nanoseconds delay, Runnable task) {
  return schedule_at_fixed_rate(delay, std::chrono::nanoseconds(0), std::move(task));
}

void EventLoop::cancel_timer(const std::shared_ptr<detail::ScheduledState>& state) noexcept {
  auto link = state->owner.lock();
  if (!link) {
    return;
  }
  if (link->in_event_loop()) {
    auto& loop = static_cast<EventLoop&>(link->executor());
    loop.core_->cancel(OperationHandle{state->timer_index, state->timer_generation});
    return;
  }
  try {
    Runnable r([state] { cancel_timer(state); });
    link->execute(r);
  } catch (...) {
    // Out of memory: the timer is released at its deadline instead.
  }
}

ScheduledFuture EventLoop::schedule_at_fixed_rate(std::chrono::nanoseconds initial,
                                                  std::chrono::nanoseconds period, Runnable task) {
  auto state = detail::new_scheduled_state();
  state->task = std::move(task);
  state->on_cancel = &EventLoop::cancel_timer;
  state->owner = link();
  // The timer operation holds only the state: its handler fits the operation's inline storage.
  auto arm = [this, initial, period, state]() mutable {
    if (state->is_done()) {
      state->task = nullptr;
      return;
    }
    detail::OpArgs a{detail::OpKind::timer};
    a.delay = initial;
    a.period = period;
    bool periodic = period.count() > 0;
    auto fire = [this, state, periodic](detail::Completion& c) mutable {
      if (c.ec) {
        state->task = nullptr;  // aborted (loop shutdown): it never runs
        return;
      }
      if (!periodic) {
        if (state->claim_for_run()) state->task();
        state->task = nullptr;
        return;
      }
      if (state->is_done()) {
        state->task = nullptr;
        core_->cancel(OperationHandle{state->timer_index, state->timer_generation});
        return;
      }
      state->task();
    };
    static_assert(detail::CompletionFn::stores_inline<decltype(fire)>());
    OperationHandle h = core_->start(a, std::move(fire));
    state->timer_index = h.index;
    state->timer_generation = h.generation;
  };
  if (core_->in_loop_thread() || !core_->bound()) {
    arm();
  } else {
    Runnable r(std::move(arm));
    if (!link()->execute(r)) {
      // The loop is gone: the task can never run.
      state->status.store(detail::ScheduledState::cancelled, std::memory_order_release);
      state->task = nullptr;
    }
  }
  return ScheduledFuture(std::move(state));
}
bool EventLoop::cancel(OperationHandle handle) { return core_->cancel(handle); }
std::error_code EventLoop::close(FileDescriptor fd) {
  if (!fd) return std::make_error_code(std::errc::bad_file_descriptor);
  core_->forget(fd.get(), /*closing=*/true);
  return fd.close();
}
void EventLoop::release(const FileDescriptor& fd) { core_->forget(fd.get(), /*closing=*/false); }

void detail::declare_accepted_socket(EventLoop& loop, int fd) {
  loop.core_->declare_accepted_socket(fd);
}
void detail::close_at_shutdown(EventLoop& loop, int fd, ClosedAtShutdown& owner) {
  loop.core_->close_at_shutdown(fd, owner);
}
LoopCounters EventLoop::counters() const noexcept { return core_->counters(); }
std::size_t EventLoop::pending() const noexcept { return core_->pending(); }
int EventLoop::pollable_fd() { return core_->pollable_fd(); }
OperationHandle EventLoop::start(const detail::OpArgs& args, detail::CompletionFn fn) {
  return core_->start(args, std::move(fn));
}

}  // namespace niox
