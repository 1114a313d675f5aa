// AsynchronousTlsChannel: TLS over an AsynchronousSocketChannel, whose operations you co_await
// (the name is Java's tls-channel library's). It drives an SslEngine, the same engine the
// transport's SslHandler drives, so a coroutine server and a pipeline server speak the same TLS.
//
//   Task<void> serve(AsynchronousSocketChannel socket, SslContext& ssl) {
//     AsynchronousTlsChannel tls(std::move(socket), ssl.new_engine());
//     co_await tls.handshake();
//     ByteBuffer buf = ByteBuffer::allocate(16384);
//     while (co_await tls.read(buf) >= 0) {   // -1: the peer's close_notify
//       buf.flip();
//       co_await tls.write(buf);
//       buf.clear();
//     }
//     co_await tls.shutdown();                 // our close_notify; the peer's, a bounded wait
//   }
//
// Semantics:
//   - handshake() runs the whole handshake. read() and write() run it first when nobody did.
//   - read() returns the plaintext bytes it put into the buffers (some as soon as one record
//     is decrypted), 0 when they have no room, and -1 once the peer's close_notify arrived. A
//     connection that ends without close_notify is not a clean end: read() fails with
//     SslErrc::truncated.
//   - write() encrypts every remaining byte; the records of one call (up to 16 records,
//     about 256 KiB) leave in one write, so a gathering write of many small buffers is one
//     system call and one record per 16 KiB, not one per buffer.
//   - shutdown() sends close_notify, then waits up to Options::close_notify_timeout for the
//     peer's (discarding data that still arrives). The peer's close_notify, or the wait
//     running out, completes it normally; a peer that closes without close_notify makes it
//     fail with SslErrc::truncated. When a read is outstanding, shutdown() leaves the peer's
//     close_notify to it (that read returns -1) and completes once ours is sent. The socket
//     stays open: close() or the destructor closes it.
//   - A TLS failure (bad record, certificate rejected, refused renegotiation) first sends the
//     engine's alert, then fails the operation with the niox.ssl code (see ssl_error.hpp).
//   - kTLS: where the kernel offers the "tls" ULP and the session allows it (TLS 1.3, an AES-GCM
//     or ChaCha20-Poly1305 suite), the handshake ends by handing the keys to the kernel:
//     TLS_TX at once, TLS_RX as soon as no received ciphertext waits in user space (at the
//     handshake's end, or before a later read). Writes then send plaintext that the kernel
//     makes records of; reads take the kernel's plaintext with recvmsg and tell data from
//     other records: the peer's close_notify is -1, another alert fails the read with
//     SslErrc::alert_received, a session ticket is dropped (this connection's session is not
//     kept for resumption), a key update fails the read with SslErrc::kernel_tls_unsupported.
//     Any setsockopt failure keeps user-space records for that direction (logged once).
//     record_path() says which path each direction took. After the outbound hand-over a TLS
//     failure can no longer send the engine's alert; close_notify still leaves.
//
// Errors, cancellation, threads: as AsynchronousSocketChannel. Every operation throws
// std::system_error, or, given a std::error_code&, sets it and returns what moved before the
// error. A stop request on the awaiting task's std::stop_token cancels the socket operation it
// waits on (operation_aborted); with_timeout() bounds any operation, the handshake included.
// A cancelled or failed operation leaves the TLS stream unusable except for close(): a record
// may have been half sent or half read. At most one read and one write may be outstanding.
//
// Ownership: the channel owns its socket and its engine. Outstanding operations refer to the
// channel, so it must neither move nor be destroyed while one is suspended. The caller's
// buffers are used only while the co_await runs, and advance by exactly the plaintext moved.
// The channel keeps one network buffer for each direction (about 33 KiB in, up to 267 KiB out
// while a large write runs) and one for a decrypted record a small read could not take.
#pragma once

#include <niox/async/asynchronous_socket_channel.hpp>
#include <niox/async/task.hpp>
#include <niox/buffer/byte_buffer.hpp>
#include <niox/ssl/record_path.hpp>
#include <niox/ssl/ssl_engine.hpp>
#include <niox/ssl/traffic_keys.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <system_error>

namespace niox {

class AsynchronousTlsChannel {
 public:
  struct Options {
    // How long shutdown() waits for the peer's close_notify after sending ours.
    std::chrono::milliseconds close_notify_timeout{3000};
  };

  // Takes the connected socket and an engine from SslContext::new_engine() (client mode for a
  // connecting socket, server mode for an accepted one).
  AsynchronousTlsChannel(AsynchronousSocketChannel channel, SslEngine engine)
      : AsynchronousTlsChannel(std::move(channel), std::move(engine), Options{}) {}
  AsynchronousTlsChannel(AsynchronousSocketChannel channel, SslEngine engine, Options options);

  AsynchronousTlsChannel(AsynchronousTlsChannel&&) noexcept = default;
  AsynchronousTlsChannel& operator=(AsynchronousTlsChannel&&) noexcept = default;

  EventLoop& loop() const noexcept { return channel_.loop(); }
  AsynchronousSocketChannel& channel() noexcept { return channel_; }
  // The negotiated session: protocol(), cipher_suite(), application_protocol(), ...
  const SslEngine& engine() const noexcept { return engine_; }
  bool is_open() const noexcept { return channel_.is_open(); }
  // Who makes the records this side sends (see record_path.hpp): ktls once the kernel took
  // them over after the handshake; user_space before, where the kernel has no "tls" ULP, for
  // TLS 1.2 and wherever the hand-over failed.
  RecordPath record_path() const noexcept { return tx_path_; }
  // The same for one direction: the inbound side follows the outbound one, once no received
  // ciphertext waits in user space.
  RecordPath record_path(TrafficDirection direction) const noexcept {
    return direction == TrafficDirection::outbound ? tx_path_ : rx_path_;
  }

  Task<void> handshake();
  Task<void> handshake(std::error_code& ec);

  Task<std::int64_t> read(ByteBuffer& dst);
  Task<std::int64_t> read(ByteBuffer& dst, std::error_code& ec);
  // Scattering: fills the buffers in order.
  Task<std::int64_t> read(std::span<ByteBuffer> dsts);
  Task<std::int64_t> read(std::span<ByteBuffer> dsts, std::error_code& ec);

  // Every remaining byte, encrypted; returns their count.
  Task<std::size_t> write(ByteBuffer& src);
  Task<std::size_t> write(ByteBuffer& src, std::error_code& ec);
  // Gathering: the buffers' bytes in order, packed into as few records as they fill.
  Task<std::size_t> write(std::span<ByteBuffer> srcs);
  Task<std::size_t> write(std::span<ByteBuffer> srcs, std::error_code& ec);
  // The same operation under the name Asio users look for: write() never returns short.
  Task<std::size_t> write_all(std::span<ByteBuffer> srcs);
  Task<std::size_t> write_all(std::span<ByteBuffer> srcs, std::error_code& ec);

  Task<void> shutdown();
  Task<void> shutdown(std::error_code& ec);

  // Closes the socket without close_notify (what the peer sees as truncation). Loop thread
  // only, as AsynchronousSocketChannel::close().
  void close() { channel_.close(); }

 private:
  Task<void> handshake_impl(std::error_code& ec);
  Task<std::int64_t> read_impl(std::span<ByteBuffer> dsts, std::error_code& ec);
  Task<std::size_t> write_impl(std::span<ByteBuffer> srcs, std::error_code& ec);
  Task<void> shutdown_impl(std::error_code& ec);
  Task<void> await_close_notify();  // throws; the peer's close_notify, data discarded
  // Sends what the engine has queued (handshake messages, close_notify, an alert).
  Task<void> flush_engine(std::error_code& ec);
  // Reads more network bytes; the end of the stream is SslErrc::truncated.
  Task<void> fill(std::error_code& ec);
  // After an engine error: sends its alert, best effort, keeping `ec`.
  Task<void> send_alert();
  // kTLS: TLS_TX after the handshake, then TLS_RX whenever no ciphertext waits in net_in_.
  void hand_over_outbound();
  void hand_over_inbound();
  Task<std::int64_t> read_kernel(std::span<ByteBuffer> dsts, std::error_code& ec);
  Task<void> send_kernel_close_notify(std::error_code& ec);
  bool inbound_done() const noexcept { return kernel_inbound_done_ || engine_.is_inbound_done(); }

  AsynchronousSocketChannel channel_;
  SslEngine engine_;
  Options options_;
  ByteBuffer net_in_;   // received, not yet unwrapped: [0, position)
  ByteBuffer net_out_;  // records on their way out
  ByteBuffer app_in_;   // decrypted, not yet read: [position, limit)
  bool handshake_done_ = false;
  bool reading_ = false;  // a read is outstanding: shutdown() leaves the peer's close_notify to it
  RecordPath tx_path_ = RecordPath::user_space;
  RecordPath rx_path_ = RecordPath::user_space;
  bool rx_hand_over_pending_ = false;  // TLS_TX is in; TLS_RX waits for net_in_ to empty
  bool kernel_inbound_done_ = false;   // the peer's close_notify came through TLS_RX
  bool kernel_close_notify_sent_ = false;
};

}  // namespace niox
