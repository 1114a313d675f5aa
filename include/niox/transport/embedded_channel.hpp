// EmbeddedChannel: a Channel without a socket, for testing handlers and codecs (Netty's
// EmbeddedChannel). Everything runs on the calling thread: its EmbeddedEventLoop queues tasks
// and timers against a manual clock, and they run only in run_pending_tasks() /
// advance_time() (write_inbound/write_outbound/finish run them too).
//
// Inbound: write_inbound() fires channel_read per message then channel_read_complete; what
// reaches the tail is collected for read_inbound(). Exceptions that reach the tail are recorded
// and rethrown by check_exception() (write_inbound/write_outbound call it).
//
// Outbound, two modes:
//  - message mode (default): each flushed message is handed out as is to read_outbound(), its
//    write completing with success — the handler-level view.
//  - scripted mode (set_write_script): the channel behaves like a non-blocking socket whose
//    writev is the script: each gathering write built by the OutboundBuffer is offered to it,
//    and it answers how many bytes the "kernel" took (a short count), 0 for EAGAIN, or -errno.
//    Accepted bytes are appended to written_bytes(), FileRegions are read with pread like
//    sendfile would. After EAGAIN, signal_writable() plays EPOLLOUT.
#pragma once

#include <niox/transport/channel.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <sys/uio.h>

namespace niox {

class EmbeddedEventLoop final : public Executor {
 public:
  // Every thread counts as its loop thread: it is driven by the test's own thread only.
  EmbeddedEventLoop() : Executor(ThreadCheck::any_thread) {}
  ~EmbeddedEventLoop() override { retire(); }

  void execute(Runnable task) override { tasks_.push_back(std::move(task)); }
  bool in_event_loop() const noexcept override { return true; }
  ScheduledFuture schedule(std::chrono::nanoseconds delay, Runnable task) override;
  Clock::time_point now() const noexcept override { return now_; }

  // Runs queued tasks and due timers until none is left. Returns how many ran.
  std::size_t run_pending_tasks();
  // Moves the manual clock forward (does not run anything).
  void advance_time_by(std::chrono::nanoseconds d) noexcept { now_ += d; }
  std::size_t pending_tasks() const noexcept { return tasks_.size(); }
  // Timers not yet run or cancelled.
  std::size_t scheduled_tasks() const noexcept;
  // When the next live timer is due, if any.
  std::optional<Clock::time_point> next_scheduled_time() const noexcept;

 private:
  struct Timer {
    std::shared_ptr<detail::ScheduledState> state;
    Runnable task;
  };
  std::deque<Runnable> tasks_;
  std::map<std::pair<Clock::time_point, std::uint64_t>, Timer> timers_;
  std::uint64_t timer_seq_ = 0;
  Clock::time_point now_ = Clock::time_point{} + std::chrono::hours(1);
};

namespace detail {
// Constructed before the Channel base, destroyed after it: the channel's executor.
struct EmbeddedLoopHolder {
  EmbeddedEventLoop embedded_loop_;
};
}  // namespace detail

class EmbeddedChannel : private detail::EmbeddedLoopHolder, public Channel {
 public:
  // The script of the pretend kernel: offered iovecs (empty for a FileRegion) and their total;
  // returns bytes taken (clamped to `bytes`), 0 for EAGAIN, or -errno.
  using WriteScript = std::function<long(std::span<const iovec> iovecs, std::size_t bytes)>;
  struct WriteCall {
    std::size_t iovecs;   // 0 for a FileRegion transfer
    std::size_t offered;  // bytes offered
    long result;          // what the script answered
  };

  // Adds `handlers` (names generated) and activates the channel.
  EmbeddedChannel();
  EmbeddedChannel(std::initializer_list<std::shared_ptr<ChannelHandler>> handlers);
  ~EmbeddedChannel() override;

  EmbeddedEventLoop& event_loop() noexcept { return embedded_loop_; }
  bool is_open() const noexcept override { return open_; }
  bool is_active() const noexcept override { return open_; }

  // ---- Inbound ------------------------------------------------------------------------------
  // Fires channel_read for each message, then channel_read_complete; runs pending tasks and
  // rethrows a recorded exception. True when inbound messages are waiting to be read.
  // The list's messages are copied (an initializer_list is const); one message is moved.
  bool write_inbound(std::initializer_list<Message> msgs);
  bool write_inbound(Message&& msg);
  std::optional<Message> read_inbound();
  // Like a transport: bytes through notify_read (clearing a pending read()), then
  // read_complete; and the peer's FIN through notify_input_shutdown.
  void simulate_read(ByteBuffer bytes) {
    notify_read(std::move(bytes));
    notify_read_complete();
    run_pending_tasks();
  }
  void simulate_input_shutdown() {
    notify_input_shutdown();
    run_pending_tasks();
  }
  using Channel::should_keep_reading;
  std::deque<Message>& inbound_messages() noexcept { return inbound_; }
  // User events that reached the tail.
  std::deque<std::any>& user_events() noexcept { return user_events_; }

  // ---- Outbound -----------------------------------------------------------------------------
  // Writes each message through the pipeline, flushes, runs pending tasks, rethrows a recorded
  // exception. True when outbound messages are waiting to be read.
  bool write_outbound(std::initializer_list<Message> msgs);
  bool write_outbound(Message&& msg);
  std::optional<Message> read_outbound();
  std::deque<Message>& outbound_messages() noexcept { return outbound_; }

  // Closes, runs pending tasks, rethrows a recorded exception. True if messages are left.
  bool finish();

  // ---- Time and tasks -----------------------------------------------------------------------
  std::size_t run_pending_tasks() { return embedded_loop_.run_pending_tasks(); }
  // Moves the manual clock forward, then runs what became due.
  void advance_time(std::chrono::nanoseconds d) {
    embedded_loop_.advance_time_by(d);
    embedded_loop_.run_pending_tasks();
  }

  // Rethrows (and forgets) the first exception that reached the tail.
  void check_exception();
  std::size_t recorded_exceptions() const noexcept { return exceptions_.size(); }

  // ---- Scripted writes ----------------------------------------------------------------------
  void set_write_script(WriteScript script) { script_ = std::move(script); }
  const std::vector<std::byte>& written_bytes() const noexcept { return written_; }
  const std::vector<WriteCall>& write_calls() const noexcept { return calls_; }
  // "EPOLLOUT": after the script returned 0, resumes writing.
  void signal_writable() { notify_writable_again(); }
  bool write_pending() const noexcept { return is_write_pending(); }

  // Exposed for tests of the transport contract.
  using Channel::mutable_outbound_buffer;
  using Channel::notify_write_error;

  // ---- Observations -------------------------------------------------------------------------
  int read_requests() const noexcept { return read_requests_; }
  int close_calls() const noexcept { return close_calls_; }
  bool output_shutdown_done() const noexcept { return output_shutdown_calls_ != 0; }

 protected:
  void do_write(OutboundBuffer& out) override;
  void do_close() noexcept override;
  std::error_code do_shutdown_output() noexcept override;
  void do_read_begin() override { ++read_requests_; }
  bool accepts_outbound(const Message&) const noexcept override { return true; }
  void on_unhandled_inbound_message(Message&& msg) override { inbound_.push_back(std::move(msg)); }
  void on_unhandled_inbound_exception(std::exception_ptr cause) override {
    exceptions_.push_back(std::move(cause));
  }
  void on_unhandled_user_event(std::any event) override {
    user_events_.push_back(std::move(event));
  }

 private:
  // What every driving call ends with: the work it queued runs, and a failure in it surfaces.
  void settle();
  bool inbound_written();   // channel_read_complete, settle: true when messages wait
  bool outbound_written();  // flush, settle: true when messages wait
  void write_scripted(OutboundBuffer& out);
  // One call of the pretend kernel, recorded: the bytes it took of `bytes`, or nothing when it
  // took none (the write then waits for signal_writable()) or failed (the channel is told).
  std::optional<std::size_t> scripted_call(OutboundBuffer& out, std::span<const iovec> iovecs,
                                           std::size_t bytes);

  bool open_ = true;
  std::deque<Message> inbound_;
  std::deque<Message> outbound_;
  std::deque<std::any> user_events_;
  std::vector<std::exception_ptr> exceptions_;
  WriteScript script_;
  std::vector<std::byte> written_;
  std::vector<WriteCall> calls_;
  int read_requests_ = 0;
  int close_calls_ = 0;
  int output_shutdown_calls_ = 0;
};

}  // namespace niox
