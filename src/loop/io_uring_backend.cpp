#include "loop/io_uring_backend.hpp"

#include <niox/base/log.hpp>
#include <niox/buffer/gather.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace niox::detail {

namespace {
enum Tag : unsigned { tag_ignore = 0, tag_op = 1, tag_poll = 2, tag_internal = 3 };

int init_ring(unsigned entries, io_uring& ring, unsigned& flags_out) {
  const unsigned attempts[] = {
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED,
      IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
      0,
  };
  int r = -ENOSYS;
  for (unsigned flags : attempts) {
    io_uring_params p{};
    p.flags = flags;
    r = io_uring_queue_init_params(std::max(2u, entries), &ring, &p);
    if (r == 0) {
      flags_out = flags;
      return 0;
    }
    if (r != -EINVAL) return r;  // ENOSYS, EPERM, ENOMEM: no ring at all
  }
  return r;
}
}  // namespace

bool io_uring_usable(std::error_code& ec) {
  io_uring ring;
  unsigned flags = 0;
  int r = init_ring(4, ring, flags);
  if (r < 0) {
    ec = {-r, std::generic_category()};
    return false;
  }
  io_uring_queue_exit(&ring);
  return true;
}

std::unique_ptr<Backend> make_io_uring_backend(LoopCore& core, const EventLoop::Options& options,
                                               std::error_code& ec) {
  io_uring ring;
  unsigned flags = 0;
  int r = init_ring(options.ring_entries, ring, flags);
  if (r < 0) {
    ec = {-r, std::generic_category()};
    return nullptr;
  }
  io_uring_probe* probe = io_uring_get_probe_ring(&ring);
  bool ok = probe && io_uring_opcode_supported(probe, IORING_OP_POLL_ADD) &&
            io_uring_opcode_supported(probe, IORING_OP_ASYNC_CANCEL) &&
            io_uring_opcode_supported(probe, IORING_OP_READ);
  if (!ok) {
    if (probe) io_uring_free_probe(probe);
    io_uring_queue_exit(&ring);
    ec = std::make_error_code(std::errc::function_not_supported);
    return nullptr;
  }
  auto b = std::make_unique<IoUringBackend>(
      core, ring, flags, options.io_uring_readiness_only, options.receive_ring_entries,
      options.receive_ring_per_connection, options.multishot_receive);
  io_uring_free_probe(probe);
  return b;
}

IoUringBackend::IoUringBackend(LoopCore& core, io_uring& ring, unsigned setup_flags,
                               bool readiness_only, unsigned receive_ring_entries,
                               unsigned receive_ring_per_connection, bool multishot_receive)
    : core_(core),
      ring_(ring),
      enabled_(!(setup_flags & IORING_SETUP_R_DISABLED)),
      readiness_only_(readiness_only),
      multishot_(multishot_receive) {
  io_uring_probe* probe = io_uring_get_probe_ring(&ring_);
  if (probe) {
    for (int op = 0; op <= IORING_OP_LAST && op <= probe->last_op; ++op) {
      has_op_[op] = io_uring_opcode_supported(probe, op);
    }
    io_uring_free_probe(probe);
  }
  if (readiness_only) {
    for (int op : {IORING_OP_READ, IORING_OP_READV, IORING_OP_RECV, IORING_OP_WRITE,
                   IORING_OP_WRITEV, IORING_OP_SEND, IORING_OP_SENDMSG, IORING_OP_RECVMSG,
                   IORING_OP_ACCEPT, IORING_OP_CONNECT, IORING_OP_SEND_ZC, IORING_OP_SENDMSG_ZC}) {
      has_op_[op] = false;
    }
  }
  if (ring_.features & IORING_FEAT_CQE_SKIP) cancel_sqe_flags_ = IOSQE_CQE_SKIP_SUCCESS;
  io_uring_register_ring_fd(&ring_);  // saves a descriptor lookup per enter; optional
  // The readiness fallback reads with plain syscalls: a ring would only sit there. A kernel
  // without buffer rings (before 5.19) refuses the registration; receives then bring pooled
  // buffers.
  if (!readiness_only && receive_ring_entries > 0 && has_op_[IORING_OP_RECV]) {
    unsigned entries = 1;
    while (entries < receive_ring_entries && entries < 32768) entries <<= 1;
    std::error_code ignored;
    recv_ring_ = BufferRing::create(ring_, 0, entries, BufferRing::default_buffer_size, ignored);
    ring_per_connection_ = std::clamp(receive_ring_per_connection, 1u, entries);
  }
}

IoUringBackend::~IoUringBackend() {
  recv_ring_.reset();
  io_uring_queue_exit(&ring_);  // before notify_fd_ closes: the ring has it registered
}

void IoUringBackend::refill_ring() noexcept {
  if (!recv_ring_) return;
  recv_ring_->bind_to_this_thread();
  recv_ring_->drain_returns();
}

void IoUringBackend::ensure_enabled() {
  if (!enabled_) {
    // The calling (loop) thread becomes the single issuer. liburing 2.3 declares
    // io_uring_enable_rings but does not export it: register directly.
    ::syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0);
    enabled_ = true;
  }
}

bool IoUringBackend::bulk_stream(const Operation& op) const {
  return op.length > recv_ring_->buffer_size() &&
         core_.last_read_bytes(op) >= recv_ring_->buffer_size();
}

bool IoUringBackend::ring_serves_multishot(Operation& op) {
  if (op.no_ring) return false;
  op.no_ring = true;
  if (!recv_ring_ || !multishot_ || !op.fd_is_socket) return false;
  // Read only by the attempt made off the ring. A bulk stream takes all that waits in one recv
  // of the size asked; off the ring for another reason, the arrival is likely small, and a
  // max_bytes buffer (the transport asks for its largest guess) would pin that much for it.
  op.small_read = !bulk_stream(op);
  if (!op.small_read) return false;
  if (ring_per_connection_ < recv_ring_->entries() &&
      recv_ring_->held(op.index, op.generation) >= ring_per_connection_) {
    return false;
  }
  if (recv_ring_->available() <= recv_ring_->entries() / 4) {
    AtomicCounters::add(core_.stats().ring_fallbacks, 1);
    return false;
  }
  op.no_ring = false;
  return true;
}

bool IoUringBackend::fill(Operation& op, io_uring_sqe& sqe) {
  sqe = io_uring_sqe{};
  if (op.family->multishot && op.family->sqe_select) {
    // receive_multishot: a multishot recv into the ring, or (false) readiness and one recv into
    // a pooled buffer.
    if (!ring_serves_multishot(op)) return false;
    op.family->sqe_select(sqe, op, recv_ring_->group(), recv_ring_->buffer_size());
    sqe.ioprio &= static_cast<std::uint16_t>(~refused_ioprio_[sqe.opcode]);
    if (!has_op_[sqe.opcode]) return false;
    AtomicCounters::add(core_.stats().multishot_arms, 1);
    return true;
  }
  if (!op.family->sqe) return false;
  if (op.zero_copy && op.fd_is_socket &&
      !(has_op_[IORING_OP_SEND_ZC] && has_op_[IORING_OP_SENDMSG_ZC])) {
    // The readiness fallback sends with plain syscalls by design: nothing to report there.
    if (readiness_only_)
      op.zero_copy = false;
    else
      zero_copy_fallback(op, "the ring has no IORING_OP_SEND_ZC");
  }
  if (recv_ring_ && op.family->sqe_select && op.fd_is_socket && op.bufs.empty() && !op.no_ring) {
    const LastRead* last = core_.last_read(op);
    if (last && *last == LastRead::filled && op.length > recv_ring_->buffer_size()) {
      // The last read filled its buffer, so more is likely waiting than one ring buffer holds
      // (a bulk stream): take all of it into a pooled buffer of the size asked, in one recv.
      // MSG_DONTWAIT keeps that buffer out of the kernel should the socket be empty after all:
      // EAGAIN (in complete()) sends the receive back to the ring, waiting for readiness.
      op.no_ring = true;
      op.speculative = true;
      AtomicCounters::add(core_.stats().speculative_receives, 1);
      op.family->sqe(sqe, op);
    } else if (recv_ring_->available() > recv_ring_->entries() / 4) {
      // A quarter of the ring stays for the receives that find it low: when handlers hold the
      // rest (a slow consumer), the others read into pooled buffers rather than wait on ENOBUFS.
      op.family->sqe_select(sqe, op, recv_ring_->group(), recv_ring_->buffer_size());
    } else {
      AtomicCounters::add(core_.stats().ring_fallbacks, 1);
      op.no_ring = true;
      op.family->sqe(sqe, op);
    }
  } else {
    op.family->sqe(sqe, op);
  }
  sqe.ioprio &= static_cast<std::uint16_t>(~refused_ioprio_[sqe.opcode]);
  return has_op_[sqe.opcode];
}

void IoUringBackend::submit_now() {
  ensure_enabled();
  AtomicCounters::add(core_.stats().kernel_entries, 1);
  io_uring_submit(&ring_);
}

io_uring_sqe* IoUringBackend::get_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (!sqe) {
    AtomicCounters::add(core_.stats().sq_full_submits, 1);
    submit_now();  // SQ full: hand what is there to the kernel and take the freed entry
    sqe = io_uring_get_sqe(&ring_);
  }
  return sqe;
}

bool IoUringBackend::waits_without_buffer(Operation& op) {
  if (op.family->multishot && op.family->sqe_select) {
    // receive_multishot keeps arrived buffers queued in bufs: only the ring decides. Off the
    // ring, a socket waits for readiness first also after a read that filled its buffer: the
    // poll checks the socket as it is armed, so bytes still there complete it in the submission
    // the loop's wait makes anyway, where a recv tried at once finds EAGAIN as often as not (a
    // peer that sends in bursts) and costs a system call and a pooled block each time.
    return op.fd_is_socket && !ring_serves_multishot(op);
  }
  if (!op.family->sqe_select || !op.fd_is_socket || !op.bufs.empty() || !op.poll_first) {
    return false;
  }
  if (recv_ring_ && !op.no_ring) {
    if (bulk_stream(op)) {
      // A bulk stream, drained: a ring receive would take one ring buffer's worth of the next
      // arrival and leave the rest to a second read (and the handler to a second pass). Wait
      // for readiness without a buffer instead, then take all that waits in one recv into a
      // pooled buffer of the size asked, as on epoll.
      AtomicCounters::add(core_.stats().bulk_receives, 1);
      op.no_ring = true;
      return true;
    }
    if (recv_ring_->available() > recv_ring_->entries() / 4) return false;  // a ring receive
    AtomicCounters::add(core_.stats().ring_fallbacks, 1);
    op.no_ring = true;
  }
  return true;
}

void IoUringBackend::start(Operation& op) {
  if (waits_without_buffer(op)) {
    arm_poll(op);
    return;
  }
  io_uring_sqe sqe;
  if (!fill(op, sqe)) {
    op.bstate = BackendState::ready;
    sync_ready_.push_back(&op);
    return;
  }
  queue(op, sqe);
}

bool IoUringBackend::prep(Operation& op) {
  io_uring_sqe sqe;
  if (op.bstate == BackendState::poll || waits_without_buffer(op) || !fill(op, sqe)) {
    return arm_poll(op);
  }
  return queue(op, sqe);
}

bool IoUringBackend::queue(Operation& op, const io_uring_sqe& prepared) {
  io_uring_sqe* sqe = get_sqe();
  if (!sqe) {
    op.bstate = BackendState::backlog;
    backlog_.push_back(&op);
    return false;
  }
  *sqe = prepared;
  io_uring_sqe_set_data64(sqe, op.user_data(tag_op));
  op.bstate = BackendState::sqe;
  return true;
}

bool IoUringBackend::arm_poll(Operation& op) {
  io_uring_sqe* sqe = get_sqe();
  if (!sqe) {
    op.bstate = BackendState::poll;  // remembered: the backlog re-arms a poll, not the op
    backlog_.push_back(&op);
    return false;
  }
  const pollfd wait = op.family->wait_for(op);
  io_uring_prep_poll_add(sqe, wait.fd, static_cast<unsigned>(wait.events));
  io_uring_sqe_set_data64(sqe, op.user_data(tag_poll));
  op.bstate = BackendState::poll;
  return true;
}

void IoUringBackend::cancel(Operation& op) {
  switch (op.bstate) {
    case BackendState::ready:
    case BackendState::backlog:
      if (op.blist) op.blist->remove(&op);
      op.bstate = BackendState::none;
      core_.on_result(op, -ECANCELED);
      return;
    case BackendState::sqe:
    case BackendState::poll: {
      submit_cancel(op.user_data(op.bstate == BackendState::sqe ? tag_op : tag_poll));
      return;
    }
    default: return;
  }
}

void IoUringBackend::forget_fd(int, bool) {
  // SQEs still in the SQ name the descriptor by number: they must reach the kernel before the
  // number can be closed and reused.
  if (io_uring_sq_ready(&ring_) > 0) submit_now();
}

void IoUringBackend::flush() {
  while (!pending_cancels_.empty()) {
    io_uring_sqe* sqe = get_sqe();
    if (!sqe) break;
    io_uring_prep_cancel64(sqe, pending_cancels_.back(), 0);
    io_uring_sqe_set_data64(sqe, tag_ignore);
    sqe->flags |= cancel_sqe_flags_;
    pending_cancels_.pop_back();
  }
  for (unsigned w = 1; w < 3; ++w) {
    if (internal_fd_[w] >= 0 && !internal_armed_[w]) arm_internal(w);
  }
  while (Operation* op = backlog_.head) {
    backlog_.remove(op);
    if (!prep(*op)) break;
  }
  while (Operation* op = sync_ready_.pop_front()) {
    op->bstate = BackendState::none;
    AtomicCounters::add(core_.stats().kernel_entries, 1);
    long r = attempt_sync(*op);
    if (r == -EAGAIN) {
      arm_poll(*op);
      continue;
    }
    core_.on_result(*op, r);
  }
}

void IoUringBackend::wait(std::chrono::nanoseconds timeout) {
  ensure_enabled();
  refill_ring();
  int r = 0;
  if (timeout.count() == 0) {
    AtomicCounters::add(core_.stats().kernel_entries, 1);
    io_uring_submit_and_get_events(&ring_);
  } else if (timeout.count() < 0) {
    // No deadline: one io_uring_enter that submits and waits, unless completions are there
    // already with nothing to submit (CQEs that came in after the last reap). The timeout
    // variant without a timespec does the same through liburing's get-CQE loop, which costs
    // more on every turn.
    if (io_uring_sq_ready(&ring_) != 0 || io_uring_cq_ready(&ring_) == 0) {
      AtomicCounters::add(core_.stats().kernel_entries, 1);
      r = io_uring_submit_and_wait(&ring_, 1);
    }
  } else {
    AtomicCounters::add(core_.stats().kernel_entries, 1);
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec ts{};
    ts.tv_sec = timeout.count() / 1000000000;
    ts.tv_nsec = timeout.count() % 1000000000;
    r = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
  }
  if (r == -EBUSY) io_uring_get_events(&ring_);  // CQ overflow backlog: reap, retry next turn
  reap();
  flush();
}

void IoUringBackend::reap() {
  for (;;) {
    // The CQEs in place (liburing's inline walk, not the out-of-line batch peek: this runs
    // every turn). handle() never reaps, and a slot is not reused before the advance.
    unsigned head = 0;
    unsigned n = 0;
    io_uring_cqe* cqe = nullptr;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      handle(cqe->user_data, cqe->res, cqe->flags);
      ++n;
    }
    io_uring_cq_advance(&ring_, n);
    if (!io_uring_cq_has_overflow(&ring_)) return;
    // Completions wait in the kernel's overflow list: into the CQ, now that it has room.
    AtomicCounters::add(core_.stats().cq_overflow_flushes, 1);
    AtomicCounters::add(core_.stats().kernel_entries, 1);
    io_uring_get_events(&ring_);
  }
}

void IoUringBackend::handle(std::uint64_t ud, int res, unsigned flags) {
  unsigned tag = ud & 3;
  if (tag == tag_ignore) return;
  if (tag == tag_internal) {
    unsigned which = static_cast<unsigned>((ud >> 2) & 0xff);
    internal_armed_[which] = false;
    arm_internal(which);
    core_.on_internal(static_cast<InternalFd>(which));
    return;
  }
  Operation* op = core_.find(static_cast<std::uint32_t>((ud >> 2) & 0x3fffffff),
                             static_cast<std::uint32_t>(ud >> 32));
  if (flags & IORING_CQE_F_BUFFER) {
    // The kernel took a ring buffer for this recv: it becomes the operation's, or goes back.
    const unsigned id = flags >> IORING_CQE_BUFFER_SHIFT;
    if (recv_ring_ && op && tag == tag_op && res > 0 && op->family->multishot) {
      // receive_multishot: queued behind the arrivals not yet handed over, counted as this
      // descriptor's until released.
      op->bufs.push_back(recv_ring_->take(id, op->index, op->generation));
      AtomicCounters::add(core_.stats().ring_receives, 1);
      const bool armed =
          (flags & IORING_CQE_F_MORE) && !op->stop_asked && op->state == OpState::in_kernel;
      if (armed && ring_per_connection_ < recv_ring_->entries() &&
          recv_ring_->held(op->index, op->generation) >= ring_per_connection_) {
        // Checked as CQEs arrive: one burst of the kernel may have taken a few more already.
        stop_multishot(*op, core_.stats().receive_bound_stops);
      } else if (armed && static_cast<std::size_t>(res) == recv_ring_->buffer_size() &&
                 op->length > recv_ring_->buffer_size()) {
        // An arrival that filled a whole ring buffer: more is waiting than one holds (a bulk
        // stream), and the kernel would hand it over a ring buffer at a time, a completion
        // and a pass of the handler each. Stop it: recorded as a full read, the re-arm goes
        // to readiness and one recv of the size asked, until a read finds less again.
        core_.record_read(op->home_fd, static_cast<std::size_t>(res),
                          static_cast<std::size_t>(res));
        stop_multishot(*op, core_.stats().bulk_receives);
      }
    } else if (recv_ring_ && op && tag == tag_op && res > 0 && op->bufs.empty()) {
      op->bufs.push_back(recv_ring_->take(id));
      AtomicCounters::add(core_.stats().ring_receives, 1);
    } else if (recv_ring_) {
      recv_ring_->give_back(id);
    }
  }
  if (!op) return;  // stale: nothing of this operation is live any more
  if (tag == tag_poll) {
    op->bstate = BackendState::none;
    if (res < 0)
      core_.on_result(*op, res);
    else if (op->state == OpState::cancelling)
      core_.on_result(*op, -ECANCELED);
    else {
      op->bstate = BackendState::ready;
      sync_ready_.push_back(op);
    }
    return;
  }
  if (op->zero_copy && op->fd_is_socket && tag == tag_op) {
    if (flags & IORING_CQE_F_NOTIF) {
      // The kernel let go of the send's pages: its result may now finish the write or send
      // the rest (which gets a notification of its own).
      res = op->value;
      flags = 0;
      if (res > 0) AtomicCounters::add(core_.stats().zero_copy_sends, 1);
    } else if (flags & IORING_CQE_F_MORE) {
      op->value = res;  // the pages are still in use: hold the result until the notification
      return;
    }
    if ((res == -EINVAL || res == -EOPNOTSUPP) && op->done == 0 &&
        op->state != OpState::cancelling) {
      // A socket (or kernel) without zero-copy sends: the same write, plainly.
      zero_copy_fallback(*op, res == -EINVAL ? "EINVAL" : "EOPNOTSUPP");
      prep(*op);
      return;
    }
  }
  bool more = (flags & IORING_CQE_F_MORE) != 0;
  if (!more && tag == tag_op) op->stop_asked = false;  // whatever ended it, the stop is done
  if (res == -ENOBUFS) AtomicCounters::add(core_.stats().ring_exhausted, 1);
  if (res == -ENOBUFS && op->family->sqe_select && !op->no_ring &&
      op->state != OpState::cancelling) {
    // The ring ran dry between submission and arrival (a multishot: while it was armed): the
    // bytes wait in the socket; the same receive reads them with a pooled buffer.
    AtomicCounters::add(core_.stats().ring_fallbacks, 1);
    op->no_ring = true;
    prep(*op);
    return;
  }
  if (res == -EAGAIN && op->speculative && op->state != OpState::cancelling) {
    // The speculative receive found the socket empty: its pooled buffer goes back, and the
    // receive waits for the bytes in the ring, as on a drained socket.
    op->speculative = false;
    op->no_ring = false;
    op->poll_first = true;
    if (LastRead* last = core_.last_read(*op)) *last = LastRead::drained;
    op->drop_bufs();
    AtomicCounters::add(core_.stats().speculative_misses, 1);
    prep(*op);
    return;
  }
  io_uring_sqe again;
  if (res == -EINVAL && op->state != OpState::cancelling && fill(*op, again) && again.ioprio) {
    // A kernel without multishot accept or IORING_RECVSEND_POLL_FIRST: this attempt again, and
    // every later one of the opcode, without the flag (one accept at a time, recv first).
    refused_ioprio_[again.opcode] |= again.ioprio;
    prep(*op);
    return;
  }
  if (res == -EAGAIN && !more && op->state != OpState::cancelling) {
    // A non-blocking descriptor the kernel would not wait on for us (pipes with O_NONBLOCK):
    // wait for readiness and retry with a plain syscall.
    arm_poll(*op);
    return;
  }
  if (!more) op->bstate = BackendState::none;
  core_.on_result(*op, res, more);
}

void IoUringBackend::stop_multishot(Operation& op, std::atomic<std::uint64_t>& counter) {
  op.stop_asked = true;
  AtomicCounters::add(counter, 1);
  submit_cancel(op.user_data(tag_op));
}

void IoUringBackend::submit_cancel(std::uint64_t target) {
  io_uring_sqe* sqe = get_sqe();
  if (!sqe) {
    pending_cancels_.push_back(target);  // sent when the SQ has room again
    return;
  }
  io_uring_prep_cancel64(sqe, target, 0);
  io_uring_sqe_set_data64(sqe, tag_ignore);
  sqe->flags |= cancel_sqe_flags_;
}

void IoUringBackend::zero_copy_fallback(Operation& op, std::string_view why) {
  op.zero_copy = false;
  AtomicCounters::add(core_.stats().zero_copy_fallbacks, 1);
  static std::once_flag once;
  std::call_once(once, [&] {
    log(LogLevel::warn, "zero-copy send unavailable ({}): such writes are sent plainly", why);
  });
}

bool IoUringBackend::arm_internal(unsigned which) {
  io_uring_sqe* sqe = get_sqe();
  if (!sqe) return false;
  io_uring_prep_read(sqe, internal_fd_[which], &internal_buf_[which], sizeof internal_buf_[which],
                     0);
  io_uring_sqe_set_data64(sqe, (std::uint64_t{which} << 2) | tag_internal);
  internal_armed_[which] = true;
  return true;
}

void IoUringBackend::watch_internal(int fd, InternalFd which) {
  internal_fd_[static_cast<unsigned>(which)] = fd;
  arm_internal(static_cast<unsigned>(which));
}

int IoUringBackend::pollable_fd() {
  if (!notify_fd_) {
    notify_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!notify_fd_) throw std::system_error(errno, std::generic_category(), "eventfd");
    int r = io_uring_register_eventfd(&ring_, notify_fd_.get());
    if (r < 0) throw std::system_error(-r, std::generic_category(), "io_uring_register_eventfd");
    std::uint64_t one = 1;  // the host's first look finds work: the first turn submits
    [[maybe_unused]] auto w = ::write(notify_fd_.get(), &one, sizeof one);
  }
  return notify_fd_.get();
}

void IoUringBackend::submit_pending() {
  refill_ring();
  flush();
  if (io_uring_sq_ready(&ring_) > 0) submit_now();
}

void IoUringBackend::clear_pollable() {
  std::uint64_t v;
  if (notify_fd_) [[maybe_unused]]
    auto r = ::read(notify_fd_.get(), &v, sizeof v);
}

}  // namespace niox::detail
