// AsynchronousSocketChannel and AsynchronousServerSocketChannel: Java NIO.2's asynchronous
// stream sockets (TCP over IPv4/IPv6, or Unix-domain), whose operations you co_await.
//
//   Task<void> echo(AsynchronousSocketChannel ch) {
//     ByteBuffer buf = ByteBuffer::allocate(4096);
//     while (co_await ch.read(buf) >= 0) {   // -1: end of stream
//       buf.flip();
//       co_await ch.write(buf);              // every remaining byte
//       buf.clear();
//     }
//   }
//   auto server = AsynchronousServerSocketChannel::open(loop);
//   server.bind(InetSocketAddress::loopback_v4(0));
//   for (;;) group.spawn(echo(co_await server.accept()));
//
// A channel belongs to one EventLoop: its operations run there, and the coroutine continues on
// that loop's thread after each co_await (awaited from another thread, it moves there). At
// most one read and one write may be outstanding at a time, as in Java (more are queued in
// order by the loop). Errors: every operation throws std::system_error, or, given a
// std::error_code&, sets it and returns what was moved before the error. A stop request on the
// awaiting task's std::stop_token (niox/async/task.hpp) cancels the kernel operation from any
// thread; it then ends with operation_aborted. Destroying a suspended coroutine cancels what it
// waits on. receive() is the one exception: its kernel receive belongs to the channel and stays
// armed between calls, so a cancelled receive() only stops waiting, and what arrives goes to
// the next one.
//
// Buffers: the operation holds a copy of each ByteBuffer (sharing its memory) until the kernel
// has let go of it, also after a cancel or the coroutine's destruction; the caller's buffers'
// positions advance by exactly the bytes moved, when the co_await returns. Memory from
// ByteBuffer::wrap() is the caller's to keep alive until the operation has ended. receive()
// brings no buffer: the loop takes one when bytes arrive, so a connection waiting in it holds
// none (the form for servers with many idle connections).
//
// Descriptors: a channel owns its socket (a FileDescriptor) and closes it through its loop:
// close() on the loop thread, or the destructor from any thread (it hands the close to the
// loop, or closes directly once the loop is gone).
#pragma once

#include <niox/async/detail/loop_descriptor.hpp>
#include <niox/async/detail/loop_operation.hpp>
#include <niox/async/detail/receive_stream.hpp>
#include <niox/async/task.hpp>
#include <niox/base/file_descriptor.hpp>
#include <niox/buffer/byte_buffer.hpp>
#include <niox/buffer/gather.hpp>
#include <niox/channels/socket_address.hpp>
#include <niox/channels/socket_options.hpp>
#include <niox/loop/event_loop.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <system_error>
#include <type_traits>

namespace niox {

class AsynchronousServerSocketChannel;

class AsynchronousSocketChannel : public SocketOptionsMixin<AsynchronousSocketChannel> {
 private:
  // The operations, defined first: the public members below return their awaitables.
  auto connect_op(const SocketAddress& remote, std::error_code* ec) {
    return detail::loop_operation<void>(
        fd_.loop(), "connect", ec,
        [fd = fd_.get(), remote](EventLoop& loop, const std::shared_ptr<detail::LoopOpState>& st) {
          return loop.connect(fd, remote, [st](std::error_code e) { st->complete(e, 0); });
        },
        [](detail::LoopOpState&) {});
  }
  // Reads of one buffer or a span. One buffer goes to the loop's single-buffer operation,
  // which holds it inline; a span is copied into the operation's buffer vector. The caller's
  // buffers advance by what moved, and a read of nothing into buffers that still have room is
  // the end of the stream. Once receive() has armed the channel's receive stream, reads take
  // from it too (copying into the buffers), so that the two keep the bytes' order.
  struct ReadStart {
    std::span<ByteBuffer> bufs;
    std::shared_ptr<detail::ReceiveStream> rx;  // receive() was used: read through it
    int fd;
    bool finished_now = false;
    ByteBuffer got{};  // from the stream, copied into bufs by finish

    bool now(EventLoop&) {
      if (!rx) return false;
      got = rx->take(total_remaining(bufs));
      finished_now = got.has_remaining();
      return finished_now;
    }
    OperationHandle operator()(EventLoop& loop,
                               const std::shared_ptr<detail::LoopOpState>& st) const {
      if (rx) return detail::ReceiveStream::wait(rx, fd, total_remaining(bufs), st);
      auto on_done = [st](std::error_code e, std::size_t n, auto&&) { st->complete(e, n); };
      if (bufs.size() == 1) return loop.read(fd, bufs[0], std::move(on_done));
      return loop.read(fd, std::span<const ByteBuffer>(bufs.data(), bufs.size()),
                       std::move(on_done));
    }
    std::int64_t result_now() { return static_cast<std::int64_t>(copy_into(got, bufs)); }
    std::int64_t finish(const detail::LoopOpState& s) {
      std::size_t n = s.n;
      if (rx) {
        n = copy_into(got, bufs);  // what came from the stream
      } else {
        advance(bufs, n);
      }
      if (n == 0 && !s.ec && total_remaining(bufs) > 0) return -1;
      return static_cast<std::int64_t>(n);
    }
  };
  auto read_op(std::span<ByteBuffer> bufs, std::error_code* ec) {
    return detail::loop_operation<std::int64_t>(
        fd_.loop(), "read", ec, ReadStart{bufs, rx_, fd_.get()},
        [](detail::LoopOpState& s, ReadStart& r) { return r.finish(s); });
  }
  // Writes: what the socket takes at once is written by EventLoop::write_now() (one send)
  // without suspending; the loop writes the rest.
  struct WriteStart {
    std::span<ByteBuffer> bufs;
    int fd;
    bool finished_now = false;
    std::size_t done = 0;  // by write_now

    bool now(EventLoop& loop) {
      done = loop.write_now(fd, bufs);
      finished_now = total_remaining(bufs) == 0;
      return finished_now;
    }
    std::size_t result_now() const { return done; }
    OperationHandle operator()(EventLoop& loop,
                               const std::shared_ptr<detail::LoopOpState>& st) const {
      auto on_done = [st](std::error_code e, std::size_t n, auto&&) { st->complete(e, n); };
      if (bufs.size() == 1) return loop.write(fd, bufs[0], std::move(on_done));
      return loop.write(fd, std::span<const ByteBuffer>(bufs.data(), bufs.size()),
                        std::move(on_done));
    }
  };
  auto write_op(std::span<ByteBuffer> bufs, std::error_code* ec) {
    return detail::loop_operation<std::size_t>(fd_.loop(), "write", ec, WriteStart{bufs, fd_.get()},
                                               [](detail::LoopOpState& s, WriteStart& w) {
                                                 advance(w.bufs, s.n);
                                                 return w.done + s.n;
                                               });
  }
  auto receive_op(std::size_t max_bytes, std::error_code* ec) {
    return detail::loop_operation<ByteBuffer>(
        fd_.loop(), "receive", ec, detail::ReceiveStart{receive_stream(), max_bytes, fd_.get()},
        [](detail::LoopOpState&, detail::ReceiveStart& r) { return std::move(r.got); });
  }
  const std::shared_ptr<detail::ReceiveStream>& receive_stream();

 public:
  // An unconnected non-blocking socket of `family` on `loop`. Throws std::system_error.
  static AsynchronousSocketChannel open(EventLoop& loop,
                                        ProtocolFamily family = ProtocolFamily::inet);
  // Adopts a connected or unconnected stream socket (made non-blocking).
  static AsynchronousSocketChannel adopt(EventLoop& loop, FileDescriptor fd);

  AsynchronousSocketChannel(AsynchronousSocketChannel&& other) noexcept = default;
  AsynchronousSocketChannel& operator=(AsynchronousSocketChannel&& other) noexcept = default;

  EventLoop& loop() const noexcept { return fd_.loop(); }
  bool is_open() const noexcept { return fd_.valid(); }
  int native_handle() const noexcept { return fd_.get(); }

  AsynchronousSocketChannel& bind(const SocketAddress& local);

  // co_await connect(remote): connected, or throws (sets ec). The socket must match remote's
  // family (open it with that family).
  auto connect(const SocketAddress& remote) { return connect_op(remote, nullptr); }
  auto connect(const SocketAddress& remote, std::error_code& ec) { return connect_op(remote, &ec); }

  // co_await read(dst): the bytes read into dst's [position, limit) (as soon as some arrived;
  // fewer than remaining is normal), 0 if dst has no room, -1 at end of stream.
  auto read(ByteBuffer& dst) { return read_op({&dst, 1}, nullptr); }
  auto read(ByteBuffer& dst, std::error_code& ec) { return read_op({&dst, 1}, &ec); }
  // co_await receive(max_bytes): up to max_bytes (> 0) that arrived, in a buffer the loop took
  // when they did (its buffer ring or pool), ready to read (position 0, limit the count); an
  // empty buffer at end of stream. Nothing is held while the socket waits: the form for
  // connections that are mostly idle. The caller owns the returned buffer; its memory goes back
  // to the loop's ring or pool when the last view of it is released. The first receive arms a
  // receive that stays armed: bytes that arrive while none waits are kept, in order, for the
  // next ones (which then return without suspending), until 64 KiB or max_bytes, if larger,
  // wait; then the kernel stops reading until they are received. read() on the same channel
  // takes from there too, in order.
  auto receive(std::size_t max_bytes) { return receive_op(max_bytes, nullptr); }
  auto receive(std::size_t max_bytes, std::error_code& ec) { return receive_op(max_bytes, &ec); }
  // Scattering: fills the buffers in order (one readv).
  auto read(std::span<ByteBuffer> dsts) { return read_op(dsts, nullptr); }
  auto read(std::span<ByteBuffer> dsts, std::error_code& ec) { return read_op(dsts, &ec); }

  // co_await write(src): writes every remaining byte (the loop resubmits short writes) and
  // returns their count; with ec, the bytes written before an error.
  auto write(ByteBuffer& src) { return write_op({&src, 1}, nullptr); }
  auto write(ByteBuffer& src, std::error_code& ec) { return write_op({&src, 1}, &ec); }
  // Gathering: every remaining byte of the buffers, in order (writev).
  auto write(std::span<ByteBuffer> srcs) { return write_op(srcs, nullptr); }
  auto write(std::span<ByteBuffer> srcs, std::error_code& ec) { return write_op(srcs, &ec); }
  // The same operation under the name Asio users look for: write() never returns short.
  auto write_all(std::span<ByteBuffer> srcs) { return write_op(srcs, nullptr); }
  auto write_all(std::span<ByteBuffer> srcs, std::error_code& ec) { return write_op(srcs, &ec); }

  // Half-close: reads then return -1 / the peer sees end of stream. Throws std::system_error.
  AsynchronousSocketChannel& shutdown_input();
  AsynchronousSocketChannel& shutdown_output();

  std::optional<SocketAddress> local_address() const;
  std::optional<SocketAddress> remote_address() const;

  // Aborts what is outstanding (those co_awaits end with operation_aborted) and closes the
  // socket through the loop. Loop thread only; a closed channel ignores it.
  void close() {
    rx_.reset();
    fd_.close();
  }

 private:
  friend class AsynchronousServerSocketChannel;
  AsynchronousSocketChannel(EventLoop& loop, FileDescriptor fd) noexcept
      : fd_(loop, std::move(fd)) {}

  detail::LoopDescriptor fd_;
  std::shared_ptr<detail::ReceiveStream> rx_;  // receive()'s, made by the first one
};

class AsynchronousServerSocketChannel : public SocketOptionsMixin<AsynchronousServerSocketChannel> {
 private:
  auto accept_op(EventLoop& to, std::error_code* ec) {
    return detail::loop_operation<AsynchronousSocketChannel>(
        fd_.loop(), "accept", ec,
        [fd = fd_.get()](EventLoop& loop, const std::shared_ptr<detail::LoopOpState>& st) {
          return loop.accept(fd, [st](std::error_code e, FileDescriptor conn) {
            st->fd = std::move(conn);  // closed with the state when nobody takes it
            st->complete(e, 0);
          });
        },
        [to = &to](detail::LoopOpState& s) {
          return AsynchronousSocketChannel(*to, std::move(s.fd));
        });
  }

 public:
  // A listening socket of `family` on `loop` once bound; SO_REUSEADDR is set, as every server
  // wants it. Throws std::system_error.
  static AsynchronousServerSocketChannel open(EventLoop& loop,
                                              ProtocolFamily family = ProtocolFamily::inet);

  AsynchronousServerSocketChannel(AsynchronousServerSocketChannel&&) noexcept = default;
  AsynchronousServerSocketChannel& operator=(AsynchronousServerSocketChannel&&) noexcept = default;

  EventLoop& loop() const noexcept { return fd_.loop(); }
  bool is_open() const noexcept { return fd_.valid(); }
  int native_handle() const noexcept { return fd_.get(); }

  // Binds and listens; backlog <= 0 means SOMAXCONN. Port 0 picks a free port.
  AsynchronousServerSocketChannel& bind(const SocketAddress& local, int backlog = 0);
  std::optional<SocketAddress> local_address() const;

  // co_await accept(): the next connection, on this channel's loop. EMFILE and the like throw
  // (set ec) and leave this channel listening.
  auto accept() { return accept_op(fd_.loop(), nullptr); }
  auto accept(std::error_code& ec) { return accept_op(fd_.loop(), &ec); }
  // The same, the connection belonging to `to` (another loop of a group, say): its operations
  // run there. The accept itself runs on this channel's loop.
  auto accept(EventLoop& to) { return accept_op(to, nullptr); }
  auto accept(EventLoop& to, std::error_code& ec) { return accept_op(to, &ec); }

  // Aborts a pending accept (it ends with operation_aborted) and closes the socket through the
  // loop. Loop thread only.
  void close() { fd_.close(); }

 private:
  AsynchronousServerSocketChannel(EventLoop& loop, FileDescriptor fd) noexcept
      : fd_(loop, std::move(fd)) {}

  detail::LoopDescriptor fd_;
};

}  // namespace niox
