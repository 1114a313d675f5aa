// The stream family: read and write at a descriptor's current position; a read completes with
// what arrived, a write once every byte is written; receive_multishot hands over each arrival
// until it is stopped. A zero-copy write's send reaches result()
// only with its notification (the io_uring backend holds the send's result until then), so the
// rest of a short one is sent, and the write finished, only once the kernel let go of the pages.
#include "loop/ops/family.hpp"

#include "loop/buffer_ring.hpp"

#include <niox/buffer/buffer_pool.hpp>

#include <sys/socket.h>
#include <unistd.h>

namespace niox::detail {

namespace {
// A socket the last read drained gets its poll armed at once (IORING_RECVSEND_POLL_FIRST, or
// epoll's wait) instead of a recv attempt that would only find EAGAIN.
void poll_first_if_drained(LoopCore& core, Operation& op) {
  const LastRead* last = core.last_read(op);
  op.poll_first = op.fd_is_socket && last && *last == LastRead::drained;
}
// A read that got less than it could take drained the socket; one that got all of it filled
// its buffer.
void record_last_read(LoopCore& core, const Operation& op, long res, std::size_t asked) {
  if (op.home_fd >= 0 && res >= 0)
    core.record_read(op.home_fd, static_cast<std::size_t>(res), asked);
}
}  // namespace

const OpFamily read_family{.lane = Lane::read,
                           .side = SideUse::many_buffers,
                           .fills_buffers = true,
                           .prepare =
                               [](LoopCore& core, Operation& op) {
                                 if (!prepare_iovecs(core, op, true)) return false;
                                 op.length = 0;
                                 for (int i = 0; i < op.iovcnt; ++i)
                                   op.length += op.iov()[i].iov_len;
                                 poll_first_if_drained(core, op);
                                 return true;
                               },
                           .wait_for = wait_in,
                           .edge = edge_in,
                           .sqe =
                               [](io_uring_sqe& sqe, Operation& op) {
                                 const iovec& v = op.iov()[0];
                                 if (op.fd_is_socket && op.iovcnt == 1) {
                                   io_uring_prep_recv(&sqe, op.fd, v.iov_base, v.iov_len, 0);
                                   if (op.poll_first) sqe.ioprio |= IORING_RECVSEND_POLL_FIRST;
                                 } else if (op.iovcnt == 1) {
                                   io_uring_prep_read(&sqe, op.fd, v.iov_base,
                                                      static_cast<unsigned>(v.iov_len), no_offset);
                                 } else {
                                   io_uring_prep_readv(&sqe, op.fd, op.iov(), op.iovcnt, no_offset);
                                 }
                               },
                           .attempt = [](Operation& op) -> long {
                             const iovec& v = op.iov()[0];
                             long r = op.iovcnt > 1     ? ::readv(op.fd, op.iov(), op.iovcnt)
                                      : op.fd_is_socket ? ::recv(op.fd, v.iov_base, v.iov_len, 0)
                                                        : ::read(op.fd, v.iov_base, v.iov_len);
                             op.short_read = r > 0 && static_cast<std::size_t>(r) < op.length;
                             return r;
                           },
                           .result =
                               [](LoopCore& core, Operation& op, long res, bool) {
                                 advance_by(core, op, res, true);
                                 record_last_read(core, op, res, op.length);
                                 finish_with(core, op, res);
                               }};

namespace {
// Both receives: nothing to take is no receive; the ring may serve each new attempt again.
bool prepare_receive(LoopCore& core, Operation& op) {
  if (op.length == 0) return false;
  // A receive brings no buffer and may wait long for one (an idle connection's): the room its
  // pooled operation kept from an earlier use goes back to the cache, and what arrives takes
  // room then. Other operations keep theirs, so a write costs no cache trip. (A re-armed
  // multishot receive may still hold arrivals not yet handed over: those stay.)
  if (op.bufs.empty()) op.drop_bufs();
  op.no_ring = false;
  op.speculative = false;
  poll_first_if_drained(core, op);
  return true;
}
}  // namespace

// receive: read's rules with a buffer taken from the loop thread's pool at the attempt itself,
// and given back when the attempt found nothing, so nothing is held while the socket waits.
namespace {
ByteBuffer& receive_buffer(Operation& op) {
  if (op.bufs.empty()) op.bufs.push_back(BufferPool::for_this_thread().allocate(op.length));
  return op.bufs[0];
}
}  // namespace

const OpFamily receive_family{
    .lane = Lane::read,
    .prepare = prepare_receive,
    .wait_for = wait_in,
    .edge = edge_in,
    .sqe =
        [](io_uring_sqe& sqe, Operation& op) {
          ByteBuffer& b = receive_buffer(op);
          if (op.fd_is_socket) {
            io_uring_prep_recv(&sqe, op.fd, b.writable_bytes().data(), b.remaining(),
                               op.speculative ? MSG_DONTWAIT : 0);
            if (op.poll_first) sqe.ioprio |= IORING_RECVSEND_POLL_FIRST;
          } else {
            io_uring_prep_read(&sqe, op.fd, b.writable_bytes().data(),
                               static_cast<unsigned>(b.remaining()), no_offset);
          }
        },
    .sqe_select =
        [](io_uring_sqe& sqe, Operation& op, std::uint16_t group, std::size_t max) {
          io_uring_prep_recv(&sqe, op.fd, nullptr, std::min(op.length, max), 0);
          sqe.flags |= IOSQE_BUFFER_SELECT;
          sqe.buf_group = group;
          if (op.poll_first) sqe.ioprio |= IORING_RECVSEND_POLL_FIRST;
        },
    .attempt = [](Operation& op) -> long {
      ByteBuffer& b = receive_buffer(op);
      void* at = b.writable_bytes().data();
      const std::size_t room = b.remaining();
      long r = op.fd_is_socket ? ::recv(op.fd, at, room, 0) : ::read(op.fd, at, room);
      op.short_read = r > 0 && static_cast<std::size_t>(r) < room;
      if (r <= 0) {
        const int saved = errno;
        op.drop_bufs();  // nothing arrived: the block goes back to the pool, and the room too
        errno = saved;
      }
      return r;
    },
    .result =
        [](LoopCore& core, Operation& op, long res, bool) {
          if (res <= 0) op.drop_bufs();  // end of stream, error or abort: no bytes to hand over
          // What the attempt could take: max_bytes, or less when a ring buffer was smaller.
          const std::size_t asked =
              op.bufs.empty() ? op.length : std::min(op.length, op.bufs[0].capacity());
          advance_by(core, op, res, true);
          record_last_read(core, op, res, asked);
          finish_with(core, op, res);
        }};

// receive_multishot: one armed receive per descriptor that hands each arrival over as it comes.
// On io_uring with a buffer ring it is one IORING_OP_RECV with IORING_RECV_MULTISHOT: the
// kernel fills a ring buffer per arrival and keeps it armed. Whatever ends it without ending
// the stream (the ring ran dry, a CQE without F_MORE, the backend stopping it because the
// connection holds its share of the ring) re-arms it; attempts without the ring wait for
// readiness and read into a pooled buffer, one at a time. The buffers arrived and not yet
// handed over queue in op.bufs, in order, until the completion phase hands them one by one.
namespace {
long multishot_attempt(Operation& op) {
  const std::size_t want =
      op.small_read ? std::min(op.length, BufferRing::default_buffer_size) : op.length;
  ByteBuffer b = BufferPool::for_this_thread().allocate(want);
  void* at = b.writable_bytes().data();
  const std::size_t room = std::min(want, b.remaining());
  long r = op.fd_is_socket ? ::recv(op.fd, at, room, 0) : ::read(op.fd, at, room);
  const int saved = errno;
  op.short_read = r > 0 && static_cast<std::size_t>(r) < room;
  if (r > 0) {
    op.bufs.push_back(std::move(b));
  } else {
    b = ByteBuffer();  // nothing arrived: the block goes back to the pool
  }
  errno = saved;
  return r;
}

void rearm(LoopCore& core, Operation& op) {
  if (op.state == OpState::cancelling) return core.finish(&op, operation_aborted());
  core.begin_attempt(&op);  // nothing else of the read lane runs meanwhile: order holds
}
}  // namespace

const OpFamily receive_multishot_family{
    .lane = Lane::read,
    .multishot = true,
    .zero_ends = true,
    .prepare = prepare_receive,
    .wait_for = wait_in,
    .edge = edge_in,
    .sqe_select =
        [](io_uring_sqe& sqe, Operation& op, std::uint16_t group, std::size_t) {
          // len 0: each arrival takes up to a whole ring buffer (kernels refuse a length on a
          // multishot recv).
          io_uring_prep_recv_multishot(&sqe, op.fd, nullptr, 0, 0);
          sqe.flags |= IOSQE_BUFFER_SELECT;
          sqe.buf_group = group;
          if (op.poll_first) sqe.ioprio |= IORING_RECVSEND_POLL_FIRST;
        },
    .attempt = multishot_attempt,
    .result =
        [](LoopCore& core, Operation& op, long res, bool more) {
          if (res > 0 && op.bufs.empty()) res = -EIO;  // bytes without a buffer: never expected
          if (res > 0) {
            // The arrival is the last buffer queued (a ring buffer the backend took, or the
            // attempt's pooled one).
            ByteBuffer& b = op.bufs.back();
            b.position(static_cast<std::size_t>(res));
            AtomicCounters::add(core.stats().bytes_read, static_cast<std::uint64_t>(res));
            if (!more) record_last_read(core, op, res, std::min(op.length, b.capacity()));
            core.push_completed(&op);
            // Re-armed once the handler has seen this arrival (interim), so that a handler that
            // pauses is heard before the next read is started. Re-armed here, an echo server
            // whose peer sent a bulk stream and read nothing kept reading all of it.
            if (!more) op.rearm_due = true;
            return;
          }
          // A recv multishot ends on end of stream and on every error; F_MORE comes with bytes.
          if (more) return;
          if (res == -ECANCELED && op.state == OpState::in_kernel) {
            // Not the caller's cancel (that one marks it cancelling): the backend stopped it
            // for the per-connection bound, and it goes on without the ring.
            return rearm(core, op);
          }
          finish_with(core, op, res);
        },
    .interim =
        [](LoopCore& core, Operation& op) {
          std::size_t n = 0;
          Completion c;
          // By index: a handler that cancels or closes never adds to the queue meanwhile.
          for (; n < op.bufs.size(); ++n) {
            c = Completion{};
            c.bytes = op.bufs[n].position();
            c.buffers = std::span<ByteBuffer>(&op.bufs[n], 1);
            c.value = static_cast<int>(op.bufs.size() - n - 1);  // queued behind this one
            core.hand(op, c);
            if (c.stop) core.abort(&op);
          }
          op.drop_bufs();  // it stays armed, maybe idle for long
          if (op.rearm_due) {
            op.rearm_due = false;
            rearm(core, op);  // or ends it, when the handler asked for no more
          }
          return n;
        }};

const OpFamily write_family{
    .lane = Lane::write,
    .side = SideUse::many_buffers,
    .prepare = [](LoopCore& core, Operation& op) { return prepare_iovecs(core, op, false); },
    .wait_for = wait_out,
    .edge = edge_out,
    .sqe =
        [](io_uring_sqe& sqe, Operation& op) {
          const iovec& v = op.iov()[0];
          const int send_flags = MSG_NOSIGNAL | (op.more ? MSG_MORE : 0);
          if (op.zero_copy && op.fd_is_socket && op.iovcnt == 1)
            io_uring_prep_send_zc(&sqe, op.fd, v.iov_base, v.iov_len, send_flags, 0);
          else if (op.zero_copy && op.fd_is_socket)
            io_uring_prep_sendmsg_zc(&sqe, op.fd, &op.side->msg, send_flags);
          else if (op.fd_is_socket && op.iovcnt == 1)
            io_uring_prep_send(&sqe, op.fd, v.iov_base, v.iov_len, send_flags);
          else if (op.fd_is_socket)
            io_uring_prep_sendmsg(&sqe, op.fd, &op.side->msg, send_flags);
          else if (op.iovcnt == 1)
            io_uring_prep_write(&sqe, op.fd, v.iov_base, static_cast<unsigned>(v.iov_len),
                                no_offset);
          else
            io_uring_prep_writev(&sqe, op.fd, op.iov(), op.iovcnt, no_offset);
        },
    .attempt = [](Operation& op) -> long {
      const int flags = MSG_NOSIGNAL | (op.more ? MSG_MORE : 0);
      const iovec& v = op.iov()[0];
      if (op.fd_is_socket && op.iovcnt > 1) return ::sendmsg(op.fd, &op.side->msg, flags);
      if (op.fd_is_socket) return ::send(op.fd, v.iov_base, v.iov_len, flags);
      return op.iovcnt == 1 ? ::write(op.fd, v.iov_base, v.iov_len)
                            : ::writev(op.fd, op.iov(), op.iovcnt);
    },
    .result =
        [](LoopCore& core, Operation& op, long res, bool) {
          advance_by(core, op, res, false);
          write_rest(core, op, res);
        }};

}  // namespace niox::detail
