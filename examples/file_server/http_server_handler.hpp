// HttpServerHandler — niox-file-server's transport handler, one per connection, around
// HttpServerConnection (the protocol, without I/O): requests are decoded straight from the read
// buffer and each planned response leaves as its head and small body (one gathering write with
// everything else flushed at the same time) and, for large files, a FileRegion (sendfile).
//
// Memory. What a request needs (the protocol state, input a read left unconsumed, when the
// head began) is an Exchange, taken from the thread's spares on the request's first byte and
// given back once it is answered and written. Between keep-alive requests a connection holds
// this object alone (56 B): its links in the loop's IdleConnections and three pointers.
//
//   idle keep-alive:  [handler]                          no Exchange, no buffer, no timer
//   mid-request:      [handler] -> [Exchange]            decoder taken from the thread's spares
//   writing:          [handler] -> [Exchange]            until the outbound buffer has drained
//
// Timeouts (HttpServerLoop's idle timeout; zero: none). A connection that neither reads nor
// has anything left to write for the timeout is closed: an idle keep-alive connection, or a
// client gone silent mid-request. A response that the peer stops taking is closed too, but
// one still going out to a slow reader is not: while the peer keeps acknowledging bytes, it
// is not idle. A request head still incomplete the timeout after it began is closed on the
// next read (slowloris: a byte now and then never leaves the connection idle).
#pragma once

#include "http_server_connection.hpp"
#include "idle_connections.hpp"

#include <niox/loop/executor.hpp>
#include <niox/transport/channel_handler.hpp>

#include <chrono>
#include <cstdint>
#include <memory>

namespace niox::http {

// What the connections of one event loop share. Made before the server starts and used on
// the loop's thread only; `responder` and `cache` (optional) must outlive it, and it must
// outlive its connections.
class HttpServerLoop {
 public:
  // The sweeps run on `executor` (the event loop), by its clock.
  HttpServerLoop(Executor& executor, const StaticFileResponder& responder,
                 HttpDecoderConfig decoder, OpenFileCache* cache,
                 std::chrono::nanoseconds idle_timeout);
  ~HttpServerLoop();
  HttpServerLoop(const HttpServerLoop&) = delete;
  HttpServerLoop& operator=(const HttpServerLoop&) = delete;

  const StaticFileResponder& responder() const noexcept { return responder_; }
  const HttpDecoderConfig& decoder() const noexcept { return decoder_; }
  OpenFileCache* cache() const noexcept { return cache_; }
  bool has_timeout() const noexcept { return idle_.timeout_ms() > 0; }
  IdleConnections& idle() noexcept { return idle_; }
  // The executor's clock in milliseconds, modulo 2^32.
  std::uint32_t now_ms() const noexcept;

 private:
  // Closes the connections idle for the timeout; runs every eighth of it (at most every second).
  void sweep();
  void schedule_sweep();

  Executor& executor_;
  const StaticFileResponder& responder_;
  HttpDecoderConfig decoder_;
  OpenFileCache* cache_;
  IdleConnections idle_;
  ScheduledFuture sweeper_;
};

class HttpServerHandler final : public ChannelHandler, private IdleConnections::Entry {
 public:
  explicit HttpServerHandler(HttpServerLoop& loop) noexcept : loop_(loop) {}
  ~HttpServerHandler() override;

  void handler_added(ChannelHandlerContext& ctx) override;
  void handler_removed(ChannelHandlerContext& ctx) override;
  void channel_active(ChannelHandlerContext& ctx) override;
  void channel_inactive(ChannelHandlerContext& ctx) override;
  void channel_read(ChannelHandlerContext& ctx, Message&& msg) override;
  void channel_read_complete(ChannelHandlerContext& ctx) override;
  void channel_writability_changed(ChannelHandlerContext& ctx) override;
  void user_event_triggered(ChannelHandlerContext& ctx, std::any event) override;
  void exception_caught(ChannelHandlerContext& ctx, std::exception_ptr) override;

  // Whether a request's state is held: from a request's first byte until it is answered and
  // its response written, and while the connection closes.
  bool holds_exchange() const noexcept { return exchange_ != nullptr; }

 private:
  friend class HttpServerLoop;
  struct Exchange;
  struct ExchangeDelete {
    void operator()(Exchange* e) const noexcept;
  };

  // The loop's sweep asks this of a connection that is writing, or whose time is up.
  IdleConnections::Verdict on_sweep(bool expired);
  Exchange& exchange();
  // The last write of a batch completed.
  void on_written();
  void release_if_done(ChannelHandlerContext& ctx);
  void keep_unconsumed(const ByteBuffer& in);
  void serve_pending(ChannelHandlerContext& ctx);
  void serve(ChannelHandlerContext& ctx, ByteBuffer& in);
  bool response_progressing(ChannelHandlerContext& ctx);
  void close_now(ChannelHandlerContext& ctx);
  void end_after_flush(ChannelHandlerContext& ctx, bool linger);
  void leave_lists() noexcept;

  bool closing_ = false;  // in the Entry's tail padding
  HttpServerLoop& loop_;
  ChannelHandlerContext* ctx_ = nullptr;  // between handler_added and handler_removed
  std::unique_ptr<Exchange, ExchangeDelete> exchange_;
};

}  // namespace niox::http
