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
#include <niox/async/detail/loop_operation.hpp>
#include <niox/buffer/byte_buffer.hpp>
#include <niox/buffer/gather.hpp>
#include <niox/channels/file_channel.hpp>
#include <niox/loop/event_loop.hpp>

#include <cstdint>
#include <filesystem>
#include <span>
#include <system_error>

namespace niox {

class AsynchronousFileChannel {
 private:
  // Defined first: the public members below return their awaitables.
  template <bool Read>
  auto at(std::span<ByteBuffer> bufs, std::uint64_t position, std::error_code* ec) {
    std::size_t room = 0;
    for (const ByteBuffer& b : bufs) room += b.remaining();
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
        [bufs, room](detail::LoopOpState& s) -> std::int64_t {
          advance(bufs, s.n);
          // A read of nothing with room left is the end of the file.
          return (Read && s.n == 0 && !s.ec && room > 0) ? -1 : static_cast<std::int64_t>(s.n);
        });
  }

 public:
  // Opens `path` as FileChannel::open does (same options, errors and mode) for use on `loop`.
  static AsynchronousFileChannel open(EventLoop& loop, const std::filesystem::path& path,
                                      OpenOption options, mode_t mode = 0644);

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

  // Aborts what is outstanding and closes the file through the loop. Loop thread only.
  void close() { fd_.close(); }

 private:
  AsynchronousFileChannel(EventLoop& loop, FileDescriptor fd) noexcept : fd_(loop, std::move(fd)) {}

  detail::LoopDescriptor fd_;
};

}  // namespace niox
