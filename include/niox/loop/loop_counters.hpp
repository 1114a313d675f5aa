// Per-loop counters: what a loop asked of the kernel and what it moved. Each loop keeps its own;
// EventLoop::counters() takes a snapshot that may be read from any thread.
#pragma once

#include <cstdint>

#include <fmt/format.h>

namespace niox {

struct LoopCounters {
  std::uint64_t loop_turns = 0;
  // Syscalls that entered the kernel to submit or wait (io_uring_enter, epoll_wait) plus the
  // I/O syscalls the epoll backend made itself (read, writev, accept4, ...; not the poll() with
  // which a multishot accept asks whether another connection waits).
  std::uint64_t kernel_entries = 0;
  std::uint64_t ops_submitted = 0;  // operations handed to the backend (each resubmission too)
  std::uint64_t ops_completed = 0;  // completion handlers run
  std::uint64_t bytes_read = 0;
  std::uint64_t bytes_written = 0;
  std::uint64_t gathering_writes = 0;  // write attempts with more than one buffer
  std::uint64_t gathered_buffers = 0;  // buffers in those attempts (divide for buffers per write)
  std::uint64_t tasks_run = 0;         // execute() tasks
  std::uint64_t wakeups = 0;           // cross-thread wake-ups the loop received
  std::uint64_t timers_fired = 0;
  // io_uring only: submissions forced early by a full SQ, and reaps that found CQEs the kernel
  // had to hold back because the CQ was full (overflow; none are lost).
  std::uint64_t sq_full_submits = 0;
  std::uint64_t cq_overflow_flushes = 0;
  // io_uring only: receives whose buffer the kernel took from the loop's buffer ring, and
  // receives that found the ring empty or low and read into a pooled buffer instead.
  std::uint64_t ring_receives = 0;
  std::uint64_t ring_fallbacks = 0;
  // io_uring only: multishot recvs armed for receive_multishot (the first and every re-arm);
  // recvs the kernel ended because the buffer ring was empty (ENOBUFS: the bytes wait in the
  // socket and are read into a pooled buffer), single-shot or multishot; and multishots stopped
  // because their descriptor held EventLoop::Options::receive_ring_per_connection ring buffers.
  std::uint64_t multishot_arms = 0;
  std::uint64_t ring_exhausted = 0;
  std::uint64_t receive_bound_stops = 0;
  // io_uring only: receives that went straight to the socket with a pooled buffer of the size
  // asked because the descriptor's last read filled its buffer (more than a ring buffer was
  // likely waiting), and those of them that found the socket empty and waited in the ring.
  std::uint64_t speculative_receives = 0;
  std::uint64_t speculative_misses = 0;
  // io_uring only: receives on a socket the last read drained after taking more than a ring
  // buffer holds (a bulk stream): they waited for readiness without a buffer, then took all
  // that waited in one recv into a pooled buffer of the size asked, not a ring buffer's worth.
  std::uint64_t bulk_receives = 0;
  // io_uring only: sends of zero-copy writes (WriteFlags::zero_copy) that went out zero-copy,
  // each counted when its notification arrived, and zero-copy writes sent plainly because the
  // ring or the socket refused the opcode.
  std::uint64_t zero_copy_sends = 0;
  std::uint64_t zero_copy_fallbacks = 0;
  // epoll only: attempts (counted in kernel_entries) that found their descriptor not ready
  // (EAGAIN) and went on to wait for readiness: the syscalls readiness tracking did not save.
  std::uint64_t would_block = 0;

  double buffers_per_gathering_write() const noexcept {
    return gathering_writes ? static_cast<double>(gathered_buffers) / gathering_writes : 0.0;
  }
};

}  // namespace niox

template <>
struct fmt::formatter<niox::LoopCounters> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <class Ctx>
  auto format(const niox::LoopCounters& c, Ctx& ctx) const {
    return fmt::format_to(
        ctx.out(),
        "turns={} kernel_entries={} submitted={} completed={} bytes_read={} bytes_written={} "
        "gathering_writes={} buffers_per_gather={:.2f} tasks={} wakeups={} timers={} "
        "sq_full={} cq_overflow={} ring_receives={} ring_fallbacks={} multishot_arms={} "
        "ring_exhausted={} receive_bound_stops={} speculative_receives={} speculative_misses={} "
        "bulk_receives={} zero_copy_sends={} zero_copy_fallbacks={} would_block={}",
        c.loop_turns, c.kernel_entries, c.ops_submitted, c.ops_completed, c.bytes_read,
        c.bytes_written, c.gathering_writes, c.buffers_per_gathering_write(), c.tasks_run,
        c.wakeups, c.timers_fired, c.sq_full_submits, c.cq_overflow_flushes, c.ring_receives,
        c.ring_fallbacks, c.multishot_arms, c.ring_exhausted, c.receive_bound_stops,
        c.speculative_receives, c.speculative_misses, c.bulk_receives, c.zero_copy_sends,
        c.zero_copy_fallbacks, c.would_block);
  }
};
