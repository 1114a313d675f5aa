// Private: the backend-independent part of an EventLoop.
#pragma once

#include "loop/backend.hpp"
#include "loop/operation.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

namespace niox::detail {

// Defined with the Executor: the calling thread runs an EventLoop while between the two.
void enter_loop_thread() noexcept;
void leave_loop_thread() noexcept;

// What the last read of a descriptor found: less than it asked for (the socket is drained: wait
// before the next), or all it asked for (more may be waiting).
enum class LastRead : std::uint8_t { unknown, drained, filled };

// A table indexed by descriptor, grown to hold `fd`. Grown in steps of 1,024 entries rather
// than doubled: resize() constructs, so touches, every entry up to the new size, and a doubled
// table made a server's resident set pay for up to twice the descriptors it has. The vector's
// own spare capacity (it still grows geometrically, so the steps stay amortised) is never
// touched and stays out of the resident set.
template <class Table>
void grow_fd_table(Table& table, int fd) {
  table.resize((static_cast<std::size_t>(fd) | 1023u) + 1);
}

// Counters written by the loop thread only; relaxed atomics so other threads may read them.
struct AtomicCounters {
  std::atomic<std::uint64_t> loop_turns{0}, kernel_entries{0}, ops_submitted{0}, ops_completed{0},
      bytes_read{0}, bytes_written{0}, gathering_writes{0}, gathered_buffers{0}, tasks_run{0},
      wakeups{0}, timers_fired{0}, sq_full_submits{0}, cq_overflow_flushes{0}, ring_receives{0},
      ring_fallbacks{0}, multishot_arms{0}, ring_exhausted{0}, receive_bound_stops{0},
      speculative_receives{0}, speculative_misses{0}, bulk_receives{0}, zero_copy_sends{0},
      zero_copy_fallbacks{0}, would_block{0};
  static void add(std::atomic<std::uint64_t>& c, std::uint64_t n) noexcept {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
};

class LoopCore {
 public:
  explicit LoopCore(const EventLoop::Options& options);
  ~LoopCore();

  // ---- used by EventLoop ----
  OperationHandle start(const OpArgs& args, CompletionFn fn);
  bool cancel(OperationHandle h);
  // Aborts what is pending on fd and forgets it; never closes it (EventLoop::close does, at
  // once after, when `closing`).
  void forget(int fd, bool closing);
  // The descriptor is a socket accept just made: non-blocking (no fstat, and no fcntl on
  // epoll, to find out), and nothing read from it yet.
  void declare_accepted_socket(int fd);
  void close_at_shutdown(int fd, ClosedAtShutdown& owner);
  // Whether shutdown has channels to close although nothing may be pending.
  bool has_owned_descriptors() const noexcept { return owned_ > 0; }
  std::size_t run_once(std::chrono::nanoseconds timeout);  // negative = no limit
  void run();
  void stop() noexcept;
  void shutdown();
  void execute(UniqueFunction<void()> task);
  bool in_loop_thread() const noexcept;
  // Loop thread only: the clock as first read in this turn, after its wait (no clock is read
  // in a turn that neither runs timers nor asks).
  std::chrono::steady_clock::time_point turn_time() noexcept {
    if (turn_time_ == std::chrono::steady_clock::time_point{})
      turn_time_ = std::chrono::steady_clock::now();
    return turn_time_;
  }
  // A thread has run (or shut down) the loop: from then on only that thread starts operations.
  bool bound() const noexcept { return thread_tid_.load(std::memory_order_relaxed) != 0; }
  LoopCounters counters() const noexcept;
  std::size_t pending() const noexcept { return live_ops_; }
  int pollable_fd();
  // Asked by every channel's flush, so kept here rather than behind the backend's vtable.
  BackendKind kind() const noexcept { return kind_; }
  bool multishot_receive() const noexcept { return backend_->multishot_receive(); }

  // ---- used by backends ----
  // Result of one attempt: bytes / value, or -errno. `more`: a multishot operation stays armed.
  void on_result(Operation& op, long res, bool more = false);
  void on_internal(InternalFd which);
  // The live operation named by (index, generation) or nullptr.
  Operation* find(std::uint32_t index, std::uint32_t generation) noexcept;
  AtomicCounters& stats() noexcept { return stats_; }

  // ---- used by operation families (src/loop/ops/) ----
  // Its result is decided; the handler runs in the completion phase.
  void finish(Operation* op, std::error_code ec) noexcept;
  // The next attempt (the rest of a short write, a multishot re-armed), or finished when
  // there is nothing left to move.
  void begin_attempt(Operation* op);
  // An interim result to hand over in the completion phase; the operation goes on.
  void push_completed(Operation* op) noexcept;
  // The single cancel path (see event_loop.cpp).
  void abort(Operation* op);
  void arm_timer(Operation* op);
  // Runs the operation's handler; an exception is reported, not thrown.
  void hand(Operation& op, Completion& c) noexcept;
  // What the last read of the operation's descriptor found; nullptr once detached.
  LastRead* last_read(const Operation& op) noexcept;
  // How many bytes the last read of the operation's descriptor that moved any took; 0 once
  // detached or before the first.
  std::uint32_t last_read_bytes(const Operation& op) const noexcept;
  // A read of fd asked for `asked` and got `got` bytes: it drained the socket when it got less
  // (0 at end of stream, or none waiting), else it filled its buffer.
  void record_read(int fd, std::size_t got, std::size_t asked);
  // Whether a write of fd is queued or in the kernel.
  bool write_pending(int fd) const noexcept {
    return static_cast<std::size_t>(fd) < fds_.size() &&
           fds_[fd].lane_head[lane_slot(Lane::write)] != nullptr;
  }
  // The pipe pair every transfer_from splices through, one at a time (each step empties it).
  SplicePipe& transfer_pipe() noexcept { return transfer_pipe_; }

 private:
  struct FdState {
    // One queue per lane but Lane::none, at lane - 1 (see lane_slot).
    Operation* lane_head[static_cast<int>(Lane::count) - 1]{};
    Operation* lane_tail[static_cast<int>(Lane::count) - 1]{};
    Operation* all = nullptr;
    bool classified = false;
    bool is_socket = false;
    LastRead last_read = LastRead::unknown;
    std::uint32_t last_read_bytes = 0;
    ClosedAtShutdown* owner = nullptr;  // close_at_shutdown
  };
  static int lane_slot(Lane lane) noexcept { return static_cast<int>(lane) - 1; }
  struct TimerEntry {
    std::chrono::steady_clock::time_point deadline;
    std::uint64_t seq;
    Operation* op;
    std::uint32_t generation;
  };
  struct TimerLater {
    bool operator()(const TimerEntry& a, const TimerEntry& b) const noexcept {
      return a.deadline != b.deadline ? a.deadline > b.deadline : a.seq > b.seq;
    }
  };

  Operation* acquire();
  void recycle(Operation* op) noexcept;
  OpSide* acquire_side();
  void recycle_side(OpSide* side) noexcept;
  // The descriptor's entry, made (and the descriptor classified) on first use.
  FdState& fd_state(int fd) {
    if (static_cast<std::size_t>(fd) < fds_.size() && fds_[fd].classified) [[likely]]
      return fds_[fd];
    return new_fd_state(fd);
  }
  FdState& new_fd_state(int fd);
  void link(Operation* op);
  void unlink(Operation* op) noexcept;
  std::size_t run_tasks() {
    wake_pending_.store(false, std::memory_order_seq_cst);
    bool remote = has_tasks_.load(std::memory_order_acquire);
    if (!remote && local_tasks_.empty()) return 0;
    return run_queued_tasks(remote);
  }
  std::size_t run_queued_tasks(bool remote);
  void start_queued();
  std::size_t run_completions();
  std::size_t run_timers();  // those due at turn_time()
  bool has_immediate_work() const noexcept {
    return !completed_.empty() || !to_start_.empty() ||
           has_tasks_.load(std::memory_order_acquire) || !local_tasks_.empty() ||
           stop_.load(std::memory_order_relaxed);
  }
  std::chrono::nanoseconds next_timeout(std::chrono::nanoseconds limit) const noexcept;
  void abort_all();
  // shutdown(): the owners of descriptors close them, each with its handlers.
  void close_owners();
  void self_wake() noexcept;

  EventLoop::Options options_;
  // Before ops_: an operation's engine may still discard the pipe as it is destroyed.
  SplicePipe transfer_pipe_;
  std::unique_ptr<Backend> backend_;
  BackendKind kind_ = BackendKind::automatic;  // backend_->kind(), once it is made
  // Operations are made 64 at a time, in one block: every idle connection holds one, and a
  // block spares each the malloc header and rounding and a pointer in a table.
  static constexpr std::uint32_t ops_per_slab = 64;
  Operation& op_at(std::uint32_t index) noexcept {
    return ops_[index / ops_per_slab][index % ops_per_slab];
  }
  std::vector<std::unique_ptr<Operation[]>> ops_;
  std::uint32_t op_count_ = 0;  // ops_.size() * ops_per_slab
  Operation* free_ = nullptr;
  // Apart from ops_, as many as operations that needed one were ever live at once.
  std::vector<std::unique_ptr<OpSide>> sides_;
  OpSide* free_sides_ = nullptr;
  std::size_t live_ops_ = 0;
  std::vector<FdState> fds_;
  std::vector<Operation*> to_start_, starting_;
  std::vector<Operation*> completed_, completing_;
  std::vector<TimerEntry> timers_;  // min-heap by TimerLater
  std::uint64_t timer_seq_ = 0;
  std::size_t stale_timers_ = 0;  // cancelled timers whose heap entries remain

  // execute() queues: tasks_ takes other threads' (under task_mutex_), local_tasks_ the loop
  // thread's own while tasks_ is empty. Every local task then precedes every task in tasks_, so
  // run_tasks() runs the local ones first and a task never overtakes one queued before it by a
  // thread that could see it queued (a local post made while tasks_ is not empty goes there).
  std::mutex task_mutex_;
  std::vector<UniqueFunction<void()>> tasks_, running_tasks_;
  std::vector<UniqueFunction<void()>> local_tasks_, running_local_tasks_;
  std::atomic<bool> has_tasks_{false};
  std::atomic<bool> wake_pending_{false};
  std::atomic<bool> stop_{false};
  std::atomic<int> thread_tid_{0};
  // turn_time(), or zero until it is first asked for in the turn; loop thread only.
  std::chrono::steady_clock::time_point turn_time_{};
  // The loop's own descriptors, closed after the backend that watches them.
  FileDescriptor wake_fd_;
  FileDescriptor timer_fd_;  // embedded mode only
  std::chrono::steady_clock::time_point timer_fd_deadline_{};
  bool embedded_ = false;
  bool shutting_down_ = false;
  std::size_t owned_ = 0;  // descriptors with an owner to close at shutdown
  bool leak_in_backend_ = false;
  AtomicCounters stats_;
};

}  // namespace niox::detail
