// AsynchronousFileChannel: Java NIO.2's asynchronous file channel, whose positional reads and
// writes you co_await.
//
//   auto f = AsynchronousFileChannel::open(loop, "data.bin", OpenOption::read);
//   ByteBuffer block = ByteBuffer::allocate(1 << 20);
//   std::int64_t n = co_await f.read(block, 0);     // -1 when 0 is at or past the end
//
// Every operation names its file position (preadv/pwritev: no shared file position, so reads
// and writes at different positions may be outstanding together, in any number). On io_uring
// they are asynchronous in the kernel; on epoll, whose readiness says nothing about regular
// files, each runs as one call on the loop thread. The rules of AsynchronousSocketChannel hold:
// the coroutine continues on the channel's loop, errors throw std::system_error or set a given
// std::error_code&, a stop request cancels, buffers are held by the operation until the kernel
// lets go of them and the caller's positions advance by exactly the bytes moved.
#pragma once

#include <niox/async/detail/loop_descriptor.hpp>
#include <niox/async/asynchronous_socket_channel.hpp>
#include <niox/async/detail/loop_operation.hpp>
#include <niox/base/file_descriptor.hpp>
#include <niox/buffer/byte_buffer.hpp>
#include <niox/buffer/gather.hpp>
#include <niox/channels/file_channel.hpp>
#include <niox/loop/event_loop.hpp>

#include <cstdint>
#include <filesystem>
#include <span>
#include <system_error>
#include <utility>

namespace niox {

class AsynchronousFileChannel {
 private:
  template <bool To>
  auto transfer(std::uint64_t position, std::uint64_t count, int socket, std::error_code* ec) {
    return detail::loop_operation<TransferResult>(
        fd_.loop(), To ? "transfer_to" : "transfer_from", ec,
        [file = fd_.get(), socket, position, count](
            EventLoop& loop, const std::shared_ptr<detail::LoopOpState>& st) {
          auto done = [st](std::error_code e, std::size_t n, TransferPath path) {
            st->path = path;
            st->complete(e, n);
          };
          auto off = static_cast<std::int64_t>(position);
          auto len = static_cast<std::size_t>(count);
          return To ? loop.transfer_to(file, off, len, socket, std::move(done))
                    : loop.transfer_from(socket, file, off, len, std::move(done));
        },
        [](detail::LoopOpState& s) {
          return TransferResult{s.n, s.path, s.ec == LoopError::end_of_file};
        });
  }

  // Defined first: the public members below return their awaitables.
  template <bool Read>
  auto at(std::span<ByteBuffer> bufs, std::uint64_t position, std::error_code* ec) {
    return detail::loop_operation<std::int64_t>(
        fd_.loop(), Read ? "read" : "write", ec,
        [fd = fd_.get(), bufs, position](EventLoop& loop,
                                         const std::shared_ptr<detail::LoopOpState>& st) {
          auto done = [st](std::error_code e, std::size_t n, std::span<ByteBuffer>) {
            st->complete(e, n);
          };
          std::span<const ByteBuffer> view(bufs.data(), bufs.size());
          auto off = static_cast<std::int64_t>(position);
          return Read ? loop.read_at(fd, off, view, std::move(done))
                      : loop.write_at(fd, off, view, std::move(done));
        },
        [bufs](detail::LoopOpState& s) -> std::int64_t {
          advance(bufs, s.n);
          // A read of nothing with room left is the end of the file.
          if (Read && s.n == 0 && !s.ec && total_remaining(bufs) > 0) return -1;
          return static_cast<std::int64_t>(s.n);
        });
  }

 public:
  // Opens `path` as FileChannel::open does (same options, errors and mode) for use on `loop`.
  static AsynchronousFileChannel open(EventLoop& loop, const std::filesystem::path& path,
                                      OpenOption options, mode_t mode = 0644);
  // Takes ownership of an open file (one this program made with flags FileChannel::open does
  // not offer, say O_TMPFILE), for use on `loop`; the channel closes it. Positional operations
  // ignore and leave alone the file offset it shares with any duplicate of the descriptor.
  static AsynchronousFileChannel adopt(EventLoop& loop, FileDescriptor fd) noexcept {
    return AsynchronousFileChannel(loop, std::move(fd));
  }

  AsynchronousFileChannel(AsynchronousFileChannel&&) noexcept = default;
  AsynchronousFileChannel& operator=(AsynchronousFileChannel&&) noexcept = default;

  EventLoop& loop() const noexcept { return fd_.loop(); }
  bool is_open() const noexcept { return fd_.valid(); }
  int native_handle() const noexcept { return fd_.get(); }
  // The file's current size (fstat). Throws std::system_error.
  std::uint64_t size() const;

  // co_await read(dst, position): bytes read into dst's [position, limit) from the file at
  // `position` (fewer near the end), 0 if dst has no room, -1 at or past the end of the file.
  auto read(ByteBuffer& dst, std::uint64_t position) {
    return at<true>({&dst, 1}, position, nullptr);
  }
  auto read(ByteBuffer& dst, std::uint64_t position, std::error_code& ec) {
    return at<true>({&dst, 1}, position, &ec);
  }
  // Scattering: fills the buffers in order from `position`.
  auto read(std::span<ByteBuffer> dsts, std::uint64_t position) {
    return at<true>(dsts, position, nullptr);
  }
  auto read(std::span<ByteBuffer> dsts, std::uint64_t position, std::error_code& ec) {
    return at<true>(dsts, position, &ec);
  }
  // co_await write(src, position): writes every remaining byte at `position` (the file grows as
  // needed) and returns their count; with ec, the bytes written before an error.
  auto write(ByteBuffer& src, std::uint64_t position) {
    return at<false>({&src, 1}, position, nullptr);
  }
  auto write(ByteBuffer& src, std::uint64_t position, std::error_code& ec) {
    return at<false>({&src, 1}, position, &ec);
  }
  // Gathering: the buffers' remaining bytes in order, from `position`.
  auto write(std::span<ByteBuffer> srcs, std::uint64_t position) {
    return at<false>(srcs, position, nullptr);
  }
  auto write(std::span<ByteBuffer> srcs, std::uint64_t position, std::error_code& ec) {
    return at<false>(srcs, position, &ec);
  }

  // ---- Transfers on the loop's transfer engine (zero-copy) --------------------------------
  // co_await transfer_to(position, count, target): `count` bytes of this file from `position`
  // into the socket (sendfile when it is writable), like FileChannel::transfer_to. The result
  // says how many bytes moved, by which kernel path, and end_of_input when the file ended
  // first. The socket must belong to this channel's loop.
  auto transfer_to(std::uint64_t position, std::uint64_t count, AsynchronousSocketChannel& target) {
    return transfer<true>(position, count, target.native_handle(), nullptr);
  }
  auto transfer_to(std::uint64_t position, std::uint64_t count, AsynchronousSocketChannel& target,
                   std::error_code& ec) {
    return transfer<true>(position, count, target.native_handle(), &ec);
  }
  // co_await transfer_from(source, position, count): `count` bytes from the socket into this
  // file at `position` (socket -> the loop's pipe pair -> file with splice); end_of_input when
  // the stream ended first.
  auto transfer_from(AsynchronousSocketChannel& source, std::uint64_t position,
                     std::uint64_t count) {
    return transfer<false>(position, count, source.native_handle(), nullptr);
  }
  auto transfer_from(AsynchronousSocketChannel& source, std::uint64_t position, std::uint64_t count,
                     std::error_code& ec) {
    return transfer<false>(position, count, source.native_handle(), &ec);
  }

  // Aborts what is outstanding and closes the file through the loop. Loop thread only.
  void close() { fd_.close(); }

 private:
  AsynchronousFileChannel(EventLoop& loop, FileDescriptor fd) noexcept : fd_(loop, std::move(fd)) {}

  detail::LoopDescriptor fd_;
};

}  // namespace niox
