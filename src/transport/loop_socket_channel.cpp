#include <niox/transport/loop_socket_channel.hpp>
#include <niox/transport/transport_error.hpp>

#include "transport/log.hpp"

#include <algorithm>
#include <cerrno>
#include <span>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

namespace niox {

namespace {

std::error_code last_error() noexcept { return {errno, std::system_category()}; }

std::error_code set_int(int fd, int level, int name, int value) noexcept {
  if (::setsockopt(fd, level, name, &value, sizeof value) != 0) {
    return last_error();
  }
  return {};
}

// Stream sockets of these families are TCP: only they take TCP_* options, and only on them does
// MSG_MORE hold bytes back.
bool is_tcp(int family) noexcept { return family == AF_INET || family == AF_INET6; }

std::optional<SocketAddress> address_of(int fd, bool peer) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len)
                : ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (rc != 0 || len <= sizeof(sa_family_t)) {
    return std::nullopt;  // e.g. an unnamed Unix-domain client socket
  }
  try {
    return SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&ss), len);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// One receive-buffer allocator for every channel: it holds only the size table. Buffers come
// from the BufferPool of the thread that reads (the channel's loop); their blocks go back to the
// pool of whichever thread lets go of them last.
const AdaptiveRecvBufferAllocator& recv_allocator() {
  static const AdaptiveRecvBufferAllocator allocator;
  return allocator;
}

}  // namespace

// ---- ChannelOptions -----------------------------------------------------------------------

void ChannelOptions::merge(const ChannelOptions& o) {
  auto take = [](auto& mine, const auto& theirs) {
    if (theirs) {
      mine = theirs;
    }
  };
  take(tcp_nodelay, o.tcp_nodelay);
  take(so_reuseaddr, o.so_reuseaddr);
  take(so_keepalive, o.so_keepalive);
  take(so_sndbuf, o.so_sndbuf);
  take(so_rcvbuf, o.so_rcvbuf);
  take(tcp_notsent_lowat, o.tcp_notsent_lowat);
  take(so_linger, o.so_linger);
  take(so_backlog, o.so_backlog);
  take(auto_read, o.auto_read);
  take(write_buffer_water_mark, o.write_buffer_water_mark);
  take(write_buffer_hard_limit, o.write_buffer_hard_limit);
  take(connect_timeout, o.connect_timeout);
  take(allow_half_closure, o.allow_half_closure);
}

std::error_code ChannelOptions::apply_to_socket(int fd, int family) const noexcept {
  const bool inet = is_tcp(family);
  std::error_code ec;
  auto keep_first = [&ec](std::error_code e) {
    if (e && !ec) {
      ec = e;
    }
  };
  if (tcp_nodelay && inet) {
    keep_first(set_int(fd, IPPROTO_TCP, TCP_NODELAY, *tcp_nodelay ? 1 : 0));
  }
  if (tcp_notsent_lowat && inet) {
    keep_first(set_int(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, *tcp_notsent_lowat));
  }
  if (so_reuseaddr && inet) {
    keep_first(set_int(fd, SOL_SOCKET, SO_REUSEADDR, *so_reuseaddr ? 1 : 0));
  }
  if (so_keepalive && inet) {
    keep_first(set_int(fd, SOL_SOCKET, SO_KEEPALIVE, *so_keepalive ? 1 : 0));
  }
  if (so_sndbuf) {
    keep_first(set_int(fd, SOL_SOCKET, SO_SNDBUF, *so_sndbuf));
  }
  if (so_rcvbuf) {
    keep_first(set_int(fd, SOL_SOCKET, SO_RCVBUF, *so_rcvbuf));
  }
  if (so_linger) {
    linger l{};
    l.l_onoff = *so_linger >= 0 ? 1 : 0;
    l.l_linger = std::max(*so_linger, 0);
    if (::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l) != 0) {
      keep_first(last_error());
    }
  }
  return ec;
}

void ChannelOptions::apply_to_config(Channel& channel) const {
  auto& c = channel.config();
  if (write_buffer_water_mark) {
    c.set_write_buffer_water_mark(*write_buffer_water_mark);
  }
  if (write_buffer_hard_limit) {
    c.set_write_buffer_hard_limit(*write_buffer_hard_limit);
  }
  if (connect_timeout) {
    c.set_connect_timeout(*connect_timeout);
  }
  if (allow_half_closure) {
    c.set_allow_half_closure(*allow_half_closure);
  }
  if (auto_read) {
    c.set_auto_read(*auto_read);
  }
}

// ---- LoopSocketChannel --------------------------------------------------------------------

LoopSocketChannel::LoopSocketChannel(Token, EventLoop& loop, int fd, int family)
    : Channel(loop),
      loop_(&loop),
      fd_(fd),
      family_(family),
      recv_(recv_allocator().new_handle()) {
  int sndbuf = 0;
  socklen_t len = sizeof sndbuf;
  if (::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &len) == 0 && sndbuf > 0) {
    // Netty's starting budget: twice SO_SNDBUF, adapted per write afterwards.
    // (Straight into the outbound buffer: nobody else can see the channel yet.)
    mutable_outbound_buffer().set_max_bytes_per_write(static_cast<std::size_t>(sndbuf) * 2);
  }
}

std::shared_ptr<LoopSocketChannel> LoopSocketChannel::open(EventLoop& loop, int family) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    throw std::system_error(last_error(), "socket");
  }
  try {
    return std::make_shared<LoopSocketChannel>(Token{}, loop, fd, family);
  } catch (...) {
    ::close(fd);
    throw;
  }
}

std::shared_ptr<LoopSocketChannel> LoopSocketChannel::adopt(EventLoop& loop, int fd, int family) {
  try {
    return std::make_shared<LoopSocketChannel>(Token{}, loop, fd, family);
  } catch (...) {
    ::close(fd);
    throw;
  }
}

LoopSocketChannel::~LoopSocketChannel() {
  destroy_pipeline();
  if (fd_ >= 0) {
    // Never activated (or the loop is gone): nothing of ours is in the kernel, since every
    // operation holds the channel. Tell the loop to forget the descriptor when we are on it.
    if (in_event_loop()) {
      loop_->close(fd_);
    } else {
      ::close(fd_);  // another thread, or the loop is gone: the loop holds nothing of it
    }
  }
}

void LoopSocketChannel::apply_options(const ChannelOptions& options) {
  if (fd_ >= 0) {
    if (auto ec = options.apply_to_socket(fd_, family_)) {
      log(LogLevel::warn, "channel {}: a socket option was refused: {}", id(), ec.message());
    }
  }
  options.apply_to_config(*this);
}

ChannelFuture LoopSocketChannel::connect(const SocketAddress& remote) {
  auto p = new_promise();
  connect(remote, p);
  return p.future();
}

void LoopSocketChannel::connect(const SocketAddress& remote, ChannelPromise promise) {
  auto run = [this, remote, promise]() mutable {
    if (fd_ < 0) {
      promise.try_failure(transport::Errc::channel_closed);
      return;
    }
    if (active_ || connecting_) {
      promise.try_failure(std::make_error_code(active_ ? std::errc::already_connected
                                                       : std::errc::connection_already_in_progress));
      return;
    }
    connecting_ = true;
    connect_to_ = remote;
    connect_promise_ = std::move(promise);
    connect_op_ = loop_->connect(fd_, connect_to_,
                                 [s = self()](std::error_code ec) { s->on_connected(ec); });
    auto timeout = config().connect_timeout();
    if (timeout.count() > 0) {
      connect_timer_ = loop_->schedule(timeout, [s = self()] {
        if (s->connecting_) {
          s->connect_timed_out_ = true;
          s->loop_->cancel(s->connect_op_);
        }
      });
    }
  };
  if (!on_loop(std::move(run))) {
    promise.try_failure(transport::Errc::channel_closed);
  }
}

void LoopSocketChannel::on_connected(std::error_code ec) {
  connecting_ = false;
  connect_op_ = {};
  connect_timer_.cancel();
  auto promise = std::move(connect_promise_);
  connect_promise_ = ChannelPromise();
  if (fd_ < 0) {
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

void LoopSocketChannel::start_accepted() { become_active(); }

void LoopSocketChannel::become_active() {
  if (active_ || fd_ < 0) {
    return;
  }
  active_ = true;
  keep_alive_ = self();
  set_addresses(address_of(fd_, false), address_of(fd_, true));
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
  if (reading_ || in_read_handler_ || fd_ < 0 || !active_) {
    return;
  }
  if (!batch_open_) {
    batch_open_ = true;
    recv_.reset(config());
  }
  start_read();
}

void LoopSocketChannel::start_read() {
  ByteBuffer b = recv_.allocate();
  recv_.attempted_bytes_read(b.remaining());
  reading_ = true;
  loop_->read(fd_, std::move(b), [s = self()](std::error_code ec, std::size_t n, ByteBuffer buf) {
    s->on_read(ec, n, std::move(buf));
  });
}

void LoopSocketChannel::end_read_batch() {
  if (!batch_open_) {
    return;
  }
  batch_open_ = false;
  recv_.read_complete();
  notify_read_complete();
}

void LoopSocketChannel::on_read(std::error_code ec, std::size_t n, ByteBuffer buf) {
  reading_ = false;
  if (fd_ < 0) {
    return;  // closed: the abort of the read we had in the kernel
  }
  if (ec == operation_aborted()) {
    // The loop is shutting down under an open channel.
    close_for_transport();
    return;
  }
  in_read_handler_ = true;
  bool more = handle_read_result(ec, n, std::move(buf));
  // A read that filled its buffer probably left more behind. The loop's read would wait for
  // the next bytes, and the batch (and the flush a handler does in channel_read_complete)
  // with it; so the rest of the batch is read here without waiting, until EAGAIN (Netty's
  // read loop).
  // AUTO_READ turned off by a handler during the batch ends it (Netty checks it live too).
  while (more && recv_.continue_reading() && config().is_auto_read()) {
    ByteBuffer b = recv_.allocate();
    recv_.attempted_bytes_read(b.remaining());
    auto dst = b.writable_bytes();
    ssize_t k = ::recv(fd_, dst.data(), dst.size(), MSG_DONTWAIT);
    if (k < 0 && errno == EINTR) {
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      recv_.last_bytes_read(0);
      break;
    }
    std::error_code e = k < 0 ? last_error() : std::error_code();
    if (k > 0) {
      b.position(b.position() + static_cast<std::size_t>(k));
    }
    more = handle_read_result(e, k > 0 ? static_cast<std::size_t>(k) : 0, std::move(b));
  }
  if (!more) {
    return;  // closed or end of stream: already handled
  }
  end_read_batch();
  in_read_handler_ = false;
  if (fd_ < 0 || is_input_shutdown()) {
    return;
  }
  if (should_keep_reading()) {
    do_read_begin();
  }
}

bool LoopSocketChannel::handle_read_result(std::error_code ec, std::size_t n, ByteBuffer buf) {
  if (ec) {
    end_read_batch();
    in_read_handler_ = false;
    if (fd_ >= 0) {
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
  if (fd_ < 0) {
    in_read_handler_ = false;
    return false;
  }
  return true;
}

// ---- Writing ------------------------------------------------------------------------------

void LoopSocketChannel::do_write(OutboundBuffer& out) {
  while (fd_ >= 0 && !writing_) {
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
      loop_->transfer_to(r.fd(), static_cast<std::int64_t>(r.next_offset()),
                         static_cast<std::size_t>(r.remaining()), fd_,
                         [s = self()](std::error_code ec, std::size_t n) {
                           s->on_file_written(ec, n);
                         });
      return;
    }
    writing_ = true;
    set_write_pending(true);
    write_attempted_ = g.bytes;
    // Only one write is in the kernel at a time, and a failed one ends the connection: what this
    // one holds back is known from the moment it is submitted.
    more_held_ = g.file_region_next && is_tcp(family_);
    const WriteFlags flags = more_held_ ? WriteFlags::more : WriteFlags::none;
    auto done = [s = self()](std::error_code ec, std::size_t n, auto&&) { s->on_written(ec, n); };
    if (g.single()) {
      const iovec& v = g.iovecs[0];
      loop_->write(fd_,
                   ByteBuffer::wrap(std::span<const std::byte>(
                       static_cast<const std::byte*>(v.iov_base), v.iov_len)),
                   flags, std::move(done));
    } else {
      write_views_.clear();
      for (const iovec& v : g.iovecs) {
        write_views_.push_back(ByteBuffer::wrap(
            std::span<const std::byte>(static_cast<const std::byte*>(v.iov_base), v.iov_len)));
      }
      loop_->write(fd_, std::span<const ByteBuffer>(write_views_), flags, std::move(done));
      write_views_.clear();
    }
    return;
  }
}

void LoopSocketChannel::on_written(std::error_code ec, std::size_t n) {
  writing_ = false;
  OutboundBuffer& out = mutable_outbound_buffer();
  if (fd_ < 0) {
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
  if (fd_ < 0) {
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
void LoopSocketChannel::push_held() noexcept {
  if (!more_held_) {
    return;
  }
  more_held_ = false;
  int off = 0;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_CORK, &off, sizeof off);
}

// ---- Closing ------------------------------------------------------------------------------

void LoopSocketChannel::do_close() noexcept {
  if (fd_ < 0) {
    return;
  }
  if (abort_on_close_) {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  }
  connect_timer_.cancel();
  int fd = fd_;
  fd_ = -1;
  loop_->close(fd);
  if (connecting_) {
    connect_promise_.try_failure(transport::Errc::channel_closed);
  }
  if (keep_alive_) {
    // Let go later: we are inside a call on this very object.
    loop_->execute([s = std::move(keep_alive_)] {});
    keep_alive_.reset();
  }
}

void LoopSocketChannel::do_close_without_loop() noexcept {
  if (closed_without_loop_.exchange(true)) {
    return;
  }
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  auto last = std::move(keep_alive_);  // may be the last reference: released on return
}

std::error_code LoopSocketChannel::do_shutdown_output() noexcept {
  if (fd_ < 0) {
    return transport::Errc::channel_closed;
  }
  if (::shutdown(fd_, SHUT_WR) != 0) {
    return last_error();
  }
  return {};
}

// ---- LoopServerSocketChannel --------------------------------------------------------------

LoopServerSocketChannel::LoopServerSocketChannel(Token, EventLoop& loop, ChildLoopChooser chooser)
    : Channel(loop), loop_(&loop), chooser_(std::move(chooser)) {}

std::shared_ptr<LoopServerSocketChannel> LoopServerSocketChannel::create(EventLoop& loop,
                                                                         ChildLoopChooser chooser) {
  return std::make_shared<LoopServerSocketChannel>(Token{}, loop, std::move(chooser));
}

LoopServerSocketChannel::~LoopServerSocketChannel() {
  destroy_pipeline();
  if (fd_ >= 0) {
    if (in_event_loop()) {
      loop_->close(fd_);
    } else {
      ::close(fd_);  // another thread, or the loop is gone: the loop holds nothing of it
    }
  }
}

void LoopServerSocketChannel::bind(const SocketAddress& local, const ChannelOptions& options,
                                   ChannelPromise promise) {
  auto run = [this, local, options, promise]() mutable {
    if (closed_ || fd_ >= 0) {
      promise.try_failure(closed_ ? std::error_code(transport::Errc::channel_closed)
                                  : std::make_error_code(std::errc::invalid_argument));
      return;
    }
    int family = local.family();
    int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      promise.try_failure(last_error());
      return;
    }
    ChannelOptions o;
    o.so_reuseaddr = true;
    o.merge(options);
    std::error_code ec = o.apply_to_socket(fd, family);
    sockaddr_storage ss{};
    socklen_t len = local.to_native(ss);
    if (!ec && ::bind(fd, reinterpret_cast<const sockaddr*>(&ss), len) != 0) {
      ec = last_error();
    }
    if (!ec && ::listen(fd, o.so_backlog.value_or(SOMAXCONN)) != 0) {
      ec = last_error();
    }
    if (ec) {
      ::close(fd);
      promise.try_failure(ec);
      return;
    }
    fd_ = fd;
    family_ = family;
    set_addresses(address_of(fd, false), std::nullopt);
    bound_ = true;
    keep_alive_ = std::static_pointer_cast<LoopServerSocketChannel>(shared_from_this());
    o.apply_to_config(*this);
    notify_active();  // reads (accepts) when AUTO_READ
    promise.try_success();
  };
  if (!on_loop(std::move(run))) {
    promise.try_failure(transport::Errc::channel_closed);
  }
}

void LoopServerSocketChannel::do_read_begin() {
  if (fd_ < 0) {
    return;
  }
  if (accepting_) {
    resume_after_pause_ = pausing_;  // read() while the multishot accept is being stopped
    return;
  }
  accepting_ = true;
  auto s = std::static_pointer_cast<LoopServerSocketChannel>(shared_from_this());
  if (config().is_auto_read()) {
    multishot_ = true;
    accept_op_ = loop_->accept_multishot(
        fd_, [s](std::error_code ec, int fd) { s->on_accepted(ec, fd); });
  } else {
    // AUTO_READ off: one connection per read(), the rest waits in the kernel's backlog.
    multishot_ = false;
    accept_op_ = loop_->accept(fd_, [s](std::error_code ec, int fd) { s->on_accepted(ec, fd); });
  }
}

void LoopServerSocketChannel::on_accepted(std::error_code ec, int fd) {
  if (fd >= 0) {
    if (!multishot_) {
      accepting_ = false;
      accept_op_ = {};
    }
    if (fd_ < 0) {
      ::close(fd);
      return;
    }
    EventLoop& child_loop = chooser_ ? chooser_() : *loop_;
    std::shared_ptr<LoopSocketChannel> child;
    try {
      child = LoopSocketChannel::adopt(child_loop, fd, family_);
    } catch (...) {
      pipeline().fire_exception_caught(std::current_exception());
      return;
    }
    pipeline().fire_channel_read(Message(std::move(child)));
    pipeline().fire_channel_read_complete();
    if (fd_ < 0) {
      return;
    }
    if (multishot_ && !pausing_ && !config().is_auto_read()) {
      // A handler turned AUTO_READ off: stop accepting (connections keep queueing in the
      // kernel's backlog) until read() or AUTO_READ on.
      pausing_ = true;
      loop_->cancel(accept_op_);
    } else if (!multishot_ && config().is_auto_read()) {
      do_read_begin();
    }
    return;
  }
  accepting_ = false;
  accept_op_ = {};
  bool paused = pausing_;
  pausing_ = false;
  if (fd_ < 0) {
    return;
  }
  if (ec == operation_aborted() && paused) {
    if (config().is_auto_read() || resume_after_pause_) {
      resume_after_pause_ = false;
      do_read_begin();
    }
    return;
  }
  resume_after_pause_ = false;
  if (ec == operation_aborted()) {
    close_for_transport();
    return;
  }
  // EMFILE and friends: tell the pipeline, then try again a little later rather than spin.
  pipeline().fire_exception_caught(std::make_exception_ptr(std::system_error(ec, "accept")));
  auto s = std::static_pointer_cast<LoopServerSocketChannel>(shared_from_this());
  bool requested = !multishot_;  // a failed single accept was asked for by read()
  loop_->schedule(std::chrono::milliseconds(100), [s, requested] {
    if (s->fd_ >= 0 && (requested || s->config().is_auto_read())) {
      s->do_read_begin();
    }
  });
}

void LoopServerSocketChannel::do_write(OutboundBuffer& out) {
  while (out.current() != nullptr) {
    out.remove(transport::Errc::unsupported_message);
  }
}

void LoopServerSocketChannel::do_close() noexcept {
  closed_ = true;
  if (fd_ < 0) {
    return;
  }
  int fd = fd_;
  fd_ = -1;
  bound_ = false;
  loop_->close(fd);
  if (keep_alive_) {
    loop_->execute([s = std::move(keep_alive_)] {});
    keep_alive_.reset();
  }
}

void LoopServerSocketChannel::do_close_without_loop() noexcept {
  if (closed_without_loop_.exchange(true)) {
    return;
  }
  closed_ = true;
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  auto last = std::move(keep_alive_);
}

void LoopServerSocketChannel::on_unhandled_inbound_message(Message msg) {
  if (auto* child = msg.get_if<std::shared_ptr<LoopSocketChannel>>()) {
    (*child)->close();
    return;
  }
  Channel::on_unhandled_inbound_message(std::move(msg));
}

}  // namespace niox
