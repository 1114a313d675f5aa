#include <niox/transport/channel.hpp>
#include <niox/transport/transport_error.hpp>

#include "transport/log.hpp"
#include "transport/run_on_loop.hpp"

#include <atomic>
#include <future>

namespace niox {

namespace {
std::atomic<Channel::Id> next_channel_id{1};
}  // namespace

namespace detail {

bool must_hop(const Channel& channel) noexcept {
  // Before any thread ran the loop, its owner sets things up from its own thread.
  return !channel.link_->in_event_loop() && !channel.link_->unbound();
}

void run_on_loop_and_wait(Channel& channel, const std::function<void()>& f) {
  if (!must_hop(channel)) {
    f();
    return;
  }
  if (detail::on_loop_thread()) {
    throw BlockingOperationException(
        "niox: changing a channel of another event loop from a loop thread would block this "
        "loop; hand the change over with execute()");
  }
  auto done = std::make_shared<std::promise<void>>();
  auto result = done->get_future();
  Runnable task([self = channel.shared_from_this(), done, &f] {
    try {
      f();
      done->set_value();
    } catch (...) {
      done->set_exception(std::current_exception());
    }
  });
  if (!channel.link_->execute(task)) {
    throw IllegalStateException("niox: the channel's event loop is gone");
  }
  result.get();
}

}  // namespace detail

// ---- ChannelConfig ------------------------------------------------------------------------

ChannelConfig& ChannelConfig::set_auto_read(bool on) {
  detail::run_on_loop_and_wait(channel_, [&] {
    bool was = auto_read_;
    auto_read_ = on;
    if (on && !was) {
      channel_.read();
    }
  });
  return *this;
}

WriteBufferWaterMark ChannelConfig::write_buffer_water_mark() const noexcept {
  return channel_.outbound_.water_mark();
}
ChannelConfig& ChannelConfig::set_write_buffer_water_mark(WriteBufferWaterMark mark) {
  detail::run_on_loop_and_wait(channel_, [&] { channel_.outbound_.set_water_mark(mark); });
  return *this;
}
std::size_t ChannelConfig::write_buffer_hard_limit() const noexcept {
  return channel_.outbound_.hard_limit();
}
ChannelConfig& ChannelConfig::set_write_buffer_hard_limit(std::size_t bytes) {
  detail::run_on_loop_and_wait(channel_, [&] { channel_.outbound_.set_hard_limit(bytes); });
  return *this;
}
ChannelConfig& ChannelConfig::set_max_messages_per_read(int n) {
  if (n <= 0) {
    throw IllegalArgumentException("max_messages_per_read must be positive");
  }
  detail::run_on_loop_and_wait(channel_, [&] { max_messages_per_read_ = n; });
  return *this;
}
ChannelConfig& ChannelConfig::set_write_zero_copy_threshold(std::size_t bytes) {
  detail::run_on_loop_and_wait(channel_, [&] { write_zero_copy_threshold_ = bytes; });
  return *this;
}

ChannelConfig& ChannelConfig::set_allow_half_closure(bool on) {
  detail::run_on_loop_and_wait(channel_, [&] { allow_half_closure_ = on; });
  return *this;
}
ChannelConfig& ChannelConfig::set_connect_timeout(std::chrono::milliseconds t) {
  detail::run_on_loop_and_wait(channel_, [&] { connect_timeout_ = t; });
  return *this;
}
std::size_t ChannelConfig::max_bytes_per_gathering_write() const noexcept {
  return channel_.outbound_.max_bytes_per_write();
}
ChannelConfig& ChannelConfig::set_max_bytes_per_gathering_write(std::size_t bytes) {
  detail::run_on_loop_and_wait(channel_,
                               [&] { channel_.outbound_.set_max_bytes_per_write(bytes); });
  return *this;
}

// ---- Channel ------------------------------------------------------------------------------

Channel::Channel(Executor& executor)
    : executor_(&executor),
      link_(executor.link()),
      id_(next_channel_id.fetch_add(1, std::memory_order_relaxed)),
      config_(*this),
      pipeline_(*this) {
  outbound_.set_writability_listener(
      [](void* self, bool) {
        static_cast<Channel*>(self)->pipeline_.fire_channel_writability_changed();
      },
      this);
}

Channel::~Channel() { pipeline_.destroy(); }

ChannelFuture Channel::close_future() const {
  std::shared_ptr<detail::PromiseState> state;
  {
    std::lock_guard held(close_lock_);
    if (!close_state_) close_state_ = ChannelPromise(link_).state_;
    state = close_state_;
  }
  ChannelPromise promise(std::move(state));
  // The close sets closed_ before it looks at close_state_; both under or after the lock, so
  // either the close sees this state or this sees closed_ (try_success is idempotent).
  if (closed_.load()) promise.try_success();
  return promise.future();
}

bool Channel::is_writable() const noexcept {
  return !closed_ && !is_output_shutdown() && outbound_.is_writable();
}
std::size_t Channel::bytes_before_unwritable() const noexcept {
  return is_writable() ? outbound_.bytes_before_unwritable() : 0;
}
std::size_t Channel::bytes_before_writable() const noexcept {
  return outbound_.bytes_before_writable();
}

ChannelFuture Channel::write(Message&& msg) {
  ChannelPromise p = new_promise();
  ChannelFuture f = p.future();
  write(std::move(msg), std::move(p));
  return f;
}
void Channel::write(Message&& msg, ChannelPromise promise) {
  with_promise_on_loop(
      std::move(promise),
      [this, m = std::move(msg)](ChannelPromise p) mutable {
        pipeline_.write(std::move(m), std::move(p));
      },
      [](ChannelPromise p) { p.try_failure(transport::Errc::channel_closed); });
}
ChannelFuture Channel::write_and_flush(Message&& msg) {
  ChannelPromise p = new_promise();
  ChannelFuture f = p.future();
  write_and_flush(std::move(msg), std::move(p));
  return f;
}
void Channel::write_and_flush(Message&& msg, ChannelPromise promise) {
  with_promise_on_loop(
      std::move(promise),
      [this, m = std::move(msg)](ChannelPromise p) mutable {
        pipeline_.write_and_flush(std::move(m), std::move(p));
      },
      [](ChannelPromise p) { p.try_failure(transport::Errc::channel_closed); });
}
Channel& Channel::flush() {
  on_loop([this] { pipeline_.flush(); });
  return *this;
}
Channel& Channel::read() {
  on_loop([this] { pipeline_.read(); });
  return *this;
}
ChannelFuture Channel::close() {
  ChannelPromise p = new_promise();
  ChannelFuture f = p.future();
  close(std::move(p));
  return f;
}
void Channel::close(ChannelPromise promise) {
  with_promise_on_loop(
      std::move(promise), [this](ChannelPromise p) { pipeline_.close(std::move(p)); },
      [this](ChannelPromise p) {
        // The loop is gone: nothing runs there any more, so the transport lets go of its
        // descriptor here, once.
        do_close_without_loop();
        p.try_failure(transport::Errc::channel_closed);
      });
}
ChannelFuture Channel::close_after_flush() {
  ChannelPromise p = new_promise();
  ChannelFuture f = p.future();
  close_after_flush(std::move(p));
  return f;
}
void Channel::close_after_flush(ChannelPromise promise) {
  with_promise_on_loop(
      std::move(promise),
      [this](ChannelPromise p) {
        ChannelFuture last;
        if (is_output_shutdown()) {
          // No more writes: the shutdown's FIN (sent, or due) follows the last bytes.
          ChannelPromise fin = new_promise();
          unsafe_shutdown_output(fin);
          last = fin.future();
        } else {
          expect_close();
          // The empty buffer completes once everything written before it has left.
          last = write_and_flush(ByteBuffer());
        }
        if (last.is_done()) {
          close(std::move(p));
          return;
        }
        // A channel no shared_ptr owns (a stack EmbeddedChannel) owns its executor, and the
        // listener dies with it.
        last.add_listener([this, self = weak_from_this().lock(), p = std::move(p)](
                              const std::error_code&) mutable { close(std::move(p)); });
      },
      [this](ChannelPromise p) { close(std::move(p)); });
}
ChannelFuture Channel::shutdown_output() {
  ChannelPromise p = new_promise();
  ChannelFuture f = p.future();
  shutdown_output(std::move(p));
  return f;
}
void Channel::shutdown_output(ChannelPromise promise) {
  with_promise_on_loop(
      std::move(promise), [this](ChannelPromise p) { pipeline_.shutdown_output(std::move(p)); },
      [](ChannelPromise p) { p.try_failure(transport::Errc::channel_closed); });
}

bool Channel::accepts_outbound(const Message& msg) const noexcept {
  return msg.is_byte_buffer() || msg.is_file_region();
}

void Channel::on_unhandled_inbound_message(Message&& msg) {
  log(LogLevel::warn,
      "channel {}: a message reached the tail of the pipeline and was dropped "
      "(bytes: {}); check the pipeline configuration",
      id_, msg.readable_bytes());
}
void Channel::on_unhandled_inbound_exception(std::exception_ptr cause) {
  log(LogLevel::warn, "channel {}: an exception reached the tail of the pipeline: {}", id_,
      detail::describe(cause));
}
void Channel::on_unhandled_user_event(std::any) {}

// ---- Unsafe operations (from the head) ----------------------------------------------------

void Channel::unsafe_write(Message&& msg, ChannelPromise&& promise) {
  if (closed_) {
    promise.try_failure(transport::Errc::channel_closed);
    return;
  }
  if (output_shutdown_ || output_shutdown_pending_) {
    promise.try_failure(transport::Errc::output_shutdown);
    return;
  }
  if (!accepts_outbound(msg)) {
    promise.try_failure(transport::Errc::unsupported_message);
    return;
  }
  outbound_.add_message(std::move(msg), std::move(promise));
}

void Channel::unsafe_flush() {
  if (closed_) {
    return;
  }
  outbound_.add_flush();
  flush_now();
}

void Channel::flush_now() {
  if (in_flush_ || write_pending_ || closed_) {
    return;
  }
  if (!outbound_.is_empty()) {
    in_flush_ = true;
    try {
      do_write(outbound_);
    } catch (...) {
      in_flush_ = false;
      log(LogLevel::warn, "channel {}: do_write threw: {}", id_,
          detail::describe(std::current_exception()));
      notify_write_error(transport::Errc::handler_failed);
      return;
    }
    in_flush_ = false;
  }
  maybe_finish_shutdown_output();
}

void Channel::notify_writable_again() {
  write_pending_ = false;
  flush_now();
}

void Channel::notify_write_error(std::error_code ec) {
  write_pending_ = false;
  outbound_.gather_done();
  outbound_.fail_flushed(ec);
  close_for_transport();
}

void Channel::unsafe_read() {
  if (closed_ || !is_active() || input_shutdown_) {
    return;
  }
  read_pending_ = true;
  do_read_begin();
}

void Channel::notify_read(ByteBuffer&& bytes) {
  read_pending_ = false;
  pipeline_.fire_channel_read(std::move(bytes));
}

void Channel::notify_read_complete() { pipeline_.fire_channel_read_complete(); }

void Channel::notify_input_shutdown() {
  if (closed_ || input_shutdown_) {
    return;
  }
  read_pending_ = false;
  if (config_.is_allow_half_closure()) {
    input_shutdown_ = true;
    pipeline_.fire_user_event_triggered(ChannelInputShutdownEvent{});
  } else {
    close_for_transport();
  }
}

void Channel::notify_active() {
  if (active_fired_) {
    return;
  }
  active_fired_ = true;
  pipeline_.fire_channel_active();
  if (config_.is_auto_read()) {
    read();
  }
}

void Channel::close_for_transport() { unsafe_close(ChannelPromise()); }

void Channel::unsafe_close(ChannelPromise promise) {
  if (closed_) {
    // Completes when the first close did (it already has: close is synchronous here).
    close_future().add_listener(
        [promise](const std::error_code&) mutable { promise.try_success(); });
    return;
  }
  bool was_active = active_fired_;
  closed_ = true;
  write_pending_ = false;
  outbound_.fail_all(transport::Errc::channel_closed);
  shutdown_promise_.try_failure(transport::Errc::channel_closed);
  do_close();
  // A close_future() that made its state before closed_ was set is completed here; one after
  // it completes its own state (both are sequentially consistent: one of them sees the other).
  std::shared_ptr<detail::PromiseState> state;
  {
    std::lock_guard held(close_lock_);
    state = close_state_;
  }
  if (state) ChannelPromise(std::move(state)).try_success();
  promise.try_success();
  std::shared_ptr<Channel> self = take_self_reference();
  if (was_active) {
    // Later, like Netty: handlers see inactive after the close call returned.
    // A shared_ptr-owned channel is kept alive by the task; one that is not (a stack
    // EmbeddedChannel) owns its executor, so the task dies with it.
    if (!self) self = weak_from_this().lock();
    executor_->execute([this, self = std::move(self)] { pipeline_.fire_channel_inactive(); });
  } else if (self) {
    executor_->execute([self = std::move(self)] {});  // we are inside a call on this channel
  }
}

void Channel::unsafe_shutdown_output(ChannelPromise promise) {
  if (closed_) {
    promise.try_failure(transport::Errc::channel_closed);
    return;
  }
  if (output_shutdown_) {
    promise.try_success();
    return;
  }
  if (output_shutdown_pending_) {
    shutdown_promise_.future().add_listener([promise](const std::error_code& ec) mutable {
      if (ec) {
        promise.try_failure(ec);
      } else {
        promise.try_success();
      }
    });
    return;
  }
  output_shutdown_pending_ = true;
  shutdown_promise_ = std::move(promise);
  // Everything written before the shutdown goes out first, and its tail with the FIN.
  if (outbound_.total_entries() > outbound_.size()) expect_close();  // some not yet flushed
  outbound_.add_flush();
  flush_now();
}

void Channel::maybe_finish_shutdown_output() {
  if (!output_shutdown_pending_ || !outbound_.is_empty() || write_pending_ || closed_) {
    return;
  }
  output_shutdown_pending_ = false;
  output_shutdown_ = true;
  auto ec = do_shutdown_output();
  auto p = std::move(shutdown_promise_);
  shutdown_promise_ = ChannelPromise();
  if (ec) {
    p.try_failure(ec);
  } else {
    p.try_success();
  }
}

}  // namespace niox
