#include <niox/async/asynchronous_tls_channel.hpp>
#include <niox/async/spawn.hpp>
#include <niox/buffer/gather.hpp>

#include <algorithm>
#include <utility>

namespace niox {

namespace {

// The records of one write() leave together; more would hold more memory per connection for
// no fewer system calls worth having.
constexpr std::size_t records_per_write = 16;

void check(const std::error_code& ec, const char* what) {
  if (ec) throw std::system_error(ec, what);
}

std::size_t copy_into(ByteBuffer& from, std::span<ByteBuffer> dsts) {
  std::size_t moved = 0;
  for (ByteBuffer& dst : dsts) {
    const std::size_t n = std::min(from.remaining(), dst.remaining());
    if (n == 0) continue;
    dst.put(from.bytes().first(n));
    from.position(from.position() + n);
    moved += n;
  }
  return moved;
}

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
  std::error_code ignored;
  co_await flush_engine(ignored);
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
        // The kernel could take the records over here; without its tls ULP (or until the
        // key hand-over is built) they stay in user space.
        (void)kernel_tls_available();
        record_path_ = RecordPath::user_space;
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
    if (engine_.is_inbound_done()) co_return -1;
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
  while (!engine_.is_inbound_done()) {
    discard.clear();
    std::int64_t n = co_await read_impl({&discard, 1}, ec);
    check(ec, "AsynchronousTlsChannel::shutdown");
    if (n < 0) co_return;
  }
}

Task<void> AsynchronousTlsChannel::shutdown_impl(std::error_code& ec) {
  ec.clear();
  engine_.close_outbound();
  co_await flush_engine(ec);
  // A read outstanding meanwhile sees the peer's close_notify itself (as -1).
  if (ec || engine_.is_inbound_done() || !handshake_done_ || reading_) co_return;
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
