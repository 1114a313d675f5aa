#include "channels/kernel_tls.hpp"

#include <niox/async/asynchronous_tls_channel.hpp>
#include <niox/async/spawn.hpp>
#include <niox/buffer/gather.hpp>

#include <algorithm>
#include <cerrno>
#include <utility>

#include <poll.h>

namespace niox {

namespace {

// The records of one write() leave together; more would hold more memory per connection for
// no fewer system calls worth having.
constexpr std::size_t records_per_write = 16;

void check(const std::error_code& ec, const char* what) {
  if (ec) throw std::system_error(ec, what);
}

// Waits until the socket is readable or writable (the kTLS paths' recvmsg and sendmsg are
// made by hand, outside the loop's read and write operations).
auto poll_socket(AsynchronousSocketChannel& channel, int events, std::error_code& ec) {
  return detail::loop_operation<void>(
      channel.loop(), "poll", &ec,
      [fd = channel.native_handle(), events](EventLoop& loop,
                                             const std::shared_ptr<detail::LoopOpState>& st) {
        return loop.poll(fd, events, [st](std::error_code e, int) { st->complete(e, 0); });
      },
      [](detail::LoopOpState&) {});
}

bool would_block(const std::error_code& ec) {
  return ec == std::errc::resource_unavailable_try_again || ec == std::errc::operation_would_block;
}

constexpr std::uint8_t close_notify_alert = 0;

}  // namespace

AsynchronousTlsChannel::AsynchronousTlsChannel(AsynchronousSocketChannel channel, SslEngine engine,
                                               Options options)
    : channel_(std::move(channel)),
      engine_(std::move(engine)),
      options_(options),
      // Two records' room: one read can bring a whole record plus the next one's start.
      net_in_(ByteBuffer::allocate(2 * SslEngine::packet_buffer_size())),
      app_in_(ByteBuffer::allocate(SslEngine::application_buffer_size())) {
  app_in_.limit(0);
}

Task<void> AsynchronousTlsChannel::flush_engine(std::error_code& ec) {
  // Handshake flights are a few KiB; a certificate chain may take more than one call.
  ByteBuffer out = ByteBuffer::allocate(SslEngine::packet_buffer_size());
  while (engine_.handshake_status() == HandshakeStatus::need_wrap) {
    out.clear();
    std::error_code wrap_ec;
    while (engine_.handshake_status() == HandshakeStatus::need_wrap && out.has_remaining()) {
      SslEngineResult r = engine_.wrap(std::span<ByteBuffer>{}, out, wrap_ec);
      if (wrap_ec && !ec) ec = wrap_ec;
      if (r.bytes_produced == 0) break;
    }
    out.flip();
    if (!out.has_remaining()) co_return;
    std::error_code write_ec;
    co_await channel_.write(out, write_ec);
    if (write_ec) {
      if (!ec) ec = write_ec;
      co_return;
    }
  }
}

Task<void> AsynchronousTlsChannel::send_alert() {
  // The engine's alert would carry a sequence number the kernel has moved past.
  if (tx_path_ == RecordPath::ktls) co_return;
  std::error_code ignored;
  co_await flush_engine(ignored);
}

void AsynchronousTlsChannel::hand_over_outbound() {
  if (!kernel_tls_available() || !detail::hand_over_traffic_keys(engine_, channel_.native_handle(),
                                                                 TrafficDirection::outbound))
    return;
  tx_path_ = RecordPath::ktls;
  rx_hand_over_pending_ = true;
  hand_over_inbound();
}

void AsynchronousTlsChannel::hand_over_inbound() {
  // Bytes read but not yet unwrapped are records the kernel will never see: they go through
  // the engine first, and the next read tries again.
  if (!rx_hand_over_pending_ || net_in_.position() != 0) return;
  rx_hand_over_pending_ = false;
  if (detail::hand_over_traffic_keys(engine_, channel_.native_handle(), TrafficDirection::inbound))
    rx_path_ = RecordPath::ktls;
}

Task<std::int64_t> AsynchronousTlsChannel::read_kernel(std::span<ByteBuffer> dsts,
                                                       std::error_code& ec) {
  for (;;) {
    if (app_in_.has_remaining()) {
      co_return static_cast<std::int64_t>(copy_into(app_in_, dsts));
    }
    if (kernel_inbound_done_) co_return -1;
    auto first = std::find_if(dsts.begin(), dsts.end(),
                              [](const ByteBuffer& b) { return b.has_remaining(); });
    // A record never exceeds 16 KiB: straight into the caller's buffer when one holds it.
    const bool direct = first->remaining() >= SslEngine::application_buffer_size();
    if (!direct) app_in_.clear();
    const std::span<std::byte> room = direct ? first->writable_bytes() : app_in_.writable_bytes();
    std::uint8_t type = 0;
    std::error_code rec_ec;
    const long n = detail::receive_kernel_tls_record(channel_.native_handle(), room, type, rec_ec);
    if (!direct) app_in_.limit(0);
    if (n < 0) {
      if (!would_block(rec_ec)) {
        ec = rec_ec;
        co_return 0;
      }
      co_await poll_socket(channel_, POLLIN, ec);
      if (ec) co_return 0;
      continue;
    }
    if (n == 0) {
      ec = make_error_code(SslErrc::truncated);
      co_return 0;
    }
    const auto got = static_cast<std::size_t>(n);
    switch (type) {
      case detail::tls_application_data_record:
        if (direct) {
          first->position(first->position() + got);
          co_return n;
        }
        app_in_.limit(got);
        continue;
      case detail::tls_alert_record:
        if (got >= 2 && static_cast<std::uint8_t>(room[1]) == close_notify_alert) {
          kernel_inbound_done_ = true;
          co_return -1;
        }
        ec = make_error_code(SslErrc::alert_received);
        co_return 0;
      case detail::tls_handshake_record:
        if (detail::only_session_tickets(room.first(got))) continue;
        ec = make_error_code(SslErrc::kernel_tls_unsupported);
        co_return 0;
      default: ec = make_error_code(SslErrc::not_ssl_record); co_return 0;
    }
  }
}

Task<void> AsynchronousTlsChannel::send_kernel_close_notify(std::error_code& ec) {
  if (kernel_close_notify_sent_) co_return;
  kernel_close_notify_sent_ = true;
  static constexpr std::byte close_notify[] = {std::byte{1}, std::byte{close_notify_alert}};
  for (;;) {
    const std::error_code sent = detail::send_kernel_tls_record(
        channel_.native_handle(), detail::tls_alert_record, close_notify);
    if (!would_block(sent)) {
      ec = sent;
      co_return;
    }
    co_await poll_socket(channel_, POLLOUT, ec);
    if (ec) co_return;
  }
}

Task<void> AsynchronousTlsChannel::fill(std::error_code& ec) {
  if (!net_in_.has_remaining()) {
    // Cannot happen with two records' room and whole records consumed; guard the invariant.
    ec = make_error_code(SslErrc::record_overflow);
    co_return;
  }
  std::int64_t n = co_await channel_.read(net_in_, ec);
  if (ec) co_return;
  if (n < 0) {
    engine_.close_inbound(ec);
    // A peer that leaves before sending anything has still cut the stream short.
    if (!ec) ec = make_error_code(SslErrc::truncated);
  }
}

Task<void> AsynchronousTlsChannel::handshake_impl(std::error_code& ec) {
  ec.clear();
  if (handshake_done_) co_return;
  engine_.begin_handshake();
  for (;;) {
    switch (engine_.handshake_status()) {
      case HandshakeStatus::need_wrap:
        co_await flush_engine(ec);
        if (ec) co_return;
        break;
      case HandshakeStatus::need_unwrap: {
        net_in_.flip();
        app_in_.clear();
        SslEngineResult r = engine_.unwrap(net_in_, app_in_, ec);
        net_in_.compact();
        app_in_.flip();
        if (ec) {
          co_await send_alert();
          co_return;
        }
        if (r.status == SslEngineStatus::buffer_underflow) {
          co_await fill(ec);
          if (ec) co_return;
        } else if (r.status == SslEngineStatus::closed) {
          ec = make_error_code(SslErrc::truncated);
          co_return;
        }
        break;
      }
      default:
        handshake_done_ = true;
        // Every handshake byte has left (flush_engine waited for its write): from here on
        // the kernel may make the records, where it can.
        hand_over_outbound();
        co_return;
    }
  }
}

Task<std::int64_t> AsynchronousTlsChannel::read_impl(std::span<ByteBuffer> dsts,
                                                     std::error_code& ec) {
  ec.clear();
  if (total_remaining(dsts) == 0) co_return 0;
  co_await handshake_impl(ec);
  if (ec) co_return 0;
  reading_ = true;
  struct Done {
    bool& flag;
    ~Done() { flag = false; }
  } done{reading_};
  for (;;) {
    if (app_in_.has_remaining()) {
      co_return static_cast<std::int64_t>(copy_into(app_in_, dsts));
    }
    if (inbound_done()) co_return -1;
    hand_over_inbound();
    if (rx_path_ == RecordPath::ktls) co_return co_await read_kernel(dsts, ec);
    net_in_.flip();
    // Straight into the caller's buffers when any record fits; else through app_in_.
    const bool direct = total_remaining(dsts) >= SslEngine::application_buffer_size();
    SslEngineResult r;
    if (direct) {
      r = engine_.unwrap(net_in_, dsts, ec);
    } else {
      app_in_.clear();
      r = engine_.unwrap(net_in_, app_in_, ec);
      app_in_.flip();
    }
    net_in_.compact();
    if (ec) {
      co_await send_alert();
      co_return 0;
    }
    if (direct && r.bytes_produced > 0) co_return static_cast<std::int64_t>(r.bytes_produced);
    if (r.status == SslEngineStatus::closed && !app_in_.has_remaining()) co_return -1;
    if (r.status == SslEngineStatus::buffer_underflow) {
      co_await fill(ec);
      if (ec) co_return 0;
    }
    // Else a record without application data (a TLS 1.3 session ticket): the next one.
  }
}

Task<std::size_t> AsynchronousTlsChannel::write_impl(std::span<ByteBuffer> srcs,
                                                     std::error_code& ec) {
  ec.clear();
  co_await handshake_impl(ec);
  if (ec) co_return 0;
  std::size_t total = 0;
  if (tx_path_ == RecordPath::ktls) {
    // Plaintext: the kernel makes the records.
    if (kernel_close_notify_sent_) {
      ec = make_error_code(SslErrc::engine_closed);
      co_return 0;
    }
    while (total_remaining(srcs) > 0) {
      const std::size_t n = co_await channel_.write(srcs, ec);
      total += n;
      if (ec) co_return total;
    }
    co_return total;
  }
  while (total_remaining(srcs) > 0) {
    const std::size_t records = std::min(
        records_per_write, (total_remaining(srcs) + SslEngine::application_buffer_size() - 1) /
                               SslEngine::application_buffer_size());
    const std::size_t room = records * SslEngine::packet_buffer_size();
    if (net_out_.capacity() < room) net_out_ = ByteBuffer::allocate(room);
    net_out_.clear();
    std::size_t consumed = 0;
    while (total_remaining(srcs) > 0 && net_out_.remaining() >= SslEngine::packet_buffer_size()) {
      SslEngineResult r = engine_.wrap(srcs, net_out_, ec);
      if (ec) {
        co_await send_alert();
        co_return total;
      }
      if (r.status == SslEngineStatus::closed) {
        ec = make_error_code(SslErrc::engine_closed);
        co_return total;
      }
      consumed += r.bytes_consumed;
    }
    net_out_.flip();
    co_await channel_.write(net_out_, ec);
    if (ec) co_return total;
    total += consumed;
  }
  co_return total;
}

Task<void> AsynchronousTlsChannel::await_close_notify() {
  ByteBuffer discard = ByteBuffer::allocate(SslEngine::application_buffer_size());
  std::error_code ec;
  while (!inbound_done()) {
    discard.clear();
    std::int64_t n = co_await read_impl({&discard, 1}, ec);
    check(ec, "AsynchronousTlsChannel::shutdown");
    if (n < 0) co_return;
  }
}

Task<void> AsynchronousTlsChannel::shutdown_impl(std::error_code& ec) {
  ec.clear();
  engine_.close_outbound();
  if (tx_path_ == RecordPath::ktls) {
    co_await send_kernel_close_notify(ec);
  } else {
    co_await flush_engine(ec);
  }
  // A read outstanding meanwhile sees the peer's close_notify itself (as -1).
  if (ec || inbound_done() || !handshake_done_ || reading_) co_return;
  // The wait is bounded; running out is the peer's slowness, not an error of ours.
  try {
    co_await with_timeout(loop(), await_close_notify(), options_.close_notify_timeout);
  } catch (const std::system_error& e) {
    if (e.code() != std::errc::timed_out) ec = e.code();
  }
}

Task<void> AsynchronousTlsChannel::handshake(std::error_code& ec) { return handshake_impl(ec); }
Task<void> AsynchronousTlsChannel::handshake() {
  std::error_code ec;
  co_await handshake_impl(ec);
  check(ec, "AsynchronousTlsChannel::handshake");
}

Task<std::int64_t> AsynchronousTlsChannel::read(std::span<ByteBuffer> dsts, std::error_code& ec) {
  return read_impl(dsts, ec);
}
Task<std::int64_t> AsynchronousTlsChannel::read(std::span<ByteBuffer> dsts) {
  std::error_code ec;
  std::int64_t n = co_await read_impl(dsts, ec);
  check(ec, "AsynchronousTlsChannel::read");
  co_return n;
}
Task<std::int64_t> AsynchronousTlsChannel::read(ByteBuffer& dst, std::error_code& ec) {
  return read_impl({&dst, 1}, ec);
}
Task<std::int64_t> AsynchronousTlsChannel::read(ByteBuffer& dst) { return read({&dst, 1}); }

Task<std::size_t> AsynchronousTlsChannel::write(std::span<ByteBuffer> srcs, std::error_code& ec) {
  return write_impl(srcs, ec);
}
Task<std::size_t> AsynchronousTlsChannel::write(std::span<ByteBuffer> srcs) {
  std::error_code ec;
  std::size_t n = co_await write_impl(srcs, ec);
  check(ec, "AsynchronousTlsChannel::write");
  co_return n;
}
Task<std::size_t> AsynchronousTlsChannel::write(ByteBuffer& src, std::error_code& ec) {
  return write_impl({&src, 1}, ec);
}
Task<std::size_t> AsynchronousTlsChannel::write(ByteBuffer& src) { return write({&src, 1}); }
Task<std::size_t> AsynchronousTlsChannel::write_all(std::span<ByteBuffer> srcs,
                                                    std::error_code& ec) {
  return write_impl(srcs, ec);
}
Task<std::size_t> AsynchronousTlsChannel::write_all(std::span<ByteBuffer> srcs) {
  return write(srcs);
}

Task<void> AsynchronousTlsChannel::shutdown(std::error_code& ec) { return shutdown_impl(ec); }
Task<void> AsynchronousTlsChannel::shutdown() {
  std::error_code ec;
  co_await shutdown_impl(ec);
  check(ec, "AsynchronousTlsChannel::shutdown");
}

}  // namespace niox
