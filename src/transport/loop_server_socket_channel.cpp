#include <niox/transport/loop_socket_channel.hpp>
#include <niox/transport/transport_error.hpp>

#include "channels/socket.hpp"

#include <sys/socket.h>

namespace niox {

using detail::Socket;

LoopServerSocketChannel::LoopServerSocketChannel(Token, EventLoop& loop, ChildLoopChooser chooser)
    : AbstractLoopSocketChannel(loop, FileDescriptor(), 0), chooser_(std::move(chooser)) {}

std::shared_ptr<LoopServerSocketChannel> LoopServerSocketChannel::create(EventLoop& loop,
                                                                         ChildLoopChooser chooser) {
  return std::make_shared<LoopServerSocketChannel>(Token{}, loop, std::move(chooser));
}

LoopServerSocketChannel::~LoopServerSocketChannel() {
  destroy_pipeline();
  close_descriptor_at_destruction();
}

void LoopServerSocketChannel::bind(const SocketAddress& local, const ChannelOptions& options,
                                   ChannelPromise promise) {
  auto run = [this, local, options, promise]() mutable {
    if (closed_ || fd_.valid()) {
      promise.try_failure(closed_ ? std::error_code(transport::Errc::channel_closed)
                                  : std::make_error_code(std::errc::invalid_argument));
      return;
    }
    const int family = local.family();
    ChannelOptions o;
    o.set(channel_option::so_reuseaddr, true);
    o.merge(options);
    std::error_code ec;
    FileDescriptor fd = Socket::open(family, SOCK_STREAM, true, ec);
    if (ec) {
      promise.try_failure(ec);
      return;
    }
    Socket socket(fd.get());
    ec = o.apply_to_socket(socket.fd(), family);
    if (!ec) {
      ec = socket.bind(local);
    }
    if (!ec) {
      ec = socket.listen(o.so_backlog.value_or(SOMAXCONN));
    }
    if (ec) {
      fd.reset();  // no loop has seen it; closed before anyone learns of the failure
      promise.try_failure(ec);
      return;
    }
    fd_ = std::move(fd);
    family_ = family;
    hold_self_until_closed();
    o.apply_to_config(*this);
    notify_active();  // reads (accepts) when AUTO_READ
    promise.try_success();
  };
  if (!on_loop(std::move(run))) {
    promise.try_failure(transport::Errc::channel_closed);
  }
}

void LoopServerSocketChannel::do_read_begin() {
  if (!fd_.valid()) {
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
    accept_op_ = event_loop().accept_multishot(
        fd_.get(),
        [s](std::error_code ec, FileDescriptor fd) { s->on_accepted(ec, std::move(fd)); });
  } else {
    // AUTO_READ off: one connection per read(), the rest waits in the kernel's backlog.
    multishot_ = false;
    accept_op_ = event_loop().accept(fd_.get(), [s](std::error_code ec, FileDescriptor fd) {
      s->on_accepted(ec, std::move(fd));
    });
  }
}

// `fd` is closed on return unless a child channel took it; no loop has used it yet.
void LoopServerSocketChannel::on_accepted(std::error_code ec, FileDescriptor fd) {
  if (fd) {
    if (!multishot_) {
      accepting_ = false;
      accept_op_ = {};
    }
    if (!fd_.valid()) {
      return;
    }
    EventLoop& child_loop = chooser_ ? chooser_() : event_loop();
    std::shared_ptr<LoopSocketChannel> child;
    try {
      child = LoopSocketChannel::adopt(child_loop, std::move(fd), family_);
      child->accepted_ = true;
    } catch (...) {
      pipeline().fire_exception_caught(std::current_exception());
      return;
    }
    pipeline().fire_channel_read(Message(std::move(child)));
    pipeline().fire_channel_read_complete();
    if (!fd_.valid()) {
      return;
    }
    if (multishot_ && !pausing_ && !config().is_auto_read()) {
      // A handler turned AUTO_READ off: stop accepting (connections keep queueing in the
      // kernel's backlog) until read() or AUTO_READ on.
      pausing_ = true;
      event_loop().cancel(accept_op_);
    } else if (!multishot_ && config().is_auto_read()) {
      do_read_begin();
    }
    return;
  }
  accepting_ = false;
  accept_op_ = {};
  bool paused = pausing_;
  pausing_ = false;
  if (!fd_.valid()) {
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
  event_loop().schedule(std::chrono::milliseconds(100), [s, requested] {
    if (s->fd_.valid() && (requested || s->config().is_auto_read())) {
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
  if (fd_.valid()) {
    close_through_loop();
  }
}

void LoopServerSocketChannel::on_unhandled_inbound_message(Message&& msg) {
  if (auto* child = msg.get_if<std::shared_ptr<LoopSocketChannel>>()) {
    (*child)->close();
    return;
  }
  Channel::on_unhandled_inbound_message(std::move(msg));
}

}  // namespace niox
