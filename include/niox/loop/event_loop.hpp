// niox::EventLoop — one thread, one loop, completion callbacks over io_uring or epoll.
//
// A loop turn
// -----------
//
//        +--------------------------------------------------------------------+
//        |  1. run tasks        the loop's own execute()s (no lock), then the  |
//        |                      other threads' (swapped out under a mutex)     |
//        |  2. start ops        ops queued since the last turn go to the       |
//        |                      backend: SQEs prepared (io_uring) or tried at  |
//        |                      once until EAGAIN (epoll)                      |
//        |  3. kernel           ONE io_uring_submit_and_wait_timeout / ONE     |
//        |                      epoll_wait; the timeout is 0 when work is      |
//        |                      already waiting, else the next timer deadline  |
//        |  4. reap             CQEs / ready descriptors -> results; short     |
//        |                      writes resubmitted in order, finished ops      |
//        |                      queued                                         |
//        |  5. completions      handlers run, each exactly once                |
//        |  6. timers           expired timers run, periodic ones re-armed     |
//        +--------------------------------------------------------------------+
//
// Operations.  Every operation takes a descriptor the caller owns, its buffers by value and a
// move-only handler. It returns an OperationHandle for cancel(). The handler runs exactly once
// (accept_multishot and receive_multishot: once per connection or arrival, then once with the
// final error), always on the loop
// thread, never inside the call that started the operation. Handlers are stored inline in a
// pooled operation object: once the pool is warm, starting and completing an operation
// allocates nothing (handlers capturing more than 40 bytes, or an over-aligned capture, take one
// heap block).
//
// Ordering.  Per descriptor, reads (read, receive, recvmsg, transfer_from out of it) complete
// in the order they were started, and so do writes (write, sendmsg, transfer_to into it): a
// loop keeps one read and one write in the kernel per descriptor and starts the next when the
// previous one finishes.
// write() completes when every remaining byte is written (or with the error that stopped it);
// read() completes as soon as some bytes arrived. End of stream is a read completing with 0
// bytes and no error.
//
// Buffers.  A ByteBuffer handed to an operation is held by the operation (a ByteBuffer copy
// shares the memory, so the bytes stay alive) until its handler has run, also when the
// operation is cancelled or its descriptor or loop closed: io_uring may write into it until
// its CQE arrives. Positions are advanced by exactly the bytes moved before the handler sees
// the buffers; the handler gets them back (by value for one buffer, as a span into the
// operation for many: move out what you want to keep, the span dies when the handler returns).
// Memory from ByteBuffer::wrap() is the caller's to keep alive until then.
//
// Descriptors.  The caller opens descriptors (non-blocking, O_CLOEXEC) and owns them, as a
// FileDescriptor (niox/base/file_descriptor.hpp): an operation only borrows the number, which
// must stay open until the operation's handler has run or the descriptor was closed through the
// loop. The epoll backend switches a blocking one to non-blocking. The loop closes a descriptor
// only when it is given one, with close(FileDescriptor), and that is how every descriptor that
// has been used with a loop is closed: it aborts what is pending on the descriptor (each
// handler gets operation_aborted once, later, when the kernel has let go of the buffers), then
// closes it, so that no stale completion ever touches a new descriptor that gets the same
// number. release(const FileDescriptor&) does the same aborts and forgets the descriptor, which
// stays open and the caller's (to hand it to another library). A transfer_to belongs to its
// output descriptor and a transfer_from to its socket: closing that one aborts it, closing the
// file does not (the file must stay open until the handler has run). Closing the loop
// (destructor or shutdown) aborts everything the same way and closes no caller's descriptor.
//
// Threads.  run()/run_once() and every operation-starting call happen on the loop thread (or
// before the loop first runs). Started from any other thread once the loop has run, an
// operation throws IllegalStateException at once (hand the work over with execute()). From any
// thread: execute(), schedule(), schedule_at_fixed_rate(), ScheduledFuture::cancel(), stop(),
// counters(). Handlers must not block: waiting for a future on a loop thread throws
// BlockingOperationException. Nothing throws across the loop: an exception escaping a handler
// or task is reported through the log sink (niox/base/log.hpp) and the loop goes on (the
// handler still counts as run).
//
// Backends.  io_uring when a ring can be created (SINGLE_ISSUER|DEFER_TASKRUN where available,
// COOP_TASKRUN otherwise), else epoll (edge-triggered), said once through the log sink.
// NIOX_BACKEND=io_uring|epoll|auto overrides the automatic choice; Options::backend overrides
// both. backend() says which one runs.
//
// Embedding.  pollable_fd() becomes readable whenever the loop has work (a completion, a due
// timer, a task); a host loop polls it and calls run_once(0ms). See examples/asio_embed.cpp.
#pragma once

#include <niox/base/file_descriptor.hpp>
#include <niox/buffer/byte_buffer.hpp>
#include <niox/channels/socket_address.hpp>
#include <niox/channels/transfer_path.hpp>
#include <niox/loop/detail/unique_function.hpp>
#include <niox/loop/errors.hpp>
#include <niox/loop/executor.hpp>
#include <niox/loop/loop_counters.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <system_error>
#include <type_traits>

#include <sys/socket.h>
#include <sys/uio.h>

namespace niox {

enum class BackendKind : std::uint8_t { automatic, io_uring, epoll };
std::string_view to_string(BackendKind) noexcept;

// Names a started operation or timer for cancel(). A default-constructed handle names nothing;
// a handle whose operation has completed names nothing either (cancel returns false).
struct OperationHandle {
  std::uint32_t index = 0;
  std::uint32_t generation = 0;  // 0 = none
  explicit operator bool() const noexcept { return generation != 0; }
  friend bool operator==(OperationHandle, OperationHandle) = default;
};

class EventLoop;

namespace detail {
class LoopCore;
// Not API: the transport's word that `fd` is a socket accept4 just made (SOCK_NONBLOCK), so
// that `loop` neither fstat()s it nor, on epoll, fcntl()s it on its first operation, and its
// first read waits for the bytes instead of trying a recv first. On the loop thread, before
// that operation; forgotten with the descriptor.
void declare_accepted_socket(EventLoop& loop, int fd);
// Not API: what owns a descriptor on a loop and is closed by the loop's shutdown (the
// transport's socket channels).
class ClosedAtShutdown {
 public:
  // On the loop thread, from shutdown(), before it aborts what is pending: so that a channel
  // waiting on no operation (reading paused, half-closed) is closed like one whose pending read
  // the abort ends.
  virtual void close_at_loop_shutdown() noexcept = 0;

 protected:
  ~ClosedAtShutdown() = default;
};
// Not API: `owner` owns `fd` on `loop` until the descriptor is closed or released through the
// loop, which forgets the owner. On the loop thread.
void close_at_shutdown(EventLoop& loop, int fd, ClosedAtShutdown& owner);

// What an operation hands its handler. Lives in the pooled operation object.
struct Completion {
  std::error_code ec;
  std::size_t bytes = 0;
  int value = 0;      // poll revents, recvmsg flags, TransferPath
  FileDescriptor fd;  // accept: the new connection, moved into the handler
  std::span<ByteBuffer> buffers;
  const sockaddr_storage* peer = nullptr;
  socklen_t peer_len = 0;
  bool stop = false;  // receive_multishot: the handler asked for no more
};
// Every pending operation carries one, an idle connection's receive too, so the room is what
// the library's own handlers need: a shared_ptr and a few words (the largest, a timer's, is a
// pointer, a shared_ptr and a flag); captures of 8-byte alignment keep it at 48 bytes.
using CompletionFn = UniqueFunction<void(Completion&), 40, alignof(void*)>;

enum class OpKind : std::uint8_t {
  read,
  receive,
  receive_multishot,
  write,
  accept,
  accept_multishot,
  connect,
  recvmsg,
  sendmsg,
  poll,
  read_at,
  write_at,
  transfer_to,
  transfer_from,
  timer,
};

// Everything an operation needs besides its handler.
struct OpArgs {
  OpKind kind;
  int fd = -1;
  int fd_out = -1;                         // transfers: the output
  std::int64_t offset = -1;                // read_at/write_at; transfers: where the input is read
  std::int64_t offset_out = -1;            // transfers: where the output is written
  std::size_t length = 0;                  // transfers: the byte count; receive: the most
  int events = 0;                          // poll mask
  ByteBuffer* single = nullptr;            // one buffer, moved into the operation
  std::span<const ByteBuffer> many{};      // many buffers, copied (shared memory) into it
  const SocketAddress* address = nullptr;  // connect, sendmsg destination
  std::chrono::nanoseconds delay{};        // timers
  std::chrono::nanoseconds period{};       // periodic timers (0 = one-shot)
  bool more = false;                       // write on a socket: MSG_MORE
  bool zero_copy = false;                  // write on a socket: WriteFlags::zero_copy
};
}  // namespace detail

// How a write to a socket is sent; the flags combine with |. Ignored where the descriptor is
// not a socket.
//
// `more` is MSG_MORE on each of its sends: the kernel keeps the write's last partial segment
// back for the bytes that follow at once, so that a response's header and the first bytes of
// its file body leave as one segment. The caller must send those bytes next: a write without
// `more`, or transfer_to, whose last sendfile call pushes. Until then the held bytes wait (Linux
// sends them after about 200 ms, with its zero-window probe).
//
// `zero_copy` sends with IORING_OP_SEND_ZC / SENDMSG_ZC: the kernel transmits from the buffers'
// pages instead of copying them into socket memory. The write still completes, and its buffers
// are released, only once the kernel has said it is done with every page (the notification
// after each send), so the buffer rules above hold unchanged; the bytes simply stay in use
// longer. Worth it for large buffers on a real network device (pinning pages costs more than
// copying a few KiB; on loopback the kernel copies anyway). io_uring only: epoll and the
// io_uring readiness fallback send plainly, and so does a ring without the opcodes or a socket
// that refuses them (EINVAL, EOPNOTSUPP: that write is sent again plainly), the first such
// fallback reported through the log sink. LoopCounters::zero_copy_sends and zero_copy_fallbacks
// say which path ran.
enum class WriteFlags : std::uint8_t { none = 0, more = 1, zero_copy = 2 };
constexpr WriteFlags operator|(WriteFlags a, WriteFlags b) noexcept {
  return static_cast<WriteFlags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
constexpr bool has_flag(WriteFlags flags, WriteFlags one) noexcept {
  return (static_cast<unsigned>(flags) & static_cast<unsigned>(one)) != 0;
}

class EventLoop final : public Executor {
 public:
  struct Options {
    // automatic: NIOX_BACKEND, else io_uring, else epoll. A named backend that cannot be used
    // makes the constructor throw std::system_error.
    BackendKind backend = BackendKind::automatic;
    // io_uring submission queue entries (the completion queue gets twice as many). Tiny values
    // are for tests that force a full SQ and CQ overflow.
    unsigned ring_entries = 256;
    // epoll events reaped per epoll_wait.
    unsigned epoll_batch = 256;
    // io_uring: run every operation through the per-operation fallback (POLL_ADD, then one
    // non-blocking syscall), as on a kernel that lacks the I/O opcodes. For tests and for
    // working around a kernel whose opcode misbehaves; slower.
    bool io_uring_readiness_only = false;
    // io_uring: buffers of the provided buffer ring receive() takes from when bytes arrive (a
    // power of two; 16 KiB each, resident only once used). 0: no ring, every receive brings a
    // pooled buffer to its recv. Ignored where the kernel has no buffer rings (before 5.19).
    unsigned receive_ring_entries = 128;
    // io_uring: ring buffers one descriptor's receive_multishot may have out at once (handed
    // over and not yet released, or queued for its handler). At the bound the kernel stops
    // filling ring buffers for it: its multishot is stopped, and its reads wait for readiness
    // and bring pooled buffers until it has released some. So one connection whose
    // application holds what it reads cannot take the ring from the others. Checked as
    // arrivals come in: one burst of the kernel may take a few buffers past it before the stop
    // lands. At least 1; receive_ring_entries or more: no bound but the ring itself. The
    // default is an eighth of the default ring (256 KiB).
    unsigned receive_ring_per_connection = 16;
    // io_uring: receive_multishot (and so a transport channel's reads) keeps one multishot
    // recv armed per descriptor, each arrival a buffer of the ring (has_multishot_receive()).
    // It saves a submission and a poll arm per small read; a bulk stream leaves the ring for
    // single recvs of max_bytes (see receive_multishot). Off, receive_multishot reads on
    // readiness into pooled buffers, as on epoll.
    bool multishot_receive = true;
  };

  EventLoop();
  explicit EventLoop(Options options);
  // Aborts every pending operation and timer (handlers run with operation_aborted), waits
  // until the kernel has released their buffers, then frees everything. Must run on the loop
  // thread, not while run() is active.
  ~EventLoop() override;

  // Whether `kind` can run on this machine (io_uring: a ring can be created).
  static bool backend_available(BackendKind kind);
  BackendKind backend() const noexcept;

  // ---- Running ---------------------------------------------------------------------------
  // Runs turns until stop(). Binds the loop to the calling thread.
  void run();
  // One turn, waiting at most `timeout` for something to happen (0 = never blocks). Returns the
  // number of handlers, tasks and timers run.
  std::size_t run_once(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // Thread-safe. run() returns after finishing the current turn's queued tasks.
  void stop();
  // Closes the transport channels on this loop, aborts every pending operation and timer and
  // runs their handlers (operation_aborted), runs the queued tasks, and returns once the kernel
  // holds nothing of this loop. Operations started afterwards complete with operation_aborted.
  // On the loop thread, outside run().
  void shutdown();
  // Whether the calling thread is the one the loop runs on (bound by run()/run_once()).
  bool in_event_loop() const noexcept override;
  // On the loop thread: the clock as first read after the turn's wait (by the timers, or by a
  // first now()), kept for the rest of the turn, as nginx keeps its clock: a handler that
  // stamps every connection reads no clock, and the stamp is early by at most the time the
  // turn has run. Timers fire against the same reading, so one never fires before now() +
  // delay. Elsewhere: the clock itself.
  Clock::time_point now() const noexcept override;

  // Thread-safe. Runs `task` on the loop thread in a later turn, in the order submitted. Wakes
  // a sleeping loop with one eventfd write, skipped when a wake-up is already on its way.
  void execute(Runnable task) override;

  // ---- Stream I/O ------------------------------------------------------------------------
  // Reads into buf's [position, limit); handler(std::error_code, std::size_t n, ByteBuffer buf).
  // n == 0 without an error is end of stream.
  template <class H>
  OperationHandle read(int fd, ByteBuffer buf, H&& handler) {
    return start_single(detail::OpKind::read, fd, std::move(buf), std::forward<H>(handler));
  }
  // Receives up to max_bytes into a buffer the loop takes from its thread's BufferPool only
  // when bytes can be read: handler(ec, n, ByteBuffer buf), buf's [0, n) the bytes (position
  // n, as after read()). n == 0 without an error is end of stream; the buffer is empty then,
  // and on an error or abort. So a descriptor that waits costs no buffer: on epoll and on
  // io_uring's readiness fallback the buffer is taken after readiness; on io_uring proper the
  // kernel picks one of the loop's buffer ring (Options::receive_ring_entries) when the bytes
  // arrive, and its capacity is the ring's buffer size. A ring running low (under a quarter
  // left, while handlers hold the rest) or absent makes a receive bring a pooled buffer to its
  // recv instead, and one on a socket its last read drained waits for readiness first, so
  // that no pooled buffer waits in the kernel for a quiet socket. When the descriptor's last
  // read filled its buffer and max_bytes is more than a ring buffer holds (a bulk stream), the
  // receive tries the socket at once with a pooled buffer of max_bytes (MSG_DONTWAIT) and,
  // should the socket be empty, gives it back and waits in the ring as above
  // (LoopCounters::speculative_receives / speculative_misses). A receive on a socket that its
  // last read drained after taking more than a ring buffer holds (a bulk stream between
  // bursts) waits for readiness without a buffer, then takes all that waits into a pooled
  // buffer of max_bytes in one recv (LoopCounters::bulk_receives). The handler owns the buffer,
  // wherever it came from: a ring buffer goes back to the ring when its last view is
  // released, on any thread. max_bytes == 0 reads nothing and completes at once.
  template <class H>
  OperationHandle receive(int fd, std::size_t max_bytes, H&& handler) {
    detail::OpArgs a{detail::OpKind::receive, fd};
    a.length = max_bytes;
    return start(a, [h = std::forward<H>(handler)](detail::Completion& c) mutable {
      h(c.ec, c.bytes, c.buffers.empty() ? ByteBuffer() : std::move(c.buffers[0]));
    });
  }
  // One recv(MSG_DONTWAIT) on socket fd, now, into dst's room (from position to limit):
  // the bytes read (dst's position advanced by them), 0 when none were waiting or on an error
  // (ec set then), -1 at end of stream. EINTR is retried. The caller keeps dst throughout;
  // a read-only dst throws ReadOnlyBufferException. On the loop thread.
  // It is the read loop's follow-up after receive() completed with a full buffer: unlike a
  // plain recv, the loop learns whether this read drained the socket (it got less than the
  // room), and the next receive() on fd goes by that.
  std::int64_t receive_now(int fd, ByteBuffer& dst, std::error_code& ec);
  // Sends the buffers' remaining bytes on socket fd now, without blocking (MSG_DONTWAIT), when
  // no write of fd is queued or in the kernel: one send for one buffer, one sendmsg for several
  // (small ones copied together, as SocketChannel's gathering write does). Returns the bytes
  // written, each buffer's position advanced by exactly what it gave; 0 when a write is pending
  // or nothing could be written now (the socket full, or an error, which the loop's write()
  // then reports): write() the rest. The fast path of a write that usually completes at once,
  // on both backends: on io_uring the same send through the ring costs a submission, a
  // completion and a pass of the loop before its caller goes on. On the loop thread.
  std::size_t write_now(int fd, std::span<ByteBuffer> bufs);
  // The same for a gathering write already built (OutboundBuffer::gather's iovecs): one send or
  // sendmsg of exactly these bytes, nothing copied; the memory is the caller's and only read
  // during the call. Returns the bytes written (0 as above); the caller advances its buffers by
  // that many. WriteFlags::more sends with MSG_MORE; zero_copy is the loop's write()'s alone.
  std::size_t write_now(int fd, std::span<const iovec> iov, WriteFlags flags = WriteFlags::none);
  // Receives until stopped: handler(ec, n, ByteBuffer buf) once per arrival, each buffer as
  // receive() hands it ([0, n) the bytes, position n, the handler's to keep, a ring buffer back
  // to the ring when its last view is released), in the order the bytes came, then once more
  // with the end: n == 0 without an error at end of stream, operation_aborted after cancel()
  // or close(), or the error that ended it (the buffer empty then). The handler may return
  // bool: false asks for no more (as cancel() does). Either way bytes the kernel had already
  // taken still come, each in its own call before the last one: the caller must take them
  // (hold them until it wants to read again) or lose them. A handler taking a fourth
  // parameter, bool batch_end, learns which arrival is the last of those the loop hands over
  // together in one turn (true on it and on the end call): where a reader would end its read
  // batch (Netty's channelReadComplete, a flush).
  //
  // On io_uring with a buffer ring it is one multishot recv armed for as long as it runs
  // (has_multishot_receive()): the kernel takes a ring buffer per arrival, up to the ring's
  // buffer size each. When the ring runs out (LoopCounters::ring_exhausted), when the kernel
  // ends the multishot by itself, or when this descriptor holds
  // Options::receive_ring_per_connection ring buffers (LoopCounters::receive_bound_stops),
  // the loop re-arms it (LoopCounters::multishot_arms) after reading, meanwhile, with
  // readiness and a pooled buffer of up to max_bytes: no byte is dropped or reordered. An
  // arrival that fills a whole ring buffer when max_bytes is larger marks a bulk stream
  // (LoopCounters::bulk_receives): the loop stops the multishot and reads the same way, each
  // burst in one recv of up to max_bytes, until a read brings less than a ring buffer. On
  // io_uring every recv off the ring (and on its readiness fallback) follows a readiness poll,
  // also after a read that filled its buffer: armed while bytes wait, the poll completes at
  // once, and an empty socket costs no recv that finds EAGAIN. On epoll each readiness edge
  // reads into pooled buffers of up to max_bytes until EAGAIN (a socket also until a read gets
  // less than its room, unless the peer hung up). A quiet descriptor holds no buffer on any
  // backend.
  // max_bytes == 0 reads nothing and completes at once.
  template <class H>
  OperationHandle receive_multishot(int fd, std::size_t max_bytes, H&& handler) {
    detail::OpArgs a{detail::OpKind::receive_multishot, fd};
    a.length = max_bytes;
    return start(a, [h = std::forward<H>(handler)](detail::Completion& c) mutable {
      ByteBuffer b = c.buffers.empty() ? ByteBuffer() : std::move(c.buffers[0]);
      const bool batch_end = c.value == 0;
      auto call = [&] {
        if constexpr (std::is_invocable_v<std::decay_t<H>&, std::error_code, std::size_t,
                                          ByteBuffer, bool>) {
          return h(c.ec, c.bytes, std::move(b), batch_end);
        } else {
          return h(c.ec, c.bytes, std::move(b));
        }
      };
      if constexpr (std::is_convertible_v<decltype(call()), bool>) {
        c.stop = !call();
      } else {
        call();
      }
    });
  }
  // Whether receive_multishot() is a multishot recv into the buffer ring here (io_uring with a
  // registered ring), rather than readiness and pooled buffers.
  bool has_multishot_receive() const noexcept;
  // Writes all of buf's remaining bytes; handler(ec, n, ByteBuffer).
  template <class H>
  OperationHandle write(int fd, ByteBuffer buf, H&& handler) {
    return start_single(detail::OpKind::write, fd, std::move(buf), std::forward<H>(handler));
  }
  // Scattering read (readv) into the buffers in order; handler(ec, n, std::span<ByteBuffer>).
  template <class H>
  OperationHandle read(int fd, std::span<const ByteBuffer> bufs, H&& handler) {
    detail::OpArgs a{detail::OpKind::read, fd};
    a.many = bufs;
    return start(a, wrap_many(std::forward<H>(handler)));
  }
  // Gathering write of every remaining byte (writev, IOV_MAX at a time, short writes
  // resubmitted from where they stopped); handler(ec, n, std::span<ByteBuffer>).
  template <class H>
  OperationHandle write(int fd, std::span<const ByteBuffer> bufs, H&& handler) {
    return write(fd, bufs, WriteFlags::none, std::forward<H>(handler));
  }
  // The same two writes sent with `flags` (see WriteFlags).
  template <class H>
  OperationHandle write(int fd, ByteBuffer buf, WriteFlags flags, H&& handler) {
    return start_single(detail::OpKind::write, fd, std::move(buf), std::forward<H>(handler), flags);
  }
  template <class H>
  OperationHandle write(int fd, std::span<const ByteBuffer> bufs, WriteFlags flags, H&& handler) {
    detail::OpArgs a{detail::OpKind::write, fd};
    a.many = bufs;
    a.more = has_flag(flags, WriteFlags::more);
    a.zero_copy = has_flag(flags, WriteFlags::zero_copy);
    return start(a, wrap_many(std::forward<H>(handler)));
  }

  // ---- Sockets ---------------------------------------------------------------------------
  // One connection; handler(ec, FileDescriptor fd). The new descriptor is non-blocking and
  // O_CLOEXEC; the handler owns it from its call on (invalid on an error): dropped, it is
  // closed, and once used with a loop it is closed through that loop. A connection accepted
  // while the operation was being cancelled is closed by the loop.
  template <class H>
  OperationHandle accept(int listen_fd, H&& handler) {
    return start({detail::OpKind::accept, listen_fd}, wrap_accept(std::forward<H>(handler)));
  }
  // handler(ec, FileDescriptor fd) once per connection until cancelled, closed or failed, owning
  // each fd like accept(); the last call carries the error (operation_aborted after cancel) and
  // an invalid fd. Multishot accept on io_uring; with epoll, accept4 on each readiness edge
  // while poll() says another connection waits (no accept4 that finds the queue empty).
  template <class H>
  OperationHandle accept_multishot(int listen_fd, H&& handler) {
    return start({detail::OpKind::accept_multishot, listen_fd},
                 wrap_accept(std::forward<H>(handler)));
  }
  // Connects a non-blocking socket; handler(std::error_code).
  template <class H>
  OperationHandle connect(int fd, const SocketAddress& to, H&& handler) {
    detail::OpArgs a{detail::OpKind::connect, fd};
    a.address = &to;
    return start(a, [h = std::forward<H>(handler)](detail::Completion& c) mutable { h(c.ec); });
  }
  // One datagram (or stream chunk) into the buffers; handler(ec, n, std::span<ByteBuffer>,
  // const SocketAddress& from, int msg_flags) — MSG_TRUNC in msg_flags when it did not fit.
  template <class H>
  OperationHandle recvmsg(int fd, std::span<const ByteBuffer> bufs, H&& handler) {
    detail::OpArgs a{detail::OpKind::recvmsg, fd};
    a.many = bufs;
    return start(a, [h = std::forward<H>(handler)](detail::Completion& c) mutable {
      SocketAddress from;
      if (c.peer && c.peer_len > sizeof(sa_family_t)) {
        try {
          from =
              SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(c.peer), c.peer_len);
        } catch (const std::exception&) {
          // An address niox cannot name (unnamed or unusual family): the handler still runs.
        }
      }
      h(c.ec, c.bytes, c.buffers, static_cast<const SocketAddress&>(from), c.value);
    });
  }
  // One sendmsg of the buffers (to `to` when given); handler(ec, n, std::span<ByteBuffer>).
  // Not resubmitted when short: a datagram is all or nothing.
  template <class H>
  OperationHandle sendmsg(int fd, std::span<const ByteBuffer> bufs,
                          const std::optional<SocketAddress>& to, H&& handler) {
    detail::OpArgs a{detail::OpKind::sendmsg, fd};
    a.many = bufs;
    a.address = to ? &*to : nullptr;
    return start(a, wrap_many(std::forward<H>(handler)));
  }
  // Readiness: handler(ec, int revents) once one of `events` (POLLIN, POLLOUT...) holds.
  template <class H>
  OperationHandle poll(int fd, int events, H&& handler) {
    detail::OpArgs a{detail::OpKind::poll, fd};
    a.events = events;
    return start(
        a, [h = std::forward<H>(handler)](detail::Completion& c) mutable { h(c.ec, c.value); });
  }

  // ---- Files -----------------------------------------------------------------------------
  // preadv at `offset` (does not move the file position); handler(ec, n, span). n == 0 at EOF.
  template <class H>
  OperationHandle read_at(int fd, std::int64_t offset, std::span<const ByteBuffer> bufs,
                          H&& handler) {
    detail::OpArgs a{detail::OpKind::read_at, fd};
    a.offset = offset;
    a.many = bufs;
    return start(a, wrap_many(std::forward<H>(handler)));
  }
  // pwritev of every remaining byte at `offset`; handler(ec, n, span).
  template <class H>
  OperationHandle write_at(int fd, std::int64_t offset, std::span<const ByteBuffer> bufs,
                           H&& handler) {
    detail::OpArgs a{detail::OpKind::write_at, fd};
    a.offset = offset;
    a.many = bufs;
    return start(a, wrap_many(std::forward<H>(handler)));
  }
  // FileChannel.transferTo on the loop: `count` bytes of the file from `position` (>= 0; the
  // file's own position is neither used nor moved) to out_fd at its current position, zero-copy:
  // copy_file_range when out_fd is a regular file, sendfile for a socket or pipe, a copy through
  // a buffer where neither can; handler(ec, std::size_t n, TransferPath path), path the one
  // that moved the last bytes. Completes when all were moved; LoopError::end_of_file (with n
  // moved) if the file ends first. Runs when out_fd is writable, on both backends (on io_uring
  // sendfile on readiness measured cheaper than splicing through a pipe). Belongs to out_fd:
  // ordered with its writes and aborted by closing it; file_fd is only borrowed and must stay
  // open until the handler has run.
  template <class H>
  OperationHandle transfer_to(int file_fd, std::int64_t position, std::size_t count, int out_fd,
                              H&& handler) {
    detail::OpArgs a{detail::OpKind::transfer_to, file_fd};
    a.offset = position;
    a.fd_out = out_fd;
    a.length = count;
    return start(a, wrap_transfer(std::forward<H>(handler)));
  }
  // FileChannel.transferFrom on the loop: `count` bytes from the socket (or pipe) into the file
  // at `position` (>= 0; the file's own position is neither used nor moved), socket -> pipe ->
  // file with splice, one splice pair each time the socket is readable, no byte through user
  // space (a copy through a buffer where splice cannot); handler(ec, std::size_t n,
  // TransferPath path). The pipe pair is the loop's own: made on first use, reused by every
  // transfer_from, closed with the loop. Completes when `count` bytes are stored in the file;
  // LoopError::end_of_file, with the n bytes stored, if the stream ends first. Belongs to
  // socket_fd: ordered with its reads and aborted by closing it; file_fd is only borrowed and
  // must stay open until the handler has run. After an error (a failed write to the file, say)
  // bytes read from the socket may be lost: the n stored are the file's, the stream has moved
  // on past them.
  template <class H>
  OperationHandle transfer_from(int socket_fd, int file_fd, std::int64_t position,
                                std::size_t count, H&& handler) {
    detail::OpArgs a{detail::OpKind::transfer_from, socket_fd};
    a.fd_out = file_fd;
    a.offset_out = position;
    a.length = count;
    return start(a, wrap_transfer(std::forward<H>(handler)));
  }

  // ---- Timers ----------------------------------------------------------------------------
  // Thread-safe. Runs `task` on the loop thread after `delay` (negative: as soon as possible),
  // unless the returned future is cancelled first. Off the loop thread the timer is armed by a
  // task. A timer pending when the loop shuts down never runs.
  ScheduledFuture schedule(std::chrono::nanoseconds delay, Runnable task) override;
  // Thread-safe. Runs `task` after `initial`, then every `period` (deadlines do not drift;
  // missed periods are skipped, not bunched), until the future is cancelled.
  ScheduledFuture schedule_at_fixed_rate(std::chrono::nanoseconds initial,
                                         std::chrono::nanoseconds period, Runnable task);

  // ---- Cancellation and descriptors ------------------------------------------------------
  // Asks the operation to stop. Returns false if it already completed (its handler
  // ran or is about to with its real result). Otherwise its handler runs later, once, with
  // operation_aborted (and the bytes already moved).
  bool cancel(OperationHandle handle);
  // Takes ownership of `fd`, aborts every pending operation on it (like cancel) and closes it
  // at once; the aborted handlers run later. Returns close(2)'s error, EBADF for an invalid
  // descriptor (so closing a moved-from one again says so).
  std::error_code close(FileDescriptor fd);
  // Like close() but the descriptor stays open and owned by the caller: the loop aborts what is
  // pending on it and forgets it.
  void release(const FileDescriptor& fd);

  // ---- Introspection and embedding -------------------------------------------------------
  // Snapshot; safe from any thread.
  LoopCounters counters() const noexcept;
  // Operations and armed timers not yet completed.
  std::size_t pending() const noexcept;
  // A descriptor that polls readable when run_once(0ms) has something to do. Owned by the
  // loop. The first call switches the loop to embedded mode (a timerfd tracks the timers).
  int pollable_fd();

 private:
  friend void detail::declare_accepted_socket(EventLoop& loop, int fd);
  friend void detail::close_at_shutdown(EventLoop& loop, int fd, detail::ClosedAtShutdown& owner);
  template <class H>
  OperationHandle start_single(detail::OpKind kind, int fd, ByteBuffer buf, H&& handler,
                               WriteFlags flags = WriteFlags::none) {
    detail::OpArgs a{kind, fd};
    a.single = &buf;
    a.more = has_flag(flags, WriteFlags::more);
    a.zero_copy = has_flag(flags, WriteFlags::zero_copy);
    return start(a, [h = std::forward<H>(handler)](detail::Completion& c) mutable {
      h(c.ec, c.bytes, std::move(c.buffers[0]));
    });
  }
  template <class H>
  static detail::CompletionFn wrap_many(H&& handler) {
    return [h = std::forward<H>(handler)](detail::Completion& c) mutable {
      h(c.ec, c.bytes, c.buffers);
    };
  }
  template <class H>
  static detail::CompletionFn wrap_accept(H&& handler) {
    return
        [h = std::forward<H>(handler)](detail::Completion& c) mutable { h(c.ec, std::move(c.fd)); };
  }
  template <class H>
  static detail::CompletionFn wrap_transfer(H&& handler) {
    return [h = std::forward<H>(handler)](detail::Completion& c) mutable {
      // 0: refused or aborted before any path was tried, reported like a TransferResult that
      // moved nothing.
      h(c.ec, c.bytes, c.value != 0 ? static_cast<TransferPath>(c.value) : TransferPath::copy);
    };
  }
  OperationHandle start(const detail::OpArgs& args, detail::CompletionFn fn);
  // ScheduledFuture::cancel(): releases the timer on the loop thread.
  static void cancel_timer(const std::shared_ptr<detail::ScheduledState>& state) noexcept;

  std::unique_ptr<detail::LoopCore> core_;
};

}  // namespace niox

template <>
struct fmt::formatter<niox::BackendKind> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(niox::BackendKind k, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(niox::to_string(k), ctx);
  }
};
