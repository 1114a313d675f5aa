#include <niox/buffer/buffer_pool.hpp>
#include <niox/transport/loop_socket_channel.hpp>
#include <niox/transport/transport_error.hpp>

#include "channels/kernel_tls.hpp"
#include "channels/socket.hpp"
#include "transport/log.hpp"

#include <span>

#include <sys/socket.h>
#include <unistd.h>

namespace niox {

using detail::Socket;

namespace {
// One receive-buffer allocator for every channel: it holds only the size table. Buffers come
// from the BufferPool of the thread that reads (the channel's loop); their blocks go back to the
// pool of whichever thread lets go of them last.
const AdaptiveRecvBufferAllocator& recv_allocator() {
  static const AdaptiveRecvBufferAllocator allocator;
  return allocator;
}
}  // namespace

// ---- AbstractLoopSocketChannel ------------------------------------------------------------

AbstractLoopSocketChannel::~AbstractLoopSocketChannel() { delete addresses_.load(); }

const AbstractLoopSocketChannel::Addresses* AbstractLoopSocketChannel::addresses() const {
  if (const Addresses* known = addresses_.load(std::memory_order_acquire)) {
    return known;
  }
  if (!is_active()) {
    return nullptr;  // not connected or bound yet, or closed before anyone asked
  }
  Socket socket(fd_.get());
  std::error_code ignored;  // what the kernel no longer knows (a peer gone already) stays unknown
  auto* fresh = new Addresses{socket.local_address(ignored), socket.remote_address(ignored)};
  const Addresses* expected = nullptr;
  if (!addresses_.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) {
    delete fresh;  // another thread asked at the same time
    return expected;
  }
  return fresh;
}

std::optional<SocketAddress> AbstractLoopSocketChannel::local_address() const {
  const Addresses* a = addresses();
  return a ? a->local : std::nullopt;
}

std::optional<SocketAddress> AbstractLoopSocketChannel::remote_address() const {
  const Addresses* a = addresses();
  return a ? a->remote : std::nullopt;
}

void AbstractLoopSocketChannel::close_descriptor_at_destruction() noexcept {
  if (fd_.valid()) {
    if (in_event_loop()) {
      event_loop().close(std::move(fd_));  // the loop forgets the descriptor
    } else {
      fd_.reset();  // another thread, or the loop is gone: the loop holds nothing of it
    }
  }
}

void AbstractLoopSocketChannel::close_through_loop() noexcept {
  event_loop().close(std::move(fd_));
}

std::shared_ptr<Channel> AbstractLoopSocketChannel::take_self_reference() noexcept {
  return std::move(keep_alive_);
}

void AbstractLoopSocketChannel::hold_self_until_closed() {
  keep_alive_ = shared_from_this();
  detail::close_at_shutdown(event_loop(), fd_.get(), *this);
}

void AbstractLoopSocketChannel::close_at_loop_shutdown() noexcept {
  try {
    close_for_transport();
  } catch (const std::exception& e) {
    log(LogLevel::error, "channel {}: closing at loop shutdown: {}", id(), e.what());
  }
}

void AbstractLoopSocketChannel::do_close_without_loop() noexcept {
  if (closed_without_loop_.exchange(true)) {
    return;
  }
  fd_.reset();
  auto last = std::move(keep_alive_);  // may be the last reference: released on return
}

// ---- LoopSocketChannel --------------------------------------------------------------------

LoopSocketChannel::LoopSocketChannel(Token, EventLoop& loop, FileDescriptor fd, int family)
    : AbstractLoopSocketChannel(loop, std::move(fd), family),
      recv_(recv_allocator().new_handle()) {}

std::shared_ptr<LoopSocketChannel> LoopSocketChannel::open(EventLoop& loop, int family) {
  return adopt(loop, Socket::open(family, SOCK_STREAM, true), family);
}

std::shared_ptr<LoopSocketChannel> LoopSocketChannel::adopt(EventLoop& loop, FileDescriptor fd,
                                                            int family) {
  // If make_shared throws, `fd` (still owned here or by the half-built channel) closes the socket.
  return std::make_shared<LoopSocketChannel>(Token{}, loop, std::move(fd), family);
}

LoopSocketChannel::~LoopSocketChannel() {
  destroy_pipeline();
  close_descriptor_at_destruction();
}

void LoopSocketChannel::apply_options(const ChannelOptions& options) {
  if (fd_.valid()) {
    if (auto ec = options.apply_to_socket(fd_.get(), family_)) {
      log(LogLevel::warn, "channel {}: a socket option was refused: {}", id(), ec.message());
    }
  }
  options.apply_to_config(*this);
}

ChannelFuture LoopSocketChannel::connect(const SocketAddress& remote) {
  ChannelPromise p = new_promise();
  ChannelFuture f = p.future();
  connect(remote, std::move(p));
  return f;
}

void LoopSocketChannel::connect(const SocketAddress& remote, ChannelPromise promise) {
  auto run = [this, remote, promise]() mutable {
    if (!fd_.valid()) {
      promise.try_failure(transport::Errc::channel_closed);
      return;
    }
    if (active_ || connecting_) {
      promise.try_failure(std::make_error_code(
          active_ ? std::errc::already_connected : std::errc::connection_already_in_progress));
      return;
    }
    connecting_ = std::make_unique<Connecting>();
    connecting_->promise = std::move(promise);
    // The loop copies the address into its operation: the channel keeps none.
    connecting_->op = event_loop().connect(
        fd_.get(), remote, [s = self()](std::error_code ec) { s->on_connected(ec); });
    auto timeout = config().connect_timeout();
    if (timeout.count() > 0) {
      connecting_->timer = event_loop().schedule(timeout, [s = self()] {
        if (s->connecting_) {
          s->connect_timed_out_ = true;
          s->event_loop().cancel(s->connecting_->op);
        }
      });
    }
  };
  if (!on_loop(std::move(run))) {
    promise.try_failure(transport::Errc::channel_closed);
  }
}

void LoopSocketChannel::on_connected(std::error_code ec) {
  auto connecting = std::move(connecting_);
  if (!connecting) return;
  connecting->timer.cancel();
  ChannelPromise promise = std::move(connecting->promise);
  if (!fd_.valid()) {
    promise.try_failure(transport::Errc::channel_closed);
    return;
  }
  if (ec) {
    if (connect_timed_out_) {
      ec = std::make_error_code(std::errc::timed_out);
    }
    promise.try_failure(ec);
    close_for_transport();
    return;
  }
  become_active();
  promise.try_success();
}

void LoopSocketChannel::start_accepted() {
  // A descriptor the accept made is a non-blocking socket the peer has not written to yet, as
  // far as anyone knows: the loop need not ask (fstat, fcntl) on its first operation, nor try
  // a read before the bytes are there. One adopted from elsewhere could be blocking.
  if (accepted_ && fd_.valid()) detail::declare_accepted_socket(event_loop(), fd_.get());
  become_active();
}

void LoopSocketChannel::become_active() {
  if (active_ || !fd_.valid()) {
    return;
  }
  active_ = true;
  hold_self_until_closed();
  notify_active();
}

ChannelFuture LoopSocketChannel::close_abortively() {
  auto p = new_promise();
  if (!on_loop([this, p]() mutable {
        abort_on_close_ = true;
        pipeline().close(std::move(p));
      })) {
    p.try_failure(transport::Errc::channel_closed);
  }
  return p.future();
}

// ---- Reading ------------------------------------------------------------------------------

void LoopSocketChannel::do_read_begin() {
  if (multishot_) {
    if (!in_read_handler_ && fd_.valid() && active_) resume_multishot();
    return;
  }
  if (reading_ || in_read_handler_ || !fd_.valid() || !active_) {
    return;
  }
  if (!batch_open_) {
    batch_open_ = true;
    recv_.reset(config());
  }
  start_read();
}

void LoopSocketChannel::start_read() {
  // The loop takes the buffer when bytes are there: a connection waiting for its peer holds
  // none.
  const std::size_t size = recv_.guess();
  recv_.attempted_bytes_read(size);
  reading_ = true;
  auto on_read = [s = self()](std::error_code ec, std::size_t n, ByteBuffer&& buf) {
    s->on_read(ec, n, std::move(buf));
  };
  // Once per read: the handler lives in the loop's operation, not in a heap block of its own.
  static_assert(detail::CompletionFn::stores_inline<decltype(on_read)>());
  event_loop().receive(fd_.get(), size, std::move(on_read));
}

void LoopSocketChannel::start_multishot() {
  reading_ = true;
  multishot_stopping_ = false;
  // Ring arrivals are a ring buffer at most; max_bytes is what a read without the ring takes,
  // which on a bulk stream is all that waits, up to the allocator's largest guess.
  event_loop().receive_multishot(
      fd_.get(), recv_.maximum(),
      [s = self()](std::error_code ec, std::size_t n, ByteBuffer&& buf, bool batch_end) {
        return s->on_multishot(ec, n, std::move(buf), batch_end);
      });
}

// What arrived while reading was paused goes first, in order, as long as reading is wanted;
// then the end of the stream if it came behind those bytes; then the receive is armed again.
void LoopSocketChannel::resume_multishot() {
  while (has_parked() && should_keep_reading() && fd_.valid()) {
    auto& bufs = parked_->bufs;
    ByteBuffer b = std::move(bufs.front());
    bufs.erase(bufs.begin());
    if (!deliver_one(std::move(b), bufs.empty())) return;
  }
  if (has_parked() || !fd_.valid() || !should_keep_reading()) return;
  if (parked_) {
    // Drained: the block goes, and with it the end that waited behind the bytes, if any.
    auto held = std::move(parked_);
    if (held->end) {
      deliver_end(held->end_ec);
      return;
    }
  }
  if (!reading_ && !is_input_shutdown()) start_multishot();
}

LoopSocketChannel::Parked& LoopSocketChannel::parked() {
  if (!parked_) parked_ = std::make_unique<Parked>();
  return *parked_;
}

// One arrival: channel_read, and channel_read_complete when it is the last the loop hands over
// this turn (the batch a read loop until EAGAIN would have made) or reading pauses after it.
// False when the channel closed meanwhile.
bool LoopSocketChannel::deliver_one(ByteBuffer&& buf, bool batch_end) {
  in_read_handler_ = true;
  if (!batch_open_) {
    batch_open_ = true;
    recv_.reset(config());
  }
  const std::size_t n = buf.position();
  if (!handle_read_result({}, n, std::move(buf))) return false;
  if (batch_end || !should_keep_reading()) end_read_batch();
  in_read_handler_ = false;
  return fd_.valid();
}

void LoopSocketChannel::deliver_end(std::error_code ec) {
  in_read_handler_ = true;
  batch_open_ = true;
  handle_read_result(ec, 0, ByteBuffer());
  in_read_handler_ = false;
}

bool LoopSocketChannel::on_multishot(std::error_code ec, std::size_t n, ByteBuffer&& buf,
                                     bool batch_end) {
  const bool last = ec || n == 0;
  if (last) reading_ = false;
  if (!fd_.valid()) return false;  // closed: the channel drops what was still on its way
  if (last) {
    const bool stopped_by_us = multishot_stopping_;
    multishot_stopping_ = false;
    if (ec == operation_aborted()) {
      if (!stopped_by_us) {
        close_for_transport();  // the loop is shutting down under an open channel
        return false;
      }
      if (!in_read_handler_) resume_multishot();  // reading may be wanted again already
      return false;
    }
    if (has_parked() || !should_keep_reading()) {
      parked().end = true;  // after the held bytes, once reading resumes
      parked_->end_ec = ec;
      return false;
    }
    deliver_end(ec);
    return false;
  }
  if (multishot_stopping_ || has_parked() || !should_keep_reading()) {
    // Reading paused: the kernel may still have handed over bytes before it saw the cancel.
    parked().bufs.push_back(std::move(buf));
    multishot_stopping_ = true;
    return false;
  }
  if (!deliver_one(std::move(buf), batch_end)) return false;
  if (!should_keep_reading() || is_input_shutdown()) {
    multishot_stopping_ = true;
    return false;
  }
  return true;
}

void LoopSocketChannel::end_read_batch() {
  if (!batch_open_) {
    return;
  }
  batch_open_ = false;
  recv_.read_complete();
  notify_read_complete();
}

void LoopSocketChannel::on_read(std::error_code ec, std::size_t n, ByteBuffer&& buf) {
  reading_ = false;
  if (!fd_.valid()) {
    return;  // closed: the abort of the read we had in the kernel
  }
  if (ec == operation_aborted()) {
    // The loop is shutting down under an open channel.
    close_for_transport();
    return;
  }
  in_read_handler_ = true;
  if (buf.capacity() != 0 && buf.capacity() < recv_.guess()) {
    // A ring buffer smaller than the guess: what this read could take was its capacity, and
    // filling it means more is probably waiting.
    recv_.attempted_bytes_read(buf.capacity());
  }
  bool more = handle_read_result(ec, n, std::move(buf));
  // A read that filled its buffer probably left more behind. The loop's read would wait for
  // the next bytes, and the batch (and the flush a handler does in channel_read_complete)
  // with it; so the rest of the batch is read here without waiting, until EAGAIN (Netty's
  // read loop).
  // AUTO_READ turned off by a handler during the batch ends it (Netty checks it live too).
  while (more && recv_.continue_reading() && config().is_auto_read()) {
    ByteBuffer b = recv_.allocate();
    recv_.attempted_bytes_read(b.remaining());
    std::error_code e;
    // One recv(MSG_DONTWAIT) that tells the loop whether it drained the socket, so the next
    // receive neither tries an empty socket nor waits on a full one.
    std::int64_t k = event_loop().receive_now(fd_.get(), b, e);
    if (k == 0 && !e) {
      recv_.last_bytes_read(0);
      break;
    }
    more = handle_read_result(e, k > 0 ? static_cast<std::size_t>(k) : 0, std::move(b));
  }
  if (!more) {
    return;  // closed or end of stream: already handled
  }
  end_read_batch();
  in_read_handler_ = false;
  if (!fd_.valid() || is_input_shutdown()) {
    return;
  }
  if (should_keep_reading()) {
    // The first read was a single receive (see the class comment); from the second on, the
    // multishot where the loop has one. Not once the kernel decrypts: a client's handshake can
    // end in its first read, and kernel TLS reads stay single, as on epoll.
    multishot_ = !kernel_tls_rx_ && event_loop().has_multishot_receive();
    do_read_begin();
  }
}

bool LoopSocketChannel::handle_read_result(std::error_code ec, std::size_t n, ByteBuffer&& buf) {
  // The flag first: comparing an error_code with an errc calls its category, on every read.
  if (kernel_tls_rx_ && ec == std::errc::io_error && fd_.valid()) {
    return read_kernel_tls_record();
  }
  if (ec) {
    end_read_batch();
    in_read_handler_ = false;
    if (fd_.valid()) {
      // The connection is gone (ECONNRESET...): the flushed writes fail with that cause, the
      // unflushed ones with channel_closed when the channel closes below.
      mutable_outbound_buffer().fail_flushed(ec);
      pipeline().fire_exception_caught(std::make_exception_ptr(std::system_error(ec, "read")));
      close_for_transport();
    }
    return false;
  }
  if (n == 0) {
    recv_.last_bytes_read(-1);
    end_read_batch();
    in_read_handler_ = false;
    notify_input_shutdown();
    return false;
  }
  recv_.last_bytes_read(static_cast<ssize_t>(n));
  recv_.increment_messages_read();
  buf.flip();
  notify_read(std::move(buf));
  if (!fd_.valid()) {
    in_read_handler_ = false;
    return false;
  }
  return true;
}

bool LoopSocketChannel::read_kernel_tls_record() {
  // A record's plaintext is at most 2^14 bytes (RFC 8446 5.1).
  ByteBuffer b = BufferPool::for_this_thread().allocate(16 * 1024);
  std::uint8_t type = 0;
  std::error_code ec;
  const long n = detail::receive_kernel_tls_record(fd_.get(), b.writable_bytes(), type, ec);
  if (n < 0 &&
      (ec == std::errc::resource_unavailable_try_again || ec == std::errc::operation_would_block)) {
    return true;  // nothing after all: the next read waits for it
  }
  if (n < 0 && ec == std::errc::io_error) {
    ec = std::make_error_code(std::errc::protocol_error);  // not EIO again: no second try
  }
  if (n <= 0) {
    return handle_read_result(ec, 0, ByteBuffer());
  }
  b.position(b.position() + static_cast<std::size_t>(n));
  if (type == detail::tls_application_data_record) {
    return handle_read_result({}, static_cast<std::size_t>(n), std::move(b));
  }
  pipeline().fire_channel_read(Message(detail::KernelTlsRecord{type, std::move(b.flip())}));
  if (!fd_.valid()) {
    in_read_handler_ = false;
    return false;
  }
  return true;
}

namespace detail {

bool KernelTls::may_start_receive(const LoopSocketChannel& ch) noexcept {
  return ch.in_read_handler_ && !ch.reading_ && !ch.multishot_ && !ch.has_parked() &&
         ch.fd_.valid();
}

void KernelTls::started_receive(LoopSocketChannel& ch) noexcept { ch.kernel_tls_rx_ = true; }

void KernelTls::started_send(LoopSocketChannel& ch) noexcept { ch.kernel_tls_tx_ = true; }

}  // namespace detail

// ---- Writing ------------------------------------------------------------------------------

void LoopSocketChannel::do_write(OutboundBuffer& out) {
  // Netty's starting budget for one gathering write: twice SO_SNDBUF, adapted per write
  // afterwards. Asked for only once a write could exceed the smallest such budget (Linux keeps
  // SO_SNDBUF at 4,608 bytes or more): a connection that writes less, a request and a small
  // response, saves the system call.
  constexpr std::size_t smallest_budget = 2 * 4608;
  if (!out.max_bytes_per_write_set() && out.total_pending_bytes() > smallest_budget &&
      fd_.valid()) {
    std::error_code ec;
    const int sndbuf = detail::get_socket_option(fd_.get(), StandardSocketOptions::so_sndbuf, ec);
    out.set_max_bytes_per_write(!ec && sndbuf > 0 ? static_cast<std::size_t>(sndbuf) * 2
                                                  : max_bytes_per_call);
  }
  // Until a send here finds the socket full: then the loop's write (which waits for room) takes
  // the rest, and a second send now would only find EAGAIN.
  bool send_now = true;
  while (fd_.valid() && !writing_) {
    GatherWrite g = out.gather();
    if (g.empty()) {
      out.gather_done();
      push_held();  // a region behind the held bytes failed before sending any
      return;
    }
    if (g.other != nullptr) {
      // Never queued by this transport (accepts_outbound refuses it); fail it, go on.
      out.gather_done();
      out.remove(transport::Errc::unsupported_message);
      continue;
    }
    if (g.file_region != nullptr) {
      FileRegion& r = *g.file_region;
      if (r.transferred() == 0) {
        if (auto ec = r.check_file_length()) {
          // Nothing of it went out: fail this write alone, the stream is still intact.
          out.gather_done();
          out.remove(ec);
          continue;
        }
      }
      if (r.remaining() == 0) {
        out.remove_bytes(0);
        continue;
      }
      writing_ = true;
      set_write_pending(true);
      more_held_ = false;  // sendfile's last call goes without MSG_MORE: it pushes what was held
      event_loop().transfer_to(r.fd(), static_cast<std::int64_t>(r.next_offset()),
                               static_cast<std::size_t>(r.remaining()), fd_.get(),
                               [s = self()](std::error_code ec, std::size_t n, TransferPath) {
                                 s->on_file_written(ec, n);
                               });
      return;
    }
    write_attempted_ = static_cast<std::uint32_t>(g.bytes);  // g.bytes <= max_bytes_per_call
    // Only one write is in the kernel at a time, and a failed one ends the connection: what this
    // one holds back is known from the moment it is submitted.
    const bool region_next = g.file_region_next && detail::is_ip_family(family_);
    more_held_ = region_next || close_hold_ != CloseHold::none;
    const std::size_t zero_copy_from = config().write_zero_copy_threshold();
    const bool zero_copy = zero_copy_from > 0 && g.bytes >= zero_copy_from;
    const WriteFlags flags = (more_held_ ? WriteFlags::more : WriteFlags::none) |
                             (zero_copy ? WriteFlags::zero_copy : WriteFlags::none);
    // On epoll, Netty's flush: what the socket takes at once goes out now, in the one send
    // (EventLoop::write_now) the loop's write would make at once anyway, and the entries it
    // covers complete before the flush returns; no operation and no pass of the loop for the
    // common write that fits. The loop's write keeps what must be shaped (MSG_MORE ahead of a
    // file region, zero-copy) and what a full socket left. An error (EPIPE...) sends nothing
    // here: the loop's write meets it again and reports it. On io_uring the ring carries the
    // send in the submission the loop makes anyway: a send syscall per write instead lost 3.5%
    // of churn's requests/s and gained nothing on echo.
    if (send_now && !region_next && !zero_copy && event_loop().backend() == BackendKind::epoll) {
      const std::size_t n = event_loop().write_now(fd_.get(), g.iovecs, flags);
      if (n > 0) {
        send_now = n == g.bytes;
        out.adapt_max_bytes_per_write(g.bytes, n);
        advance(out, n);  // may run handlers (writability): the loop above looks again
        continue;
      }
    }
    writing_ = true;
    set_write_pending(true);
    auto done = [s = self()](std::error_code ec, std::size_t n, auto&&) { s->on_written(ec, n); };
    static_assert(detail::CompletionFn::stores_inline<decltype(done)>());  // as start_read's
    if (g.single()) {
      const iovec& v = g.iovecs[0];
      event_loop().write(fd_.get(),
                         ByteBuffer::wrap(std::span<const std::byte>(
                             static_cast<const std::byte*>(v.iov_base), v.iov_len)),
                         flags, std::move(done));
    } else {
      // The loop copies the views into its operation: one vector per thread serves every
      // connection on it.
      thread_local std::vector<ByteBuffer> views;
      views.clear();
      for (const iovec& v : g.iovecs) {
        views.push_back(ByteBuffer::wrap(
            std::span<const std::byte>(static_cast<const std::byte*>(v.iov_base), v.iov_len)));
      }
      event_loop().write(fd_.get(), std::span<const ByteBuffer>(views), flags, std::move(done));
      views.clear();
    }
    return;
  }
}

void LoopSocketChannel::on_written(std::error_code ec, std::size_t n) {
  writing_ = false;
  OutboundBuffer& out = mutable_outbound_buffer();
  if (!fd_.valid()) {
    out.gather_done();  // close failed the entries; release what the kernel held
    return;
  }
  if (ec) {
    if (ec == operation_aborted()) {
      ec = transport::Errc::channel_closed;
    }
    notify_write_error(ec);
    return;
  }
  out.adapt_max_bytes_per_write(write_attempted_, n);
  advance(out, n);
}

void LoopSocketChannel::on_file_written(std::error_code ec, std::size_t n) {
  writing_ = false;
  OutboundBuffer& out = mutable_outbound_buffer();
  if (!fd_.valid()) {
    out.gather_done();
    return;
  }
  if (ec) {
    if (ec == LoopError::end_of_file) {
      // The file shrank during the transfer: the peer got part of the region, so the stream
      // cannot go on.
      ec = transport::Errc::file_region_truncated;
    } else if (ec == operation_aborted()) {
      ec = transport::Errc::channel_closed;
    }
    notify_write_error(ec);
    return;
  }
  advance(out, n);
}

// The kernel took n bytes: complete what they cover, push what MSG_MORE still holds once
// nothing flushed is left (the only place the outbound buffer drains), write on.
void LoopSocketChannel::advance(OutboundBuffer& out, std::size_t n) {
  out.remove_bytes(n);
  if (out.is_empty()) {
    push_held();
  }
  notify_writable_again();
}

// Bytes sent with MSG_MORE wait for the file region behind them; when that region failed before
// sending a byte, only the kernel's probe timer (about 200 ms) would push them. Clearing
// TCP_CORK pushes a socket's pending partial segment whether or not it was corked.
//
// After expect_close() (close_after_flush, shutdown_output) the FIN pushes them instead, in the
// same segment. The close is due before the loop waits again; a task queued now runs before that
// wait and pushes them if it has not come (the loop runs queued tasks in order, so a close from
// a write's listener queued as this drain completed the write comes first).
void LoopSocketChannel::push_held() noexcept {
  if (!more_held_) {
    return;
  }
  if (close_hold_ == CloseHold::expected) {
    try {
      event_loop().execute([s = self()] {
        s->close_hold_ = CloseHold::none;
        if (s->fd_.valid() && !s->writing_ && !s->is_output_shutdown()) s->push_held();
      });
      close_hold_ = CloseHold::push_queued;
    } catch (...) {
      close_hold_ = CloseHold::none;  // no task (out of memory): push now, as without the hint
    }
  }
  if (close_hold_ != CloseHold::none) return;
  more_held_ = false;
  detail::set_socket_option(fd_.get(), StandardSocketOptions::tcp_cork, 0);
}

void LoopSocketChannel::expect_close() noexcept {
  // Only TCP has segments to share with the FIN; under kTLS the FIN would not take the held
  // record along.
  if (detail::is_ip_family(family_) && !kernel_tls_tx_ && fd_.valid() &&
      close_hold_ == CloseHold::none) {
    close_hold_ = CloseHold::expected;
  }
}

// ---- Closing ------------------------------------------------------------------------------

void LoopSocketChannel::do_close() noexcept {
  if (!fd_.valid()) {
    return;
  }
  if (abort_on_close_) {
    detail::set_socket_option(fd_.get(), StandardSocketOptions::so_linger, 0);  // {1, 0}: RST
  }
  parked_.reset();  // closed: nobody reads them any more
  if (connecting_) {
    connecting_->timer.cancel();
    connecting_->promise.try_failure(transport::Errc::channel_closed);  // its listeners run later
  }
  close_through_loop();
}

std::error_code LoopSocketChannel::do_shutdown_output() noexcept {
  if (!fd_.valid()) {
    return transport::Errc::channel_closed;
  }
  return Socket(fd_.get()).shutdown(SHUT_WR);
}

}  // namespace niox
