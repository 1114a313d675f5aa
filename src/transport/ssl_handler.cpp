#include "channels/fd_io.hpp"
#include "channels/kernel_tls.hpp"

#include <niox/buffer/buffer_pool.hpp>
#include <niox/transport/channel.hpp>
#include <niox/transport/loop_socket_channel.hpp>
#include <niox/transport/ssl_handler.hpp>
#include <niox/transport/transport_error.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <optional>
#include <span>
#include <vector>

#include <poll.h>
#include <unistd.h>

namespace niox {
namespace {

// Room for `plaintext` bytes once encrypted: one record per 16 KiB, each with its overhead.
constexpr std::size_t encrypted_size(std::size_t plaintext) {
  constexpr std::size_t app = SslEngine::application_buffer_size();
  constexpr std::size_t overhead = SslEngine::packet_buffer_size() - app;
  const std::size_t records = plaintext == 0 ? 1 : (plaintext + app - 1) / app;
  return plaintext + records * overhead;
}

// A FileRegion is read and encrypted in chunks of whole records whose ciphertext still fits the
// pool's largest class, so that every buffer is pooled memory taken from the thread's cache.
// One large buffer would be unpooled: mapped, faulted in and zeroed again for every piece.
constexpr std::size_t region_chunk = 3 * SslEngine::application_buffer_size();
static_assert(encrypted_size(region_chunk) <= BufferPool::max_class_size);
// How much of a FileRegion is read and encrypted before the next piece waits for this one to
// leave: bounded memory however large the file. Small, too: with pieces of 144 KiB or more, the
// kernel's copy of a piece into the socket cost about twice as much per byte as with 96 KiB
// (1 MiB responses on loopback), which made the whole response a third dearer.
constexpr std::size_t region_piece = 2 * region_chunk;
constexpr std::size_t region_chunks = (region_piece + region_chunk - 1) / region_chunk;

constexpr std::byte close_notify_alert[] = {std::byte{1}, std::byte{0}};  // warning, close_notify

// Drains what the engine has to send and drops it: with kTLS its records would carry sequence
// numbers the kernel has moved past. Whether anything was dropped.
bool drop_engine_output(SslEngine& engine, std::error_code& ec) {
  ByteBuffer scratch = BufferPool::for_this_thread().allocate(SslEngine::packet_buffer_size());
  bool dropped = false;
  for (;;) {
    scratch.clear();
    ByteBuffer none;
    SslEngineResult r = engine.wrap(none, scratch, ec);
    if (ec || r.bytes_produced == 0) {
      return dropped;
    }
    dropped = true;
  }
}

void complete(std::vector<ChannelPromise>& promises, const std::error_code& ec) {
  for (ChannelPromise& p : promises) {
    if (ec) {
      p.try_failure(ec);
    } else {
      p.try_success();
    }
  }
}

}  // namespace

SslHandler::SslHandler(SslEngine engine, Options options)
    : engine_(std::move(engine)), options_(options) {}

SslHandler::~SslHandler() { cancel_timers(); }

void SslHandler::cancel_timers() noexcept {
  handshake_timer_.cancel();
  close_timer_.cancel();
  fin_timer_.cancel();
}

void SslHandler::handler_added(ChannelHandlerContext& ctx) {
  ctx_ = &ctx;
  handshake_promise_ = ctx.new_promise();
  if (ctx.channel().is_active()) {
    start_handshake(ctx);
  }
}

void SslHandler::handler_removed(ChannelHandlerContext&) {
  cancel_timers();
  ctx_ = nullptr;
}

void SslHandler::channel_active(ChannelHandlerContext& ctx) {
  start_handshake(ctx);
  ctx.fire_channel_active();
}

void SslHandler::start_handshake(ChannelHandlerContext& ctx) {
  if (handshake_started_) {
    return;
  }
  handshake_started_ = true;
  engine_.begin_handshake();
  if (options_.handshake_timeout.count() > 0) {
    handshake_timer_ = ctx.executor().schedule(options_.handshake_timeout, [this] {
      if (ctx_ != nullptr && !handshake_complete_ && !failed_) {
        fail(*ctx_, make_error_code(SslErrc::handshake_timeout));
      }
    });
  }
  if (engine_.is_client_mode()) {
    wrap_engine_output(ctx);
    ctx.flush();
  }
}

bool SslHandler::wrap_engine_output(ChannelHandlerContext& ctx) {
  if (tx_path_ == RecordPath::ktls) {
    // Closing paths send close_notify through the kernel themselves; what else the engine
    // wants to say after the hand-over is an alert (dropped: the connection is failing
    // anyway) or an answer the kernel cannot give, a KeyUpdate the peer asked for.
    std::error_code ec;
    const bool dropped = drop_engine_output(engine_, ec);
    if (ec) {
      fail(ctx, ec);
    } else if (dropped && !failed_ && !engine_.is_outbound_done()) {
      // (Once we closed, what was dropped is the engine's own close_notify.)
      fail(ctx, make_error_code(SslErrc::kernel_tls_unsupported));
    }
    return false;
  }
  ByteBuffer out = BufferPool::for_this_thread().allocate(SslEngine::packet_buffer_size());
  std::error_code ec;
  bool finished = false;
  for (;;) {
    ByteBuffer none;
    SslEngineResult r = engine_.wrap(none, out, ec);
    finished |= r.handshake_status == HandshakeStatus::finished;
    if (ec || r.bytes_produced == 0) {
      break;
    }
    if (!out.has_remaining()) {
      track_write(ctx.write(out.flip()));
      out = BufferPool::for_this_thread().allocate(SslEngine::packet_buffer_size());
    }
  }
  const bool produced = out.position() > 0;
  if (produced) {
    track_write(ctx.write(out.flip()));
    wrote_ = true;
  }
  if (ec) {
    fail(ctx, ec);
  } else if (finished) {
    handshake_done(ctx, {});
  }
  return produced;
}

void SslHandler::handshake_done(ChannelHandlerContext& ctx, std::error_code cause) {
  if (handshake_complete_) {
    return;
  }
  handshake_complete_ = true;
  handshake_timer_.cancel();
  if (cause) {
    handshake_promise_.try_failure(cause);
  } else {
    handshake_promise_.try_success();
    // Before the event: writes its listeners make must wait for the hand-over.
    begin_kernel_tx(ctx);
  }
  ctx.fire_user_event_triggered(SslHandshakeCompletionEvent{cause});
  if (!cause && flush_requested_ && ctx_ != nullptr) {
    write_pending(ctx);
    ctx.flush();
  }
}

void SslHandler::channel_read(ChannelHandlerContext& ctx, Message&& msg) {
  if (rx_path_ == RecordPath::ktls) {
    read_kernel_record(ctx, std::move(msg));
    return;
  }
  ByteBuffer* in = msg.get_if<ByteBuffer>();
  if (in == nullptr) {
    ctx.fire_channel_read(std::move(msg));
    return;
  }
  if (failed_ || (canceled_ && engine_.is_inbound_done())) {
    // After an alert nothing the peer says matters; after our close abandoned the handshake
    // it is read only so that closing with it unread does not reset the connection.
    return;
  }
  if (cumulation_.has_remaining()) {
    ByteBuffer joined =
        BufferPool::for_this_thread().allocate(cumulation_.remaining() + in->remaining());
    joined.put(cumulation_).put(*in).flip();
    cumulation_ = ByteBuffer();
    unwrap_all(ctx, joined);
    in = &joined;
    if (in->has_remaining() && !failed_) {
      cumulation_ = BufferPool::for_this_thread().allocate(in->remaining());
      cumulation_.put(*in).flip();
      return;
    }
    begin_kernel_rx(ctx);
    return;
  }
  unwrap_all(ctx, *in);
  if (in->has_remaining() && !failed_) {
    // The start of a record: kept in memory of our own, not the transport's receive buffer.
    cumulation_ = BufferPool::for_this_thread().allocate(in->remaining());
    cumulation_.put(*in).flip();
    return;
  }
  begin_kernel_rx(ctx);
}

void SslHandler::read_kernel_record(ChannelHandlerContext& ctx, Message msg) {
  if (failed_ || kernel_inbound_done_) {
    return;  // as in user space: after an alert or close_notify nothing the peer says matters
  }
  if (msg.is_byte_buffer()) {
    ctx.fire_channel_read(std::move(msg));  // the kernel's plaintext, as it came
    return;
  }
  auto* record = msg.get_if<detail::KernelTlsRecord>();
  if (record == nullptr) {
    ctx.fire_channel_read(std::move(msg));
    return;
  }
  const std::span<const std::byte> content = record->content.bytes();
  switch (record->content_type) {
    case detail::tls_alert_record:
      if (content.size() == 2 && content[1] == close_notify_alert[1]) {
        kernel_inbound_done_ = true;
        inbound_reported_ = true;
        ctx.fire_user_event_triggered(SslCloseCompletionEvent{});
        engine_.close_outbound();  // the engine never saw the peer's: ours is said as an answer
        answer_close_notify(ctx);
        return;
      }
      fail(ctx, make_error_code(SslErrc::alert_received));
      return;
    case detail::tls_handshake_record:
      // Session tickets for a client need no answer; a KeyUpdate would need the keys the
      // kernel now holds.
      if (!detail::only_session_tickets(content)) {
        fail(ctx, make_error_code(SslErrc::kernel_tls_unsupported));
      }
      return;
    default: fail(ctx, make_error_code(SslErrc::not_ssl_record)); return;
  }
}

void SslHandler::unwrap_all(ChannelHandlerContext& ctx, ByteBuffer& src) {
  ByteBuffer app;
  auto deliver = [&] {
    // Not after a canceled handshake: the handlers after us saw it fail.
    if (app.position() > 0 && !canceled_) {
      ctx.fire_channel_read(app.flip());
    }
    app = ByteBuffer();
  };
  while (src.has_remaining() && !failed_) {
    if (app.remaining() < SslEngine::application_buffer_size()) {
      deliver();
      app = BufferPool::for_this_thread().allocate(SslEngine::application_buffer_size());
    }
    std::error_code ec;
    SslEngineResult r = engine_.unwrap(src, app, ec);
    if (ec) {
      deliver();
      fail(ctx, ec);
      return;
    }
    if (r.status == SslEngineStatus::buffer_underflow) {
      break;
    }
    if (r.status == SslEngineStatus::closed) {
      // The peer's close_notify: the connection ends here, ours answering it.
      deliver();
      if (!inbound_reported_) {
        inbound_reported_ = true;
        ctx.fire_user_event_triggered(SslCloseCompletionEvent{});
      }
      answer_close_notify(ctx);
      return;
    }
    if (r.handshake_status == HandshakeStatus::need_wrap) {
      wrap_engine_output(ctx);
      send_fin_when_said(ctx);
    } else if (r.handshake_status == HandshakeStatus::finished) {
      handshake_done(ctx, {});
    }
  }
  deliver();
}

void SslHandler::channel_read_complete(ChannelHandlerContext& ctx) {
  if (wrote_) {
    wrote_ = false;
    ctx.flush();
  }
  ctx.fire_channel_read_complete();
}

void SslHandler::write(ChannelHandlerContext& ctx, Message&& msg, ChannelPromise promise) {
  if (!msg.is_byte_buffer() && !msg.is_file_region()) {
    ctx.write(std::move(msg), std::move(promise));
    return;
  }
  if (failed_ || closing_) {
    promise.try_failure(failed_ ? error_ : make_error_code(transport::Errc::output_shutdown));
    return;
  }
  if (pending_.capacity() == 0) pending_.reserve(2);  // a response's head and body: one block
  pending_.push_back({std::move(msg), std::move(promise)});
}

void SslHandler::flush(ChannelHandlerContext& ctx) {
  flush_requested_ = true;
  if (handshake_complete_ && !failed_) {
    write_pending(ctx);
  }
  ctx.flush();
}

void SslHandler::write_pending(ChannelHandlerContext& ctx) {
  if (region_in_flight_ || tx_hand_over_pending_) {
    return;
  }
  if (tx_path_ == RecordPath::ktls) {
    // Plaintext for the kernel's records: buffers as they are, a FileRegion by the transport's
    // transfer engine (sendfile).
    while (!pending_.empty()) {
      PendingWrite w = std::move(pending_.front());
      pop_pending();
      if (w.promise.valid()) {
        track_write(w.promise.future());
        ctx.write(std::move(w.message), std::move(w.promise));
      } else {
        track_write(ctx.write(std::move(w.message)));
      }
    }
    return;
  }
  // The buffers in front of the first FileRegion: one output buffer, one write.
  std::vector<ByteBuffer> srcs;
  std::vector<ChannelPromise> promises;
  std::size_t total = 0;
  auto first_region = pending_.begin();
  for (; first_region != pending_.end() && first_region->message.is_byte_buffer(); ++first_region) {
    srcs.push_back(std::move(first_region->message.get<ByteBuffer>()));
    promises.push_back(std::move(first_region->promise));
    total += srcs.back().remaining();
  }
  pending_.erase(pending_.begin(), first_region);
  if (!srcs.empty()) {
    ByteBuffer out = BufferPool::for_this_thread().allocate(encrypted_size(total));
    std::size_t left = total;
    std::error_code ec;
    while (left > 0) {
      SslEngineResult r = engine_.wrap(srcs, out, ec);
      if (ec || r.bytes_consumed == 0) {
        break;
      }
      left -= r.bytes_consumed;
    }
    if (ec || left > 0) {
      const std::error_code cause = ec ? ec : make_error_code(transport::Errc::output_shutdown);
      complete(promises, cause);
      if (ec) {
        fail(ctx, ec);
      }
      return;
    }
    if (out.position() == 0) {
      complete(promises, {});
    } else {
      ChannelFuture written = ctx.write(out.flip());
      track_write(written);
      written.add_listener([promises = std::move(promises)](const std::error_code& ec) mutable {
        complete(promises, ec);
      });
    }
  }
  if (pending_.empty()) {
    return;
  }
  // A FileRegion: the next piece of it, read into pooled memory and encrypted.
  FileRegion& region = pending_.front().message.get<FileRegion>();
  if (region.transferred() == 0) {
    if (std::error_code ec = region.check_file_length()) {
      take_front_promise().try_failure(ec);
      write_pending(ctx);
      return;
    }
  }
  const std::size_t piece =
      static_cast<std::size_t>(std::min<std::uint64_t>(region.remaining(), region_piece));
  // The whole piece is read, in one preadv while the file keeps up, before any of it is
  // encrypted: a read that fails leaves the engine's record numbers untouched, and, on the
  // region's first piece, the connection usable.
  std::array<ByteBuffer, region_chunks> plain;
  std::size_t chunks = 0;
  for (std::size_t at = 0; at < piece; at += region_chunk) {
    const std::size_t n = std::min(piece - at, region_chunk);
    plain[chunks] = BufferPool::for_this_thread().allocate(n);
    plain[chunks++].limit(n);
  }
  const std::span<ByteBuffer> chunk_span(plain.data(), chunks);
  for (std::size_t read = 0; read < piece;) {
    std::error_code ec;
    const std::int64_t n = detail::scatter_read(
        region.fd(), chunk_span, static_cast<off_t>(region.next_offset() + read), ec);
    if (n <= 0) {
      if (n < 0 || !ec) {
        ec = make_error_code(transport::Errc::file_region_truncated);
      }
      const bool partly_sent = region.transferred() > 0;
      take_front_promise().try_failure(ec);
      if (partly_sent) {
        // The peer has the region's first pieces: what follows would land where the rest of
        // the file belongs. The connection ends, as on the plain transport, and without
        // close_notify, so that the peer sees a truncation, not a complete file.
        fail(ctx, ec);
        return;
      }
      write_pending(ctx);
      return;
    }
    read += static_cast<std::size_t>(n);
  }
  std::array<ByteBuffer, region_chunks> outs;
  std::error_code ec;
  for (std::size_t i = 0; i < chunks; ++i) {
    ByteBuffer& b = plain[i].flip();
    outs[i] = BufferPool::for_this_thread().allocate(encrypted_size(b.remaining()));
    while (b.has_remaining()) {
      SslEngineResult r = engine_.wrap(b, outs[i], ec);
      if (ec || r.bytes_consumed == 0) {
        break;
      }
    }
    if (ec || b.has_remaining()) {
      take_front_promise().try_failure(ec ? ec : make_error_code(transport::Errc::output_shutdown));
      if (ec) {
        fail(ctx, ec);
      }
      return;
    }
  }
  region.add_transferred(piece);
  region_in_flight_ = true;
  ChannelFuture written;
  for (std::size_t i = 0; i < chunks; ++i) {
    written = ctx.write(outs[i].flip());  // they complete in order: the last stands for all
  }
  track_write(written);
  written.add_listener([weak = weak_from_this()](const std::error_code& ec) {
    auto self = weak.lock();
    if (!self) {
      return;
    }
    self->region_in_flight_ = false;
    if (self->pending_.empty()) {
      return;  // failed and cleared meanwhile
    }
    if (ec) {
      self->take_front_promise().try_failure(ec);
      self->fail_pending(ec);
      return;
    }
    if (self->pending_.front().message.get<FileRegion>().remaining() == 0) {
      self->take_front_promise().try_success();
    }
    if (self->ctx_ != nullptr && !self->failed_) {
      self->write_pending(*self->ctx_);
      self->ctx_->flush();
      if (!self->failed_) {
        // (A close() waiting here would send close_notify after the failure.)
        self->run_after_pending_when_idle(*self->ctx_);
      }
    }
  });
}

void SslHandler::run_after_pending_when_idle(ChannelHandlerContext& ctx) {
  if (pending_.empty() && !region_in_flight_ && after_pending_) {
    auto then = std::move(after_pending_);
    after_pending_ = nullptr;
    then(ctx);
  }
}

void SslHandler::track_write(ChannelFuture future) {
  last_write_ = std::move(future);
  ++writes_;
}

void SslHandler::begin_kernel_tx(ChannelHandlerContext& ctx) {
  if (!kernel_tls_available() || dynamic_cast<LoopSocketChannel*>(&ctx.channel()) == nullptr) {
    return;
  }
  if (auto why = engine_.traffic_keys_refusal(TrafficDirection::outbound); !why.empty()) {
    detail::log_kernel_tls_fallback(why);
    return;
  }
  // The handshake's last records (a server's session tickets among them) must have left
  // before TLS_TX: the kernel would take bytes still queued for plaintext and encrypt them
  // again.
  tx_hand_over_pending_ = true;
  if (!last_write_.valid()) {
    finish_kernel_tx({}, writes_);
    return;
  }
  last_write_.add_listener([weak = weak_from_this(), waited = writes_](const std::error_code& ec) {
    if (auto self = weak.lock()) {
      self->finish_kernel_tx(ec, waited);
    }
  });
  wrote_ = true;  // flushed at the end of this read, or by the caller's flush
}

void SslHandler::finish_kernel_tx(std::error_code write_error, std::uint64_t waited_for) {
  if (!tx_hand_over_pending_ || ctx_ == nullptr) {
    return;
  }
  ChannelHandlerContext& ctx = *ctx_;
  if (!write_error && !failed_ && waited_for != writes_) {
    // The engine wrote more meanwhile: those records must leave first too.
    last_write_.add_listener([weak = weak_from_this(), now = writes_](const std::error_code& ec) {
      if (auto self = weak.lock()) {
        self->finish_kernel_tx(ec, now);
      }
    });
    ctx.flush();
    return;
  }
  tx_hand_over_pending_ = false;
  auto* socket = dynamic_cast<LoopSocketChannel*>(&ctx.channel());
  if (!write_error && !failed_ && socket != nullptr && socket->fd() >= 0 &&
      detail::hand_over_traffic_keys(engine_, socket->fd(), TrafficDirection::outbound)) {
    detail::KernelTls::started_send(*socket);
    tx_path_ = RecordPath::ktls;
    // The inbound keys go at the end of the next read that leaves no partial record: the
    // bytes read until then are records under the engine's keys.
    rx_hand_over_pending_ = true;
  }
  if (failed_) {
    return;
  }
  if (flush_requested_) {
    write_pending(ctx);
    ctx.flush();
  }
  run_after_pending_when_idle(ctx);
}

void SslHandler::begin_kernel_rx(ChannelHandlerContext& ctx) {
  if (!rx_hand_over_pending_ || failed_ || closing_ || cumulation_.has_remaining()) {
    return;
  }
  auto* socket = dynamic_cast<LoopSocketChannel*>(&ctx.channel());
  if (socket == nullptr || !detail::KernelTls::may_start_receive(*socket)) {
    return;  // not now: a read of the transport's own is on its way, say
  }
  rx_hand_over_pending_ = false;
  if (detail::hand_over_traffic_keys(engine_, socket->fd(), TrafficDirection::inbound)) {
    detail::KernelTls::started_receive(*socket);
    rx_path_ = RecordPath::ktls;
  }
}

void SslHandler::kernel_close_notify(ChannelHandlerContext& ctx,
                                     std::function<void(ChannelHandlerContext&)> then) {
  ctx.flush();
  if (kernel_close_notify_sent_) {
    then(ctx);
    return;
  }
  kernel_close_notify_sent_ = true;
  // The alert leaves by sendmsg beside the transport's writes: only once they have all left
  // does it follow the last record.
  auto send = [weak = weak_from_this(), then = std::move(then)](const std::error_code&) {
    if (auto self = weak.lock()) {
      self->send_kernel_close_notify(then);
    }
  };
  if (last_write_.valid()) {
    last_write_.add_listener(std::move(send));
  } else {
    send({});
  }
}

void SslHandler::send_kernel_close_notify(std::function<void(ChannelHandlerContext&)> then) {
  if (ctx_ == nullptr) {
    return;
  }
  auto* socket = dynamic_cast<LoopSocketChannel*>(&ctx_->channel());
  if (socket == nullptr || socket->fd() < 0) {
    then(*ctx_);
    return;
  }
  const std::error_code ec =
      detail::send_kernel_tls_record(socket->fd(), detail::tls_alert_record, close_notify_alert);
  if (ec == std::errc::resource_unavailable_try_again || ec == std::errc::operation_would_block) {
    socket->event_loop().poll(socket->fd(), POLLOUT,
                              [weak = weak_from_this(), then](std::error_code e, int) {
                                auto self = weak.lock();
                                if (!self || self->ctx_ == nullptr) {
                                  return;
                                }
                                if (e) {
                                  then(*self->ctx_);
                                } else {
                                  self->send_kernel_close_notify(then);
                                }
                              });
    return;
  }
  then(*ctx_);
}

void SslHandler::fail_pending(std::error_code cause) {
  auto pending = std::move(pending_);
  pending_.clear();
  for (PendingWrite& w : pending) {
    w.promise.try_failure(cause);
  }
}

void SslHandler::fail(ChannelHandlerContext& ctx, std::error_code cause) {
  if (failed_) {
    return;
  }
  failed_ = true;
  error_ = cause;
  inbound_reported_ = true;
  cancel_timers();
  if (!handshake_complete_) {
    handshake_done(ctx, cause);
  }
  fail_pending(cause);
  wrap_engine_output(ctx);  // the alert telling the peer why
  ctx.flush();
  ctx.fire_exception_caught(std::make_exception_ptr(std::system_error(cause, "SslHandler")));
  finish_close(ctx);
}

void SslHandler::close(ChannelHandlerContext& ctx, ChannelPromise promise) {
  if (closing_) {
    close_promises_.push_back(std::move(promise));
    return;
  }
  if (failed_ || !handshake_started_ || !ctx.channel().is_active()) {
    ctx.close(std::move(promise));
    return;
  }
  if (canceled_) {
    // After a shutdown_output gave up on the handshake: the same bounded wait as below.
    closing_ = true;
    close_promises_.push_back(std::move(promise));
    close_after_timeout(ctx);
    return;
  }
  if (!handshake_complete_) {
    cancel_handshake(ctx, std::move(promise));
    return;
  }
  closing_ = true;
  close_promises_.push_back(std::move(promise));
  after_pending(ctx, [this](ChannelHandlerContext& c) {
    engine_.close_outbound();
    auto wait_for_peer = [this](ChannelHandlerContext& c) {
      if (engine_.is_inbound_done() || kernel_inbound_done_) {
        finish_close(c);
        return;
      }
      close_after_timeout(c);
    };
    if (tx_path_ == RecordPath::ktls) {
      kernel_close_notify(c, wait_for_peer);
      return;
    }
    wrap_engine_output(c);
    c.flush();
    wait_for_peer(c);
  });
}

// The bounded wait for the peer to end the connection, once ours has said it is done. Its
// close_notify (or end of stream) has to be read: an application that turned AUTO_READ off is
// done with the connection, so reading resumes (what arrives now is dropped here).
void SslHandler::close_after_timeout(ChannelHandlerContext& ctx) {
  ctx.channel().config().set_auto_read(true);
  close_timer_ = ctx.executor().schedule(options_.close_notify_read_timeout, [this] {
    if (ctx_ != nullptr) {
      finish_close(*ctx_);
    }
  });
}

// A bare FIN mid-handshake would read to the peer as a cut connection: the engine tells it we
// gave up (SslEngine::close_outbound), and then, as after the handshake, the connection stays
// open a bounded while for the peer to end it. Closing with its bytes unread would reset the
// connection, and the alerts could go with it.
void SslHandler::cancel_handshake(ChannelHandlerContext& ctx, ChannelPromise promise) {
  closing_ = true;
  close_promises_.push_back(std::move(promise));
  tell_peer_handshake_canceled(ctx);
  close_after_timeout(ctx);
  end_canceled_handshake(ctx);
}

// As a close mid-handshake does (cancel_handshake), and the connection stays half open.
void SslHandler::cancel_handshake_output(ChannelHandlerContext& ctx, ChannelPromise promise) {
  fin_promises_.push_back(std::move(promise));
  tell_peer_handshake_canceled(ctx);
  send_fin_when_said(ctx);
  if (!fin_promises_.empty()) {
    // OpenSSL says close_notify once it has read the peer's flight; a peer that never sends
    // it still gets the FIN.
    fin_timer_ = ctx.executor().schedule(options_.close_notify_read_timeout, [this] {
      if (ctx_ != nullptr) {
        send_fin(*ctx_);
      }
    });
  }
  end_canceled_handshake(ctx);
}

void SslHandler::tell_peer_handshake_canceled(ChannelHandlerContext& ctx) {
  canceled_ = true;
  inbound_reported_ = true;  // the end of input that follows is no truncation
  engine_.close_outbound();
  wrap_engine_output(ctx);
  ctx.flush();
}

// Last: the handlers that hear of it may close or write again.
void SslHandler::end_canceled_handshake(ChannelHandlerContext& ctx) {
  const std::error_code cause = make_error_code(SslErrc::handshake_canceled);
  fail_pending(cause);
  handshake_done(ctx, cause);
}

void SslHandler::send_fin_when_said(ChannelHandlerContext& ctx) {
  if (!fin_promises_.empty() && engine_.is_outbound_done()) {
    send_fin(ctx);
  }
}

void SslHandler::send_fin(ChannelHandlerContext& ctx) {
  fin_timer_.cancel();
  auto promises = std::move(fin_promises_);
  fin_promises_.clear();
  if (promises.empty()) return;
  ctx.flush();
  for (auto& p : promises) {
    ctx.shutdown_output(std::move(p));
  }
}

void SslHandler::shutdown_output(ChannelHandlerContext& ctx, ChannelPromise promise) {
  if (!fin_promises_.empty()) {
    fin_promises_.push_back(std::move(promise));  // one FIN, after the same close_notify
    return;
  }
  if (failed_ || canceled_ || !handshake_started_ || !ctx.channel().is_active()) {
    ctx.shutdown_output(std::move(promise));
    return;
  }
  if (!handshake_complete_) {
    cancel_handshake_output(ctx, std::move(promise));
    return;
  }
  after_pending(ctx, [this, promise = std::move(promise)](ChannelHandlerContext& c) mutable {
    engine_.close_outbound();
    if (tx_path_ == RecordPath::ktls) {
      kernel_close_notify(c, [promise](ChannelHandlerContext& c2) mutable {
        c2.shutdown_output(std::move(promise));
      });
      return;
    }
    wrap_engine_output(c);
    c.flush();
    c.shutdown_output(std::move(promise));
  });
}

void SslHandler::after_pending(ChannelHandlerContext& ctx,
                               std::function<void(ChannelHandlerContext&)> then) {
  write_pending(ctx);
  if (pending_.empty() && !region_in_flight_) {
    then(ctx);
    return;
  }
  if (after_pending_) {
    // A close after a shutdown_output: both, in order.
    after_pending_ = [first = std::move(after_pending_),
                      second = std::move(then)](ChannelHandlerContext& c) {
      first(c);
      second(c);
    };
  } else {
    after_pending_ = std::move(then);
  }
}

// Closing at once would drop our close_notify with the writes still queued, and the peer
// would see a truncation: the connection closes once the answer has left.
void SslHandler::answer_close_notify(ChannelHandlerContext& ctx) {
  if (tx_path_ == RecordPath::ktls) {
    std::error_code ignored;
    drop_engine_output(engine_, ignored);  // the engine's close_notify, under stale numbers
    kernel_close_notify(ctx, [this](ChannelHandlerContext& c) { finish_close(c); });
    return;
  }
  ByteBuffer out = BufferPool::for_this_thread().allocate(SslEngine::packet_buffer_size());
  std::error_code ec;
  for (;;) {
    ByteBuffer none;
    SslEngineResult r = engine_.wrap(none, out, ec);
    if (ec || r.bytes_produced == 0 || !out.has_remaining()) {
      break;
    }
  }
  if (out.position() == 0) {
    ctx.flush();
    finish_close(ctx);
    return;
  }
  // Weakly: the listener runs later, when the channel (and this handler with it) may be gone.
  ctx.write_and_flush(out.flip()).add_listener([weak = weak_from_this()](const std::error_code&) {
    if (auto self = weak.lock(); self && self->ctx_ != nullptr) {
      self->finish_close(*self->ctx_);
    }
  });
}

void SslHandler::finish_close(ChannelHandlerContext& ctx) {
  close_timer_.cancel();
  send_fin(ctx);
  auto promises = std::move(close_promises_);
  close_promises_.clear();
  ctx.close().add_listener([promises = std::move(promises)](const std::error_code& ec) mutable {
    complete(promises, ec);
  });
}

void SslHandler::user_event_triggered(ChannelHandlerContext& ctx, std::any event) {
  if (std::any_cast<ChannelInputShutdownEvent>(&event) != nullptr && handshake_started_ &&
      !inbound_reported_ && !failed_) {
    // Held writes (a reply before the handshake finished) would otherwise wait forever for a
    // handshake that cannot finish, and hold the channel open with them.
    inbound_reported_ = true;
    std::error_code truncated;
    engine_.close_inbound(truncated);
    if (!truncated) truncated = make_error_code(SslErrc::truncated);
    ctx.fire_user_event_triggered(SslCloseCompletionEvent{truncated});
    fail(ctx, truncated);
    return;
  }
  if (canceled_ && std::any_cast<ChannelInputShutdownEvent>(&event) != nullptr) {
    finish_close(ctx);  // the peer ended the connection whose handshake we gave up
    return;
  }
  ctx.fire_user_event_triggered(std::move(event));
}

void SslHandler::channel_inactive(ChannelHandlerContext& ctx) {
  cancel_timers();
  after_pending_ = nullptr;
  std::error_code truncated;
  if (handshake_started_ && !inbound_reported_) {
    inbound_reported_ = true;
    engine_.close_inbound(truncated);
    if (truncated) {
      ctx.fire_user_event_triggered(SslCloseCompletionEvent{truncated});
      ctx.fire_exception_caught(
          std::make_exception_ptr(std::system_error(truncated, "SslHandler")));
    }
  }
  if (!handshake_complete_) {
    handshake_done(ctx, truncated ? truncated : make_error_code(transport::Errc::channel_closed));
  }
  fail_pending(make_error_code(transport::Errc::channel_closed));
  complete(close_promises_, {});
  close_promises_.clear();
  complete(fin_promises_, make_error_code(transport::Errc::channel_closed));
  fin_promises_.clear();
  ctx.fire_channel_inactive();
}

}  // namespace niox
