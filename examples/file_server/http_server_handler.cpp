#include "http_server_handler.hpp"

#include <niox/transport/file_region.hpp>
#include <niox/transport/loop_socket_channel.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace niox::http {

namespace {

// After a response that ends the connection, the server shuts its output down (FIN) and reads
// and discards what the client still sends, until the client ends its side or for at most
// this long, then closes. Closing at once with unread input makes the kernel reset the
// connection, and a reset can destroy the response the client has not read yet (a client
// still sending an oversized head, say, and then its 431). Not when the client itself asked to
// close and nothing of its can still arrive (HttpServerConnection::ends_cleanly): that closes
// once the response is written, as nginx does.
constexpr std::chrono::seconds lingering_close_time{2};

// The sweep runs this often: a connection is closed between its timeout and its timeout plus
// an eighth (or plus a second, for timeouts over 8 s).
std::chrono::milliseconds sweep_period(std::uint32_t timeout_ms) {
  return std::chrono::milliseconds(std::clamp<std::uint32_t>(timeout_ms / 8, 1, 1000));
}

std::uint32_t to_ms(std::chrono::nanoseconds d) {
  if (d <= std::chrono::nanoseconds::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
  // The clock's differences are right up to 2^31 ms (24 days); longer is as good as never.
  return static_cast<std::uint32_t>(std::min<std::int64_t>(ms, std::int64_t{1} << 31));
}

}  // namespace

struct HttpServerHandler::Exchange {
  explicit Exchange(HttpServerLoop& loop)
      : conn(loop.responder(), loop.decoder(), 32, loop.cache()) {}

  HttpServerConnection conn;
  // Input on_read left unconsumed (a request cut by the end of a read, or requests beyond the
  // response queue's bound), freed once empty.
  std::string pending;
  std::uint64_t acked_at_last_check = 0;  // TCP_INFO bytes acked by the peer
  std::uint32_t head_started = 0;         // ms, while head_pending
  bool head_pending = false;              // a request has begun and is not complete
};

namespace {

// Exchanges given back by this thread's connections, for the next request that begins here:
// taking one allocates nothing once warm. Touched on the loop's thread only, never after the
// thread's own destruction began (a connection still open then is not given back).
constexpr std::size_t max_spare_exchanges = 64;
struct SpareExchanges {
  std::vector<void*> blocks;
  ~SpareExchanges() {
    for (void* p : blocks) ::operator delete(p);
  }
};
thread_local SpareExchanges spare_exchanges;

}  // namespace

void HttpServerHandler::ExchangeDelete::operator()(Exchange* e) const noexcept {
  e->~Exchange();
  if (spare_exchanges.blocks.size() < max_spare_exchanges) {
    spare_exchanges.blocks.push_back(e);
  } else {
    ::operator delete(e);
  }
}

HttpServerHandler::Exchange& HttpServerHandler::exchange() {
  if (!exchange_) {
    void* block;
    if (spare_exchanges.blocks.empty()) {
      block = ::operator new(sizeof(Exchange));
    } else {
      block = spare_exchanges.blocks.back();
      spare_exchanges.blocks.pop_back();
    }
    exchange_.reset(new (block) Exchange(loop_));
  }
  return *exchange_;
}

// ---- HttpServerLoop ---------------------------------------------------------------------------

HttpServerLoop::HttpServerLoop(Executor& executor, const StaticFileResponder& responder,
                               HttpDecoderConfig decoder, OpenFileCache* cache,
                               std::chrono::nanoseconds idle_timeout)
    : executor_(executor),
      responder_(responder),
      decoder_(decoder),
      cache_(cache),
      idle_(to_ms(idle_timeout)) {
  if (has_timeout()) schedule_sweep();
}

HttpServerLoop::~HttpServerLoop() { sweeper_.cancel(); }

std::uint32_t HttpServerLoop::now_ms() const noexcept {
  const auto since_epoch = executor_.now().time_since_epoch();
  return static_cast<std::uint32_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count());
}

void HttpServerLoop::schedule_sweep() {
  sweeper_ = executor_.schedule(sweep_period(idle_.timeout_ms()), [this] {
    sweep();
    schedule_sweep();
  });
}

void HttpServerLoop::sweep() {
  idle_.sweep(now_ms(), [](IdleConnections::Entry& e, bool expired) {
    return static_cast<HttpServerHandler&>(e).on_sweep(expired);
  });
}

// ---- HttpServerHandler ------------------------------------------------------------------------

HttpServerHandler::~HttpServerHandler() { leave_lists(); }

void HttpServerHandler::leave_lists() noexcept {
  if (loop_.has_timeout()) loop_.idle().remove(*this);
}

void HttpServerHandler::handler_added(ChannelHandlerContext& ctx) {
  ctx_ = &ctx;
  if (loop_.has_timeout() && ctx.channel().is_active()) {
    loop_.idle().touch(*this, loop_.now_ms());
  }
}

void HttpServerHandler::handler_removed(ChannelHandlerContext&) {
  leave_lists();
  ctx_ = nullptr;
  exchange_.reset();
}

void HttpServerHandler::channel_active(ChannelHandlerContext& ctx) {
  if (loop_.has_timeout()) loop_.idle().touch(*this, loop_.now_ms());
  ctx.fire_channel_active();
}

void HttpServerHandler::channel_inactive(ChannelHandlerContext& ctx) {
  leave_lists();
  exchange_.reset();
  ctx.fire_channel_inactive();
}

void HttpServerHandler::channel_read(ChannelHandlerContext& ctx, Message&& msg) {
  auto* in = msg.get_if<ByteBuffer>();
  if (in == nullptr || closing_ || !in->has_remaining()) {
    return;
  }
  Exchange& ex = exchange();
  if (ex.pending.empty()) {
    serve(ctx, *in);
    keep_unconsumed(*in);
  } else {
    keep_unconsumed(*in);
    serve_pending(ctx);
  }
  // A request head still incomplete long after it began: a client trickling its request (or
  // never finishing it) holds the connection for nothing. The silent ones are closed by the
  // sweep; this catches those that keep sending a byte now and then.
  if (!closing_ && exchange_ && exchange_->head_pending && loop_.has_timeout() &&
      loop_.now_ms() - exchange_->head_started >= loop_.idle().timeout_ms()) {
    close_now(ctx);
    return;
  }
  release_if_done(ctx);
}

void HttpServerHandler::channel_read_complete(ChannelHandlerContext& ctx) {
  if (loop_.has_timeout() && !closing_) loop_.idle().touch(*this, loop_.now_ms());
  // A client that pipelines without reading our answers is pushed back: no more reads until
  // the outbound buffer drained below its low water mark.
  if (!closing_ && !ctx.channel().is_writable()) {
    ctx.channel().config().set_auto_read(false);
  }
}

void HttpServerHandler::channel_writability_changed(ChannelHandlerContext& ctx) {
  if (!closing_ && ctx.channel().is_writable()) {
    serve_pending(ctx);
    if (!closing_) {
      ctx.channel().config().set_auto_read(true);
    }
    release_if_done(ctx);
  }
  ctx.fire_channel_writability_changed();
}

void HttpServerHandler::user_event_triggered(ChannelHandlerContext& ctx, std::any event) {
  if (std::any_cast<ChannelInputShutdownEvent>(&event) != nullptr) {
    if (closing_) {
      // A lingering close: the client ended its side, done, once the last response has left
      // (at once when our FIN has).
      ctx.channel().close_after_flush(ChannelPromise());
      return;
    }
    if (exchange_) (void)exchange_->conn.on_end_of_input();
    // Nothing more can arrive, so nothing is left unread: close once written.
    end_after_flush(ctx, /*linger=*/false);
    return;
  }
  ctx.fire_user_event_triggered(std::move(event));
}

void HttpServerHandler::exception_caught(ChannelHandlerContext& ctx, std::exception_ptr) {
  ctx.close();
}

IdleConnections::Verdict HttpServerHandler::on_sweep(bool expired) {
  using Verdict = IdleConnections::Verdict;
  if (ctx_ == nullptr) {
    leave_lists();
    return Verdict::close;
  }
  ChannelHandlerContext& ctx = *ctx_;
  if (ctx.channel().outbound_buffer().total_pending_bytes() == 0) {
    if (!expired || list == IdleConnections::List::writing) {
      release_if_done(ctx);
      return Verdict::drained;
    }
    // Nothing read and nothing to write for the whole timeout: an idle keep-alive
    // connection, or a client gone silent mid-request.
    close_now(ctx);
    return Verdict::close;
  }
  if (!expired) return Verdict::writing;
  // A response still going out for the whole timeout: fine while the peer takes it.
  if (response_progressing(ctx)) return Verdict::progress;
  close_now(ctx);
  return Verdict::close;
}

void HttpServerHandler::release_if_done(ChannelHandlerContext& ctx) {
  if (exchange_ && !closing_ && exchange_->pending.empty() && exchange_->conn.is_idle() &&
      !exchange_->conn.is_closing() && ctx.channel().outbound_buffer().total_pending_bytes() == 0) {
    exchange_.reset();
  }
}

void HttpServerHandler::keep_unconsumed(const ByteBuffer& in) {
  if (closing_ || !in.has_remaining()) {
    return;
  }
  auto bytes = in.bytes();
  exchange().pending.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void HttpServerHandler::serve_pending(ChannelHandlerContext& ctx) {
  if (!exchange_ || exchange_->pending.empty()) {
    return;
  }
  std::string& pending = exchange_->pending;
  auto in = ByteBuffer::wrap(std::string_view(pending));
  serve(ctx, in);
  if (!exchange_) return;  // closed meanwhile
  pending.erase(0, in.position());
  if (pending.empty()) {
    std::string().swap(pending);  // nothing held between requests
  }
}

// Answers the requests in `in`, advancing its position past them.
void HttpServerHandler::serve(ChannelHandlerContext& ctx, ByteBuffer& in) {
  // The responses of one call, written before it returns: one vector for the thread.
  thread_local std::vector<HttpResponse> queue;
  Exchange& ex = exchange();
  ChannelFuture last;
  bool wrote = false;
  while (!closing_ && in.has_remaining() && ctx.channel().is_writable()) {
    queue.clear();
    ex.conn.on_read(in, queue);
    if (queue.empty()) {
      break;  // an incomplete request: wait for more input
    }
    // Only the batch's last write is listened to (below), and not when it ends the connection:
    // the others take the void promise, which allocates and completes nothing.
    const bool listened = !ex.conn.is_closing();
    for (std::size_t i = 0; i < queue.size(); ++i) {
      HttpResponse& r = queue[i];
      const bool has_body = r.body.has_remaining(), has_file = r.has_file_region();
      auto send = [&](Message piece, bool last_piece) {
        if (listened && last_piece && i + 1 == queue.size()) {
          last = ctx.write(std::move(piece));
        } else {
          ctx.write(std::move(piece), ChannelPromise());
        }
      };
      if (r.head.has_remaining()) send(std::move(r.head), !has_body && !has_file);
      if (has_body) send(std::move(r.body), !has_file);
      if (has_file) send(FileRegion(std::move(r.file), r.file_offset, r.file_count), true);
    }
    queue.clear();
    wrote = true;
    // Flushing once per batch lets every head and small body of a pipelined batch leave in
    // one gathering write. A batch that ends the connection is flushed by the close (or the
    // lingering close's shutdown), which sends the FIN with the responses' last bytes.
    if (ex.conn.is_closing()) {
      end_after_flush(ctx, /*linger=*/!ex.conn.ends_cleanly());
    } else {
      ctx.flush();
    }
  }
  if (ex.conn.is_idle()) {
    ex.head_pending = false;
  } else if (!ex.head_pending) {
    ex.head_pending = true;  // a request has begun
    ex.head_started = loop_.now_ms();
  }
  if (wrote && !closing_ && ctx.channel().outbound_buffer().total_pending_bytes() > 0) {
    // Idle only once the responses are out; what they needed goes as soon as they are. The
    // listener runs later, on the loop, and may find the channel gone (the peer closed, and
    // the channel let go of itself first): it holds the channel weakly, and this handler,
    // never removed from the pipeline, lives exactly as long as the channel's pipeline.
    if (loop_.has_timeout()) loop_.idle().writing(*this, loop_.now_ms());
    last.add_listener([channel = std::weak_ptr<Channel>(ctx.channel().shared_from_this()),
                       self = this](const std::error_code& ec) {
      if (auto alive = channel.lock(); alive && !ec) self->on_written();
    });
  }
}

void HttpServerHandler::on_written() {
  if (ctx_ == nullptr || closing_ || ctx_->channel().outbound_buffer().total_pending_bytes() > 0) {
    return;  // more went out behind it: its own listener comes
  }
  if (loop_.has_timeout() && list == IdleConnections::List::writing) {
    loop_.idle().drained(*this, loop_.now_ms());
  }
  release_if_done(*ctx_);
}

bool HttpServerHandler::response_progressing(ChannelHandlerContext& ctx) {
  auto* ch = dynamic_cast<LoopSocketChannel*>(&ctx.channel());
  if (ch == nullptr || ch->fd() < 0 || !exchange_) {
    return false;
  }
  tcp_info info{};
  socklen_t len = sizeof info;
  if (::getsockopt(ch->fd(), IPPROTO_TCP, TCP_INFO, &info, &len) != 0 ||
      info.tcpi_bytes_acked == exchange_->acked_at_last_check) {
    return false;
  }
  exchange_->acked_at_last_check = info.tcpi_bytes_acked;
  return true;
}

void HttpServerHandler::close_now(ChannelHandlerContext& ctx) {
  closing_ = true;
  leave_lists();
  if (exchange_) exchange_->pending.clear();
  ctx.close();
}

// Flushes what was written and ends the connection once it has left (Channel::close_after_flush:
// the FIN goes with the last bytes, in the same call when the flush wrote them all). With
// `linger`, a lingering close instead (see lingering_close_time): FIN first, then input is read
// and dropped (channel_read ignores it once closing_) until the client's end of stream or the
// time is up.
void HttpServerHandler::end_after_flush(ChannelHandlerContext& ctx, bool linger) {
  closing_ = true;
  if (exchange_) exchange_->pending.clear();
  Channel& ch = ctx.channel();
  if (!linger || !ch.is_active() || ch.is_input_shutdown()) {
    // Nothing more is read: no read waits in the loop (and on epoll no registration is made)
    // for the time the last response takes to leave.
    ch.config().set_auto_read(false);
    ch.close_after_flush(ChannelPromise());  // nobody waits for it: the void promise
    return;
  }
  ch.shutdown_output().add_listener(
      [weak = std::weak_ptr<Channel>(ch.shared_from_this())](std::error_code ec) {
        auto c = weak.lock();
        if (!c) return;
        if (ec || c->is_input_shutdown()) {
          c->close();  // failed, or the client ended its side while the response left
          return;
        }
        c->config().set_auto_read(true);  // keep draining, even if reads were paused
        c->executor().schedule(lingering_close_time, [weak] {
          if (auto alive = weak.lock()) alive->close();
        });
      });
}

}  // namespace niox::http
