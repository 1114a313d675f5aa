// Channel: a transport connection with a pipeline (Netty's io.netty.channel.Channel).
//
// Threads and lifetime (the whole contract of the transport, in one place)
// -----------------------------------------------------------------------
//
//    any thread                         the channel's loop thread
//    ----------                         -------------------------
//    Channel::write/flush/read/close/   --- hop (execute) --->  pipeline, handlers, outbound
//    shutdown_output, ctx.write/...                              buffer, transport calls
//    ChannelFuture::add_listener        <--- listeners run here ---
//    ChannelFuture::sync()  (never on a loop thread: BlockingOperationException)
//
//  - A Channel belongs to one Executor (its EventLoop) for life. Its handlers, pipeline and
//    outbound buffer are used on that thread only; every handler method runs there.
//  - The outbound operations of a Channel and of a ChannelHandlerContext (write, write_and_flush,
//    flush, read, close, shutdown_output) may be called from any thread: off the loop they hop
//    to it with execute(), in call order per calling thread, and their futures complete there.
//    A hop keeps the channel alive, so a channel used from other threads must be owned by a
//    std::shared_ptr (every socket channel is). A context used from another thread must still
//    be in the pipeline when the hop arrives; a write from a removed handler's context fails
//    with Errc::handler_removed, its flush/read/close/shutdown_output start at the tail instead.
//  - Pipeline changes (add_*, remove, replace) and config() setters may be called from any
//    thread too: off the loop they run there and the caller waits for them (so their results
//    and exceptions come back as usual); on another loop's thread that wait is refused with
//    BlockingOperationException. The state queries (is_writable, config getters, pipeline
//    lookups) are for the loop thread.
//  - The channel may outlive its loop. Once its EventLoopGroup is shut down or destroyed, every
//    outbound operation completes with Errc::channel_closed on the calling thread; nothing
//    touches the dead loop. Closing the loop first closes every socket channel on it (on the loop
//    thread, channel_inactive fires), whether or not it waited on an operation.
//  - After close(): every queued write has failed once with channel_closed, channel_inactive
//    follows on the loop, and further writes fail at once with channel_closed.
//  - A handler that throws from an inbound method has the exception delivered to its own
//    exception_caught(); one that throws from exception_caught() gets its channel closed.
//
// Concrete transports (the loop-backed socket channel, EmbeddedChannel) derive from Channel and
// implement the "unsafe" part: do_write / do_close / do_shutdown_output / do_read_begin, and
// call the protected notify_* / flush_now methods when the kernel reports progress. Everything
// else — the outbound buffer, water marks, close semantics, promises — lives here once.
//
// Completions: every ChannelFuture returned completes exactly once, its listeners run on the
// executor and never inside the call that started the operation. Closing fails every pending
// write once with Errc::channel_closed.
#pragma once

#include <niox/channels/socket_address.hpp>
#include <niox/transport/channel_future.hpp>
#include <niox/transport/channel_pipeline.hpp>
#include <niox/loop/executor.hpp>
#include <niox/transport/message.hpp>
#include <niox/transport/outbound_buffer.hpp>

#include <any>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <system_error>

namespace niox {

class Channel;

namespace detail {
class HeadHandler;
class TailHandler;
void run_on_loop_and_wait(Channel& channel, const std::function<void()>& f);
bool must_hop(const Channel& channel) noexcept;
}  // namespace detail

// A user event the transport fires when the peer shut down its output (read returned EOF) and
// allow_half_closure is on; otherwise EOF closes the channel.
struct ChannelInputShutdownEvent {};

// Netty's ChannelConfig: options every transport channel has. Getters are for the loop thread;
// a setter called from another thread runs on the loop and returns once it has (it throws
// BlockingOperationException on another loop's thread).
class ChannelConfig {
 public:
  bool is_auto_read() const noexcept { return auto_read_; }
  // Turning auto_read on again calls channel.read().
  ChannelConfig& set_auto_read(bool on);

  WriteBufferWaterMark write_buffer_water_mark() const noexcept;
  // Throws IllegalArgumentException if low > high.
  ChannelConfig& set_write_buffer_water_mark(WriteBufferWaterMark mark);
  std::size_t write_buffer_hard_limit() const noexcept;
  ChannelConfig& set_write_buffer_hard_limit(std::size_t bytes);

  bool is_allow_half_closure() const noexcept { return allow_half_closure_; }
  ChannelConfig& set_allow_half_closure(bool on);
  // Reads per read event before read_complete (fairness between channels of one loop).
  int max_messages_per_read() const noexcept { return max_messages_per_read_; }
  ChannelConfig& set_max_messages_per_read(int n);
  std::chrono::milliseconds connect_timeout() const noexcept { return connect_timeout_; }
  ChannelConfig& set_connect_timeout(std::chrono::milliseconds t);
  // Byte budget of one gathering write: max_bytes_per_call until the first write larger than
  // 9 KiB, which seeds it from SO_SNDBUF (twice it); then adapted per write.
  std::size_t max_bytes_per_gathering_write() const noexcept;
  ChannelConfig& set_max_bytes_per_gathering_write(std::size_t bytes);
  // Writes of at least this many bytes go out zero-copy, 0 (the default): none. See
  // channel_option::write_zero_copy_threshold.
  std::size_t write_zero_copy_threshold() const noexcept { return write_zero_copy_threshold_; }
  ChannelConfig& set_write_zero_copy_threshold(std::size_t bytes);

 private:
  friend class Channel;
  explicit ChannelConfig(Channel& channel) noexcept : channel_(channel) {}

  Channel& channel_;
  bool auto_read_ = true;
  bool allow_half_closure_ = false;
  int max_messages_per_read_ = 16;
  std::chrono::milliseconds connect_timeout_{30000};
  std::size_t write_zero_copy_threshold_ = 0;
};

class Channel : public std::enable_shared_from_this<Channel> {
 public:
  using Id = std::uint64_t;

  virtual ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  Id id() const noexcept { return id_; }
  // The channel's loop. Use it while the loop lives (on the loop thread it always does).
  Executor& executor() const noexcept { return *executor_; }
  // Whether the calling thread is the channel's loop thread (false once the loop is gone).
  bool in_event_loop() const noexcept { return link_->in_event_loop(); }
  ChannelPipeline& pipeline() noexcept { return pipeline_; }
  ChannelConfig& config() noexcept { return config_; }
  const OutboundBuffer& outbound_buffer() const noexcept { return outbound_; }

  // Open: not closed yet. Active: open and connected (transport specific).
  virtual bool is_open() const noexcept = 0;
  virtual bool is_active() const noexcept = 0;
  // Active, output not shut down, and the outbound buffer below its water marks.
  bool is_writable() const noexcept;
  std::size_t bytes_before_unwritable() const noexcept;
  std::size_t bytes_before_writable() const noexcept;
  bool is_output_shutdown() const noexcept { return output_shutdown_ || output_shutdown_pending_; }
  bool is_input_shutdown() const noexcept { return input_shutdown_; }

  // The addresses of a connected or bound socket channel, once it is active or bound; empty
  // for a channel without a socket. The kernel is asked the first time (any thread) and the
  // answer kept, so an address asked for while the channel was open is still there once it
  // closed; one first asked for after the close is empty.
  virtual std::optional<SocketAddress> local_address() const { return std::nullopt; }
  virtual std::optional<SocketAddress> remote_address() const { return std::nullopt; }

  // Completes when the channel has closed (always successfully). Its state is made by the
  // first call (most channels are never asked), from any thread.
  ChannelFuture close_future() const;

  // ---- Outbound operations through the whole pipeline (any thread) ------------------------
  ChannelFuture write(Message&& msg);
  void write(Message&& msg, ChannelPromise promise);
  ChannelFuture write_and_flush(Message&& msg);
  void write_and_flush(Message&& msg, ChannelPromise promise);
  Channel& flush();
  Channel& read();
  ChannelFuture close();
  void close(ChannelPromise promise);
  // Flushes what was written and closes once all of it has left: Netty's
  // writeAndFlush(EMPTY_BUFFER).addListener(CLOSE) in one call, for the response that ends a
  // connection. The close comes inside this call when the flush wrote everything (epoll sends
  // what the socket takes at once), else as the last byte leaves; a write that fails closes
  // the channel too (its own future says why). After shutdown_output(), the close follows its
  // FIN. Completes as close() does.
  //
  // On TCP the last bytes leave in the FIN's segment: one segment, and one wake-up of the
  // peer, fewer per connection (nginx's tcp_nopush before its close). And the peer cannot
  // have read them before the FIN is on its way, so the TIME_WAIT stays on this side.
  ChannelFuture close_after_flush();
  void close_after_flush(ChannelPromise promise);
  // Flushes what was written and sends FIN once all of it has left; later writes fail with
  // Errc::output_shutdown. On TCP, what was written but not yet flushed before this call leaves
  // with the FIN, as with close_after_flush().
  ChannelFuture shutdown_output();
  void shutdown_output(ChannelPromise promise);

  ChannelPromise new_promise() const { return ChannelPromise(link_); }

 protected:
  explicit Channel(Executor& executor);

  // Runs `f` on the loop thread: now when already there, else handed over (the task holds the
  // channel). False when the loop is gone and `f` will never run.
  template <class F>
  bool on_loop(F&& f) {
    if (link_->in_event_loop()) {
      f();
      return true;
    }
    Runnable task([self = shared_from_this(), g = std::forward<F>(f)]() mutable { g(); });
    return link_->execute(task);
  }

  // on_loop() for an operation with a promise: `f(promise)` now when on the loop thread (the
  // promise moved, never copied), else handed over; `gone(promise)` here when the loop is gone.
  template <class F, class G>
  void with_promise_on_loop(ChannelPromise promise, F&& f, G&& gone) {
    if (link_->in_event_loop()) {
      f(std::move(promise));
      return;
    }
    Runnable task([self = shared_from_this(), g = std::forward<F>(f), p = promise]() mutable {
      g(std::move(p));
    });
    if (!link_->execute(task)) gone(std::move(promise));
  }

  // ---- The "unsafe" part a transport implements ---------------------------------------------
  // On the loop thread, before the flush that carries the connection's last bytes: the close
  // (or shutdown_output) follows as soon as they are written, in the same call or a turn
  // later. A TCP transport sends them with MSG_MORE, so that its FIN takes their tail along,
  // and pushes what is held before the loop next waits should the close not have come (a
  // handler below may delay it: an SslHandler waits for its close_notify to leave). Not under
  // kernel TLS (TLS_TX): the kernel drops a record left open at the close. The default does
  // nothing.
  virtual void expect_close() noexcept {}
  // Drain the flushed prefix of `out` (gather/remove_bytes) as far as the kernel takes it
  // without blocking. When the kernel is full (EAGAIN) or an asynchronous write is in flight,
  // call set_write_pending(true) and, once it can go on, notify_writable_again(). On an I/O error call notify_write_error(ec).
  virtual void do_write(OutboundBuffer& out) = 0;
  // Close the descriptor (or abortively reset it); called once.
  virtual void do_close() noexcept = 0;
  // shutdown(SHUT_WR); called once, after the outbound buffer drained.
  virtual std::error_code do_shutdown_output() noexcept = 0;
  // Start (or keep) reading; called for read() while active.
  virtual void do_read_begin() = 0;
  // close() after the loop is gone (any thread, maybe several at once): release what the
  // transport still holds without the loop. The default does nothing.
  virtual void do_close_without_loop() noexcept {}
  // After do_close(): the reference the transport holds to its own channel while open, if any.
  // The close lets go of it a turn later, in the task that fires channel_inactive, never inside
  // a call on the channel. The default holds none.
  virtual std::shared_ptr<Channel> take_self_reference() noexcept { return nullptr; }
  // What the transport accepts into its outbound buffer; others fail their write with
  // Errc::unsupported_message. The default takes ByteBuffer and FileRegion.
  virtual bool accepts_outbound(const Message& msg) const noexcept;

  // Where the tail delivers what no handler consumed. Defaults log and drop.
  virtual void on_unhandled_inbound_message(Message&& msg);
  virtual void on_unhandled_inbound_exception(std::exception_ptr cause);
  virtual void on_unhandled_user_event(std::any event);

  // ---- What a transport calls ----------------------------------------------------------------
  // The connection is up: fires channel_active, then read() when auto_read is on.
  void notify_active();
  // Bytes arrived: fires channel_read (the buffer now belongs to the pipeline).
  void notify_read(ByteBuffer&& bytes);
  // A read batch ended: fires channel_read_complete. Afterwards the transport keeps reading
  // only while should_keep_reading() — AUTO_READ off stops reading until read() is called,
  // which is how a handler pushes back on a fast peer.
  void notify_read_complete();
  bool should_keep_reading() const noexcept { return config_.is_auto_read() || read_pending_; }
  // The peer shut down its output (EOF). With allow_half_closure: fires
  // ChannelInputShutdownEvent and the channel stays open for writing; otherwise closes it.
  void notify_input_shutdown();
  // Write readiness is back (EPOLLOUT, a write CQE): clears write-pending and flushes again.
  void notify_writable_again();
  // A write failed: fails the flushed writes with `ec` and closes the channel.
  void notify_write_error(std::error_code ec);
  void set_write_pending(bool on) noexcept { write_pending_ = on; }
  bool is_write_pending() const noexcept { return write_pending_; }
  // Runs do_write() now unless a flush is already running or a write is pending.
  void flush_now();
  OutboundBuffer& mutable_outbound_buffer() noexcept { return outbound_; }
  // Closes from inside the transport (EOF, error): same as close() without a promise.
  void close_for_transport();
  // Removes every handler (handler_removed called). A transport's destructor calls it first,
  // while its overrides are still alive; ~Channel calls it otherwise.
  void destroy_pipeline() noexcept { pipeline_.destroy(); }

 private:
  friend class detail::HeadHandler;
  friend class detail::TailHandler;
  friend class ChannelConfig;
  friend class ChannelHandlerContext;
  friend void detail::run_on_loop_and_wait(Channel&, const std::function<void()>&);
  friend bool detail::must_hop(const Channel&) noexcept;

  void unsafe_write(Message&& msg, ChannelPromise&& promise);
  void unsafe_flush();
  void unsafe_read();
  void unsafe_close(ChannelPromise promise);
  void unsafe_shutdown_output(ChannelPromise promise);
  void maybe_finish_shutdown_output();

  Executor* executor_;
  std::shared_ptr<detail::ExecutorLink> link_;
  Id id_;
  ChannelConfig config_;
  OutboundBuffer outbound_;
  // close_future()'s state once asked for; completed by the close. Guarded by close_lock_,
  // not an atomic<shared_ptr>: libstdc++ 12's load() releases its internal lock relaxed, so a
  // load on one thread and a store on another are a data race under the memory model (TSan
  // reports it).
  mutable std::shared_ptr<detail::PromiseState> close_state_;
  ChannelPromise shutdown_promise_;
  // Read by close_future() on any thread; written on the loop thread.
  std::atomic<bool> closed_{false};
  mutable detail::SpinLock close_lock_;  // held for a copy of one shared_ptr
  bool in_flush_ = false;
  bool write_pending_ = false;
  bool output_shutdown_pending_ = false;
  bool output_shutdown_ = false;
  bool active_fired_ = false;
  bool read_pending_ = false;
  bool input_shutdown_ = false;
  // Declared last: handlers' handler_removed() may still use the channel while it is destroyed.
  ChannelPipeline pipeline_;
};

}  // namespace niox
