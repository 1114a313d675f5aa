#include <niox/transport/embedded_channel.hpp>
#include <niox/transport/transport_error.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <unistd.h>

namespace niox {

// ---- EmbeddedEventLoop --------------------------------------------------------------------

ScheduledFuture EmbeddedEventLoop::schedule(std::chrono::nanoseconds delay, Runnable task) {
  auto state = detail::new_scheduled_state();
  if (delay.count() < 0) {
    delay = std::chrono::nanoseconds(0);
  }
  timers_.emplace(std::make_pair(now_ + delay, timer_seq_++), Timer{state, std::move(task)});
  return ScheduledFuture(std::move(state));
}

std::size_t EmbeddedEventLoop::run_pending_tasks() {
  std::size_t ran = 0;
  for (;;) {
    while (!tasks_.empty()) {
      auto t = std::move(tasks_.front());
      tasks_.pop_front();
      t();
      ++ran;
    }
    bool any = false;
    while (!timers_.empty() && timers_.begin()->first.first <= now_) {
      auto node = timers_.extract(timers_.begin());
      if (node.mapped().state->claim_for_run()) {
        node.mapped().task();
        ++ran;
        any = true;
      }
    }
    if (!any && tasks_.empty()) {
      return ran;
    }
  }
}

std::size_t EmbeddedEventLoop::scheduled_tasks() const noexcept {
  return static_cast<std::size_t>(std::count_if(
      timers_.begin(), timers_.end(), [](const auto& t) { return !t.second.state->is_done(); }));
}

std::optional<Executor::Clock::time_point> EmbeddedEventLoop::next_scheduled_time() const noexcept {
  for (const auto& t : timers_) {
    if (!t.second.state->is_done()) {
      return t.first.first;
    }
  }
  return std::nullopt;
}

// ---- EmbeddedChannel ----------------------------------------------------------------------

namespace {

std::optional<Message> take_front(std::deque<Message>& queue) {
  if (queue.empty()) {
    return std::nullopt;
  }
  auto m = std::move(queue.front());
  queue.pop_front();
  return m;
}

}  // namespace

EmbeddedChannel::EmbeddedChannel() : Channel(embedded_loop_) { notify_active(); }

EmbeddedChannel::EmbeddedChannel(std::initializer_list<std::shared_ptr<ChannelHandler>> handlers)
    : Channel(embedded_loop_) {
  for (const auto& h : handlers) {
    pipeline().add_last(h);
  }
  notify_active();
}

EmbeddedChannel::~EmbeddedChannel() { destroy_pipeline(); }

bool EmbeddedChannel::write_inbound(std::initializer_list<Message> msgs) {
  for (const auto& m : msgs) {
    pipeline().fire_channel_read(Message(m));
  }
  return inbound_written();
}
bool EmbeddedChannel::write_inbound(Message&& msg) {
  pipeline().fire_channel_read(std::move(msg));
  return inbound_written();
}
bool EmbeddedChannel::inbound_written() {
  pipeline().fire_channel_read_complete();
  settle();
  return !inbound_.empty();
}

std::optional<Message> EmbeddedChannel::read_inbound() { return take_front(inbound_); }

bool EmbeddedChannel::write_outbound(std::initializer_list<Message> msgs) {
  for (const auto& m : msgs) {
    write(Message(m));
  }
  return outbound_written();
}
bool EmbeddedChannel::write_outbound(Message&& msg) {
  write(std::move(msg));
  return outbound_written();
}
bool EmbeddedChannel::outbound_written() {
  flush();
  settle();
  return !outbound_.empty();
}

std::optional<Message> EmbeddedChannel::read_outbound() { return take_front(outbound_); }

bool EmbeddedChannel::finish() {
  close();
  settle();
  return !inbound_.empty() || !outbound_.empty();
}

void EmbeddedChannel::settle() {
  run_pending_tasks();
  check_exception();
}

void EmbeddedChannel::check_exception() {
  if (exceptions_.empty()) {
    return;
  }
  auto e = exceptions_.front();
  exceptions_.clear();
  std::rethrow_exception(e);
}

void EmbeddedChannel::do_close() noexcept {
  ++close_calls_;
  open_ = false;
}

std::error_code EmbeddedChannel::do_shutdown_output() noexcept {
  ++output_shutdown_calls_;
  return {};
}

void EmbeddedChannel::do_write(OutboundBuffer& out) {
  if (script_) {
    write_scripted(out);
    return;
  }
  while (Message* m = out.current()) {
    outbound_.push_back(*m);
    out.remove();
  }
}

std::optional<std::size_t> EmbeddedChannel::scripted_call(OutboundBuffer& out,
                                                          std::span<const iovec> iovecs,
                                                          std::size_t bytes) {
  long res = script_(iovecs, bytes);
  calls_.push_back({iovecs.size(), bytes, res});
  if (res == 0) {
    out.gather_done();
    set_write_pending(true);
    return std::nullopt;
  }
  if (res < 0) {
    notify_write_error({static_cast<int>(-res), std::system_category()});
    return std::nullopt;
  }
  return std::min(static_cast<std::size_t>(res), bytes);
}

void EmbeddedChannel::write_scripted(OutboundBuffer& out) {
  // A bounded number of writes per flush, then the pretend kernel is left to the next flush.
  for (int spin = 0; spin < 16; ++spin) {
    GatherWrite g = out.gather();
    if (g.empty()) {
      return;
    }
    if (g.other != nullptr) {
      outbound_.push_back(*g.other);
      out.gather_done();
      out.remove();
      continue;
    }
    if (g.file_region != nullptr) {
      FileRegion& r = *g.file_region;
      if (r.transferred() == 0) {
        if (auto ec = r.check_file_length()) {
          notify_write_error(ec);
          return;
        }
      }
      std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(r.remaining(), 1u << 20));
      auto taken = scripted_call(out, {}, want);
      if (!taken) {
        return;
      }
      std::size_t n = *taken;
      std::size_t old = written_.size();
      written_.resize(old + n);
      ssize_t got = ::pread(r.fd(), written_.data() + old, n, static_cast<off_t>(r.next_offset()));
      if (got <= 0) {
        written_.resize(old);
        // sendfile returning 0 early: the file shrank under us. Fail instead of spinning.
        notify_write_error(got < 0 ? std::error_code(errno, std::system_category())
                                   : std::error_code(transport::Errc::file_region_truncated));
        return;
      }
      written_.resize(old + static_cast<std::size_t>(got));
      out.remove_bytes(static_cast<std::size_t>(got));
      continue;
    }
    auto taken = scripted_call(out, g.iovecs, g.bytes);
    if (!taken) {
      return;
    }
    std::size_t n = *taken;
    // Copy exactly what the pretend kernel took, iovec by iovec.
    std::size_t left = n;
    for (const auto& iov : g.iovecs) {
      if (left == 0) {
        break;
      }
      std::size_t k = std::min(left, iov.iov_len);
      auto* p = static_cast<const std::byte*>(iov.iov_base);
      written_.insert(written_.end(), p, p + k);
      left -= k;
    }
    out.remove_bytes(n);
  }
  // Spun enough: give other work a turn, then go on (Netty's incompleteWrite).
  if (!out.is_empty()) {
    event_loop().execute([this] { flush_now(); });
  }
}

}  // namespace niox
