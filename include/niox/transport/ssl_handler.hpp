// SslHandler: TLS for a pipeline (Netty's io.netty.handler.ssl.SslHandler), driving one
// SslEngine (ssl/) between the transport's bytes and the handlers after it.
//
//   auto ssl = niox::SslContextBuilder::for_server(niox::Pem::file("cert.pem"),
//                                                  niox::Pem::file("key.pem")).build();
//   bootstrap.child_handler(niox::init([ssl](niox::Channel& ch) {
//     ch.pipeline().add_last("ssl", std::make_shared<niox::SslHandler>(ssl.new_engine()));
//     ch.pipeline().add_last("app", std::make_shared<MyHandler>());
//   }));
//
// What it does:
//   - The handshake starts on channel_active (or when the handler is added to an active
//     channel), in the engine's mode: a client engine sends its hello at once. Its end
//     completes handshake_future() and fires an SslHandshakeCompletionEvent (with the cause
//     when it failed). It must finish within Options::handshake_timeout (10 s): a peer that
//     stalls is closed with SslErrc::handshake_timeout.
//   - Handlers after it read and write plaintext ByteBuffers. Writes wait until the handshake
//     is done; writes flushed together are encrypted into records of one buffer that leaves in
//     one write. Their promises complete when that buffer has gone. A FileRegion is read into
//     pooled buffers and encrypted piece by piece, the next piece once the previous left. A
//     region whose file is too short fails its write with Errc::file_region_truncated; when
//     pieces of it have left already (the file shrank meanwhile), the connection fails with
//     that error too, as on the plain transport: the writes behind it fail, exception_caught
//     gets it, and the connection closes without close_notify, a truncation to the peer.
//   - Bad input (plaintext, garbage, an oversized record, a failed handshake, a refused
//     renegotiation) fires exception_caught with a std::system_error in the niox.ssl category,
//     sends the engine's alert and closes the connection.
//   - close() and shutdown_output() send close_notify after the pending writes; close() waits up to Options::close_notify_read_timeout (3 s) for
//     the peer's before closing the connection, reading for it even if AUTO_READ was turned
//     off. A peer's close_notify closes it too.
//   - close() during the handshake fails it and the writes waiting for it with
//     SslErrc::handshake_canceled (exception_caught is not fired) and tells the peer: a
//     user_canceled and a close_notify alert, or, once our handshake records are encrypted, a
//     close_notify after the peer's last flight (SslEngine::close_outbound says why). Then it
//     waits as above, up to close_notify_read_timeout, for the peer to end the connection;
//     nothing it sends meanwhile reaches the handlers after this one.
//   - A connection that ends without the peer's close_notify (after the handshake began) is a
//     truncation: exception_caught gets SslErrc::truncated and the SslCloseCompletionEvent
//     carries it, so it never passes for a clean end of stream.
//   - kTLS: on a socket channel (LoopSocketChannel) whose kernel offers the "tls" ULP, with a
//     TLS 1.3 session on an AES-GCM or ChaCha20-Poly1305 suite, the handler hands the
//     outbound keys to the kernel (TLS_TX) once the handshake's last bytes have left. From
//     then on ByteBuffers go down the pipeline as plaintext and a FileRegion goes out by
//     sendfile (the transport's transfer engine), the kernel making the records;
//     close_notify is sent as a kernel alert record after the last write. Writes made
//     meanwhile wait for the hand-over. The inbound keys follow (TLS_RX) at the end of the
//     next read that leaves no partial record: from then on the kernel decrypts, its
//     plaintext goes to the handlers after this one as it was read, and the records a read
//     cannot take (EIO) come with their type (the transport's detail::KernelTlsRecord): the
//     peer's close_notify ends the input cleanly, session tickets are dropped, another alert
//     fails the connection (SslErrc::alert_received). Any failure keeps user-space records in
//     that direction for the connection (logged once); record_path(direction) says which
//     path each took. With kTLS a TLS failure closes without the engine's alert, and a key
//     update, asked for or sent by the peer, fails the connection
//     (SslErrc::kernel_tls_unsupported).
//
// Ownership: the handler owns its engine; one handler per channel (not sharable), made with
// std::make_shared (a FileRegion's next piece is written from a listener holding a weak_ptr). Threads:
// the channel's loop, like every handler.
#pragma once

#include <niox/ssl/record_path.hpp>
#include <niox/ssl/ssl_engine.hpp>
#include <niox/transport/channel_handler.hpp>
#include <niox/loop/executor.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <system_error>
#include <vector>

namespace niox {

// Fired when the handshake ends, successfully (empty cause) or not.
struct SslHandshakeCompletionEvent {
  std::error_code cause;
  bool is_success() const noexcept { return !cause; }
};

// Fired when the inbound side ended: with the peer's close_notify (empty cause) or without it
// (SslErrc::truncated).
struct SslCloseCompletionEvent {
  std::error_code cause;
  bool is_success() const noexcept { return !cause; }
};

namespace detail {
struct SslHandlerAccess;  // tests
}  // namespace detail

class SslHandler : public ChannelDuplexHandler, public std::enable_shared_from_this<SslHandler> {
 public:
  struct Options {
    std::chrono::milliseconds handshake_timeout{10'000};
    std::chrono::milliseconds close_notify_read_timeout{3'000};
  };

  explicit SslHandler(SslEngine engine) : SslHandler(std::move(engine), Options{}) {}
  SslHandler(SslEngine engine, Options options);
  ~SslHandler() override;

  SslEngine& engine() noexcept { return engine_; }
  // Completes when the handshake does; valid once the handler is in a pipeline.
  ChannelFuture handshake_future() const noexcept { return handshake_promise_.future(); }
  // Who makes the records this side sends: ktls once the kernel took them over (after the
  // handshake, when its bytes have left), user_space otherwise. Loop thread.
  RecordPath record_path() const noexcept { return tx_path_; }
  // Per direction: the inbound records become the kernel's (ktls) at the end of the first read
  // after the outbound hand-over that leaves no partial record.
  RecordPath record_path(TrafficDirection direction) const noexcept {
    return direction == TrafficDirection::outbound ? tx_path_ : rx_path_;
  }

  void handler_added(ChannelHandlerContext& ctx) override;
  void handler_removed(ChannelHandlerContext& ctx) override;
  void channel_active(ChannelHandlerContext& ctx) override;
  void channel_inactive(ChannelHandlerContext& ctx) override;
  // With half-closure allowed, the peer's end of input arrives as ChannelInputShutdownEvent: without
  // its close_notify first that is a truncation (or a failed handshake), and the connection fails
  // and closes as on any TLS error; after it, the event goes on.
  void user_event_triggered(ChannelHandlerContext& ctx, std::any event) override;
  void channel_read(ChannelHandlerContext& ctx, Message&& msg) override;
  void channel_read_complete(ChannelHandlerContext& ctx) override;
  void write(ChannelHandlerContext& ctx, Message&& msg, ChannelPromise promise) override;
  void flush(ChannelHandlerContext& ctx) override;
  void close(ChannelHandlerContext& ctx, ChannelPromise promise) override;
  // Sends close_notify first: a FIN alone would read as a truncation to the peer. During the
  // handshake, the handshake fails as canceled and the FIN follows what close() would send (the
  // alerts, or OpenSSL's close_notify once the peer's flight is read, waiting at most
  // Options::close_notify_read_timeout); input stays open until the peer ends its side.
  void shutdown_output(ChannelHandlerContext& ctx, ChannelPromise promise) override;

 private:
  friend struct detail::SslHandlerAccess;
  struct PendingWrite {
    Message message;  // a ByteBuffer or a FileRegion
    ChannelPromise promise;
  };

  void start_handshake(ChannelHandlerContext& ctx);
  void handshake_done(ChannelHandlerContext& ctx, std::error_code cause);
  void unwrap_all(ChannelHandlerContext& ctx, ByteBuffer& src);
  // Wraps what the engine has to say by itself (handshake, alerts, close_notify) and writes it.
  bool wrap_engine_output(ChannelHandlerContext& ctx);
  // Encrypts the pending writes (up to a FileRegion's next piece) into one buffer and writes it.
  void write_pending(ChannelHandlerContext& ctx);
  void fail(ChannelHandlerContext& ctx, std::error_code cause);
  void fail_pending(std::error_code cause);
  void pop_pending() { pending_.erase(pending_.begin()); }
  // The first pending write's promise, that write out of the queue first: completing the
  // promise may write again, which may move the queue's elements.
  ChannelPromise take_front_promise() {
    ChannelPromise p = std::move(pending_.front().promise);
    pop_pending();
    return p;
  }
  void cancel_handshake(ChannelHandlerContext& ctx, ChannelPromise promise);
  void cancel_handshake_output(ChannelHandlerContext& ctx, ChannelPromise promise);
  // What both cancels do first (the engine's alerts, or its close_notify once it can) and last
  // (the handshake and the writes that waited for it fail as canceled).
  void tell_peer_handshake_canceled(ChannelHandlerContext& ctx);
  void end_canceled_handshake(ChannelHandlerContext& ctx);
  // The FIN of a shutdown_output during the handshake, once the engine has said its last.
  void send_fin_when_said(ChannelHandlerContext& ctx);
  void send_fin(ChannelHandlerContext& ctx);
  void finish_close(ChannelHandlerContext& ctx);
  void close_after_timeout(ChannelHandlerContext& ctx);
  void answer_close_notify(ChannelHandlerContext& ctx);
  void cancel_timers() noexcept;
  // Runs `then` once every pending write has been encrypted and handed on (at once when none
  // waits): close_notify must follow the last record, not overtake a FileRegion's next piece.
  void after_pending(ChannelHandlerContext& ctx, std::function<void(ChannelHandlerContext&)> then);
  void run_after_pending_when_idle(ChannelHandlerContext& ctx);
  // kTLS: decides after a successful handshake, installs TLS_TX once the handshake's bytes
  // left, and sends close_notify through the kernel after the last write, then runs `then`.
  void begin_kernel_tx(ChannelHandlerContext& ctx);
  void finish_kernel_tx(std::error_code write_error, std::uint64_t waited_for);
  // kTLS receive: installs TLS_RX once a read left nothing of a record behind, and takes what
  // the kernel then delivers (plaintext, and alerts or handshake records as KernelTlsRecord).
  void begin_kernel_rx(ChannelHandlerContext& ctx);
  void read_kernel_record(ChannelHandlerContext& ctx, Message msg);
  void kernel_close_notify(ChannelHandlerContext& ctx,
                           std::function<void(ChannelHandlerContext&)> then);
  void send_kernel_close_notify(std::function<void(ChannelHandlerContext&)> then);
  // Remembers the future of the latest bytes handed down the pipeline.
  void track_write(ChannelFuture future);

  SslEngine engine_;
  Options options_;
  ChannelHandlerContext* ctx_ = nullptr;
  ChannelPromise handshake_promise_;
  ScheduledFuture handshake_timer_;
  ScheduledFuture close_timer_;
  ScheduledFuture fin_timer_;
  ByteBuffer cumulation_;  // a partial record carried over to the next read
  // In order. A vector: libstdc++'s std::deque takes 576 bytes (its map and a first node) when
  // it is made, in every connection, idle or not, and a node more each ten writes or so.
  std::vector<PendingWrite> pending_;
  std::vector<ChannelPromise> close_promises_;
  std::vector<ChannelPromise> fin_promises_;  // shutdown_output during the handshake
  std::function<void(ChannelHandlerContext&)> after_pending_;
  bool handshake_started_ = false;
  bool handshake_complete_ = false;
  bool flush_requested_ = false;
  bool wrote_ = false;  // bytes written since the last flush
  bool failed_ = false;
  bool closing_ = false;   // close() sent close_notify and waits for the peer's
  bool canceled_ = false;  // close() or shutdown_output() came during the handshake, and failed it
  bool region_in_flight_ = false;  // a FileRegion piece is on its way; the rest waits for it
  bool inbound_reported_ = false;
  std::error_code error_;
  RecordPath tx_path_ = RecordPath::user_space;
  bool tx_hand_over_pending_ = false;  // TLS_TX waits for the handshake's bytes to leave
  bool kernel_close_notify_sent_ = false;
  RecordPath rx_path_ = RecordPath::user_space;
  bool rx_hand_over_pending_ = false;  // TLS_RX waits for a read that ends on a record boundary
  bool kernel_inbound_done_ = false;   // the kernel brought the peer's close_notify
  ChannelFuture last_write_;           // of the latest bytes handed down the pipeline
  std::uint64_t writes_ = 0;           // how many times last_write_ was replaced
};

}  // namespace niox
