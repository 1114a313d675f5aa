// The loop-backed socket transport: LoopSocketChannel (a TCP or Unix-domain stream connection)
// and LoopServerSocketChannel (a listening socket), each bound to one EventLoop for life.
// Netty's NioSocketChannel / NioServerSocketChannel over niox's completion loop.
//
// Threads: handlers run on the channel's loop only. Channel's outbound operations (write,
// flush, read, close...) may be called from any thread; everything else here says where.
//
// Reading: one receive buffer at a time is in the kernel, sized by the channel's
// AdaptiveRecvBufferAllocator handle and taken from the loop thread's BufferPool (its bytes
// beyond the limit are not zeroed). Each filled buffer is fired as channel_read (the buffer
// then belongs to the pipeline). When a read filled its buffer, the batch goes on with
// non-blocking reads on the loop thread until EAGAIN (or max_messages_per_read, or a handler
// turned AUTO_READ off); then channel_read_complete fires — never does a batch wait for bytes that have not arrived. With AUTO_READ off no new read is
// started after a batch until read() is called, so the kernel buffers fill and the peer is
// pushed back.
//
// Where the loop has a multishot receive (io_uring with a buffer ring,
// EventLoop::has_multishot_receive()), an active channel that wants to read on after its first
// read keeps one receive_multishot armed instead, with the allocator's largest guess as
// max_bytes. (The first read is one receive of a ring buffer: a connection that reads once and
// closes, as an HTTP request with `Connection: close` does, never arms a multishot, which the
// loop would have to cancel before the descriptor could close. A channel whose kernel decrypts,
// kernel TLS switched on in that read, stays with single receives.) Each arrival is one ring
// buffer (its capacity the ring's buffer size), or on a bulk stream all that waited, up to
// max_bytes, in a pooled buffer; fired as channel_read. channel_read_complete
// follows the last arrival the loop hands over in a turn, and nothing is read ahead of them.
// When reading pauses (AUTO_READ off, or a read() answered) the multishot is
// stopped; bytes the kernel handed over before it stopped are parked on the channel, in order,
// and fired first when reading resumes, the end of the stream or a read error that came behind
// them after them. So a paused channel never loses bytes and holds at most what arrived while
// the stop was on its way (bounded by EventLoop::Options::receive_ring_per_connection for the
// ring's share). Closing drops what is parked. Elsewhere (epoll, io_uring's readiness
// fallback) the one-receive-at-a-time reading above runs unchanged.
//
// Writing: flush() hands the outbound buffer's flushed prefix to the loop as ONE gathering write (a
// single piece as a one-buffer write); the outbound buffer keeps the memory alive until the loop
// reports the bytes moved, and is advanced by exactly that many. Only one write is in the kernel at
// a time. On epoll the flush first sends what the socket takes at once itself (one send, as the
// loop's write would make it) and the writes that covers complete before flush() returns; the
// loop's write takes what a full socket left. A FileRegion goes through EventLoop::transfer_to
// (sendfile); a region whose file is shorter than position + count fails its own write with
// Errc::file_region_truncated before anything of it is sent (the connection stays usable), or
// closes the connection if the file shrank during the transfer. On TCP, the bytes in front of a
// FileRegion (a response's header) are sent with MSG_MORE, so they leave in one segment with the
// file's first bytes; sendfile's last call pushes the region's tail at once. Should the region fail
// before sending anything, the held bytes are pushed when the outbound buffer drains. (TCP_CORK,
// nginx's tcp_nopush, did the same at two setsockopt calls a response, and held every response's
// tail until the loop turn's other sendfiles had run.) The bytes close_after_flush() and
// shutdown_output() flush go with MSG_MORE as well, and the FIN takes their tail along; a task
// queued as they drain pushes them if the close has not come by its turn.
//
// kTLS receive: once the SslHandler has handed this socket's inbound keys to the kernel
// (TLS_RX), reads return decrypted application data. A record of another type (an alert, a
// handshake message) fails a plain read with EIO; the channel then reads it with its type
// (recvmsg with TLS_GET_RECORD_TYPE) and fires it as a detail::KernelTlsRecord, and reading goes
// on. Once it has handed over the outbound keys (TLS_TX), expect_close() is ignored:
// the kernel would drop the record MSG_MORE left open when the close comes.
//
// Closing: close() closes the descriptor through the loop (pending operations are aborted and
// their buffers released when the kernel lets go); every pending write fails once with
// Errc::channel_closed. close_abortively() sets SO_LINGER {1, 0} first, so the peer sees RST.
// shutdown_output() sends FIN once the queued writes are out. A read error (ECONNRESET) fires
// exception_caught and closes; EOF fires ChannelInputShutdownEvent with ALLOW_HALF_CLOSURE,
// else closes.
//
// Lifetime: a channel is owned by std::shared_ptr. From the moment it is active until it is
// closed it keeps itself alive (the loop's operations hold it), so a server never has to store
// its connections; after close it lives as long as someone holds it. Closing the channel's
// loop (EventLoop::shutdown, a group's shutdown_gracefully) closes it: channel_inactive fires on
// the loop thread, whether or not an operation was pending (reading paused, half-closed).
#pragma once

#include <niox/base/file_descriptor.hpp>
#include <niox/channels/socket_address.hpp>
#include <niox/loop/event_loop.hpp>
#include <niox/transport/adaptive_recv_buffer_allocator.hpp>
#include <niox/transport/channel.hpp>
#include <niox/transport/channel_option.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace niox {

class LoopSocketChannel;

namespace detail {

// kTLS receive, private to the transport's SslHandler (and the tests): a record the kernel
// decrypted that is not application data, as a read of a LoopSocketChannel with TLS_RX fires it.
struct KernelTlsRecord {
  std::uint8_t content_type = 0;  // RFC 8446 5.1: 21 an alert, 22 a handshake message
  ByteBuffer content;             // the record's plaintext, ready to read
};

// kTLS, private to the transport's SslHandler (and the tests): what the kernel took over.
struct KernelTls {
  // Whether the kernel may take over the channel's inbound records now: while the handlers see
  // a read (loop thread) and no other read is in the kernel or parked, since those bytes would
  // be records for the user-space keys.
  static bool may_start_receive(const LoopSocketChannel& ch) noexcept;
  // TLS_RX is installed on the descriptor: EIO from a read means a record of another type.
  static void started_receive(LoopSocketChannel& ch) noexcept;
  // TLS_TX is installed: expect_close() is ignored from now on, since the kernel would drop a
  // record that MSG_MORE left open at the close.
  static void started_send(LoopSocketChannel& ch) noexcept;
};

}  // namespace detail

// What both socket channels share: their loop and their descriptor, which the channel owns from
// open/adopt/bind until close() gives it to the loop's close(fd) (or, once the loop is gone,
// closes it itself), and the self-reference an active channel holds.
class AbstractLoopSocketChannel : public Channel, private detail::ClosedAtShutdown {
 public:
  // The channel's executor, set once at construction: no pointer of its own beside it.
  EventLoop& event_loop() const noexcept { return static_cast<EventLoop&>(executor()); }
  std::optional<SocketAddress> local_address() const override;
  std::optional<SocketAddress> remote_address() const override;
  ~AbstractLoopSocketChannel() override;

 protected:
  AbstractLoopSocketChannel(EventLoop& loop, FileDescriptor fd, int family)
      : Channel(loop), fd_(std::move(fd)), family_(family) {}
  // For the destructors, after destroy_pipeline(): a descriptor still held (never activated, or
  // the loop gone) has nothing in the kernel, since every operation holds the channel.
  void close_descriptor_at_destruction() noexcept;
  // do_close(): the descriptor goes to the loop's close(fd); Channel's close lets go of the
  // self-reference a turn later (take_self_reference).
  void close_through_loop() noexcept;
  void do_close_without_loop() noexcept override;
  std::shared_ptr<Channel> take_self_reference() noexcept override;
  // Going active on the loop thread: the channel holds itself until it closes, and its loop's
  // shutdown closes it if nothing else has.
  void hold_self_until_closed();
  void close_at_loop_shutdown() noexcept override;
  bool closed_without_loop() const noexcept { return closed_without_loop_.load(); }

  FileDescriptor fd_;  // closed through the loop (on its thread) or, without it, directly
  int family_;
  std::shared_ptr<Channel> keep_alive_;  // set while active and open

 private:
  struct Addresses {
    std::optional<SocketAddress> local, remote;
  };
  // Asked of the kernel on the first call while active, then kept (a connection that nobody
  // asks costs neither the two syscalls nor the bytes); null before.
  const Addresses* addresses() const;

  mutable std::atomic<const Addresses*> addresses_{nullptr};
  // Last: the derived channel's own flags fill the padding behind it.
  std::atomic<bool> closed_without_loop_{false};
};

class LoopSocketChannel final : public AbstractLoopSocketChannel {
 public:
  // A new unconnected socket of `family` (AF_INET, AF_INET6, AF_UNIX), non-blocking and
  // O_CLOEXEC, on `loop`. Throws std::system_error.
  static std::shared_ptr<LoopSocketChannel> open(EventLoop& loop, int family);
  // Adopts a connected (accepted) descriptor; start with start_accepted() on the loop thread.
  // The channel owns `fd` from the call on (also when it throws: the descriptor is closed) and
  // closes it through its loop when it closes.
  static std::shared_ptr<LoopSocketChannel> adopt(EventLoop& loop, FileDescriptor fd, int family);

  ~LoopSocketChannel() override;

  // The descriptor, or -1 once closed. Do not close it yourself.
  int fd() const noexcept { return fd_.get(); }
  int family() const noexcept { return family_; }
  bool is_open() const noexcept override { return fd_.valid(); }
  bool is_active() const noexcept override { return fd_.valid() && active_; }

  // Socket options now, config options too (loop thread, or before the channel is used).
  void apply_options(const ChannelOptions& options);

  // Connects (any thread). The promise fails with the connect error, ETIMEDOUT after
  // config().connect_timeout() (0 = none), or EISCONN/EALREADY when already connected or
  // connecting; a failed connect closes the channel. On success the channel is active and
  // channel_active has fired (then read() when AUTO_READ).
  void connect(const SocketAddress& remote, ChannelPromise promise);
  ChannelFuture connect(const SocketAddress& remote);

  // An accepted channel goes active: channel_active, then read() with AUTO_READ. On the loop
  // thread, once, after its pipeline is set up.
  void start_accepted();

  // Close with RST (SO_LINGER {1, 0}) instead of FIN; pending writes fail as with close().
  ChannelFuture close_abortively();

 protected:
  void expect_close() noexcept override;
  void do_write(OutboundBuffer& out) override;
  void do_close() noexcept override;
  std::error_code do_shutdown_output() noexcept override;
  void do_read_begin() override;

 private:
  struct Token {};

 public:
  LoopSocketChannel(Token, EventLoop& loop, FileDescriptor fd, int family);

 private:
  friend class LoopServerSocketChannel;  // marks the channels it accepted (accepted_)
  friend struct detail::KernelTls;
  std::shared_ptr<LoopSocketChannel> self() {
    return std::static_pointer_cast<LoopSocketChannel>(shared_from_this());
  }
  void become_active();
  void start_read();
  void on_read(std::error_code ec, std::size_t n, ByteBuffer&& buf);
  // Fires one read's outcome; false when the batch must stop (EOF, error, closed).
  bool handle_read_result(std::error_code ec, std::size_t n, ByteBuffer&& buf);
  // kTLS receive: the record a read refused with EIO, read with its type and fired.
  bool read_kernel_tls_record();
  void end_read_batch();
  // The multishot read path (see the top of this file).
  void start_multishot();
  void resume_multishot();
  bool on_multishot(std::error_code ec, std::size_t n, ByteBuffer&& buf, bool batch_end);
  bool deliver_one(ByteBuffer&& buf, bool batch_end);
  void deliver_end(std::error_code ec);
  void on_written(std::error_code ec, std::size_t n);
  void on_file_written(std::error_code ec, std::size_t n);
  void advance(OutboundBuffer& out, std::size_t n);
  void push_held() noexcept;
  void on_connected(std::error_code ec);

  // receive_multishot: what arrived after reading paused, fired first on resume. Allocated
  // only while something is parked: an idle connection has nothing here.
  struct Parked {
    std::vector<ByteBuffer> bufs;
    bool end = false;  // the stream's end came behind the parked bytes
    std::error_code end_ec;
  };
  bool has_parked() const noexcept { return parked_ && !parked_->bufs.empty(); }
  Parked& parked();

  bool active_ = false;
  bool reading_ = false;          // a read is in the kernel
  bool in_read_handler_ = false;  // decide about the next read after the handlers ran
  bool batch_open_ = false;
  bool multishot_ = false;           // reads with receive_multishot (from the second read on)
  bool multishot_stopping_ = false;  // the armed one was asked to stop; its last call is due
  bool writing_ = false;             // a write or transfer is in the kernel
  bool more_held_ = false;  // the last write went with MSG_MORE: its tail may wait for a push
  // expect_close(): writes go with MSG_MORE and leave their tail to the FIN, until the task that
  // pushes it should the close not come has run.
  enum class CloseHold : std::uint8_t { none, expected, push_queued };
  CloseHold close_hold_ = CloseHold::none;
  bool abort_on_close_ = false;
  bool connect_timed_out_ = false;
  bool accepted_ = false;       // the server channel's accept made the descriptor (non-blocking)
  bool kernel_tls_rx_ = false;  // the kernel decrypts the inbound records (TLS_RX)
  bool kernel_tls_tx_ = false;  // the kernel encrypts the outbound records (TLS_TX)
  // What the write in the kernel asked to move: at most max_bytes_per_call, under 2^31.
  std::uint32_t write_attempted_ = 0;
  std::unique_ptr<Parked> parked_;
  AdaptiveRecvBufferAllocator::Handle recv_;
  // Only while a connect is pending: an accepted channel never has one.
  struct Connecting {
    ChannelPromise promise;
    OperationHandle op;
    ScheduledFuture timer;
  };
  std::unique_ptr<Connecting> connecting_;
};

class LoopServerSocketChannel final : public AbstractLoopSocketChannel {
 public:
  // Picks the loop of each accepted connection (a worker group's next()); default: this
  // channel's loop. Called on this channel's loop thread.
  using ChildLoopChooser = std::function<EventLoop&()>;

  static std::shared_ptr<LoopServerSocketChannel> create(EventLoop& loop,
                                                         ChildLoopChooser chooser = nullptr);
  ~LoopServerSocketChannel() override;

  bool is_open() const noexcept override { return !closed_ && !closed_without_loop(); }
  bool is_active() const noexcept override { return fd_.valid(); }  // bound and listening
  // local_address() is known once the bind completed (a port 0 is resolved there).

  // Opens the socket, applies `options` (SO_REUSEADDR defaults on), binds, listens with
  // options.so_backlog and starts accepting (any thread). Each accepted connection is fired as
  // channel_read with a std::shared_ptr<LoopSocketChannel> (not yet active, on its own loop)
  // through this channel's pipeline; ServerBootstrap puts the acceptor there. With AUTO_READ
  // off it accepts one connection per read() (turning it off while accepting stops after the
  // connection at hand); the others wait in the kernel's backlog.
  void bind(const SocketAddress& local, const ChannelOptions& options, ChannelPromise promise);

  // Accepted connections that no handler took are closed.

 protected:
  void do_write(OutboundBuffer& out) override;
  void do_close() noexcept override;
  std::error_code do_shutdown_output() noexcept override { return {}; }
  void do_read_begin() override;
  bool accepts_outbound(const Message&) const noexcept override { return false; }
  void on_unhandled_inbound_message(Message&& msg) override;

 private:
  struct Token {};

 public:
  LoopServerSocketChannel(Token, EventLoop& loop, ChildLoopChooser chooser);

 private:
  void on_accepted(std::error_code ec, FileDescriptor fd);

  ChildLoopChooser chooser_;
  bool closed_ = false;
  bool accepting_ = false;
  bool multishot_ = false;           // accept_op_ is a multishot accept (AUTO_READ on)
  bool pausing_ = false;             // the multishot accept is being cancelled (AUTO_READ off)
  bool resume_after_pause_ = false;  // read() came while pausing
  OperationHandle accept_op_;
};

}  // namespace niox
