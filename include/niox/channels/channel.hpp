// The java.nio.channels interfaces: Channel, ReadableByteChannel, WritableByteChannel,
// ByteChannel, ScatteringByteChannel, GatheringByteChannel, SeekableByteChannel.
//
// Conventions every channel follows:
//   - read/write move bytes between the channel and a buffer's [position, limit) and advance the
//     buffer's position by exactly the bytes moved (for several buffers: in order, the last one
//     possibly mid-way). The buffers are only used during the call; nothing keeps them.
//   - read returns the bytes read, -1 at end of stream, 0 when a non-blocking channel has nothing
//     now (or no buffer has room). write returns the bytes written, 0 when a non-blocking channel
//     cannot take any now.
//   - I/O errors throw std::system_error carrying the errno; the overloads taking an
//     std::error_code& report them there instead and return 0. Contract violations (a read-only
//     buffer to read into, an offset/length outside the array) throw the Java exception types in
//     both forms, like Java's unchecked exceptions.
//   - A closed channel fails every operation with EBADF.
#pragma once

#include <niox/buffer/byte_buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <system_error>

namespace niox {

// Java's unchecked channel exceptions (programming errors, not I/O failures).
class IllegalBlockingModeException : public std::logic_error {
 public:
  IllegalBlockingModeException()
      : std::logic_error("java.nio.channels.IllegalBlockingModeException") {}
};
class NoConnectionPendingException : public std::logic_error {
 public:
  NoConnectionPendingException()
      : std::logic_error("java.nio.channels.NoConnectionPendingException") {}
};
class ConnectionPendingException : public std::logic_error {
 public:
  ConnectionPendingException() : std::logic_error("java.nio.channels.ConnectionPendingException") {}
};
class AlreadyConnectedException : public std::logic_error {
 public:
  AlreadyConnectedException() : std::logic_error("java.nio.channels.AlreadyConnectedException") {}
};
class NonReadableChannelException : public std::logic_error {
 public:
  NonReadableChannelException()
      : std::logic_error("java.nio.channels.NonReadableChannelException") {}
};
class NonWritableChannelException : public std::logic_error {
 public:
  NonWritableChannelException()
      : std::logic_error("java.nio.channels.NonWritableChannelException") {}
};
class CancelledKeyException : public std::logic_error {
 public:
  CancelledKeyException() : std::logic_error("java.nio.channels.CancelledKeyException") {}
};
class ClosedSelectorException : public std::logic_error {
 public:
  ClosedSelectorException() : std::logic_error("java.nio.channels.ClosedSelectorException") {}
};

// java.nio.channels.Channel. Named NioChannel because niox::Channel is the transport layer's
// (Netty's io.netty.channel.Channel), the one most servers use.
class NioChannel {
 public:
  virtual ~NioChannel() = default;
  virtual bool is_open() const noexcept = 0;
  // Idempotent; never throws (the descriptor is released even when close(2) reports an error).
  virtual void close() noexcept = 0;
  // The file descriptor, or -1 when closed or not backed by one (a user-defined channel).
  virtual int native_handle() const noexcept = 0;

 protected:
  NioChannel() = default;
  NioChannel(const NioChannel&) = default;
  NioChannel& operator=(const NioChannel&) = default;
};

class ReadableByteChannel : public virtual NioChannel {
 public:
  virtual std::int64_t read(ByteBuffer& dst, std::error_code& ec) = 0;
  std::int64_t read(ByteBuffer& dst);
};

class WritableByteChannel : public virtual NioChannel {
 public:
  virtual std::int64_t write(ByteBuffer& src, std::error_code& ec) = 0;
  std::int64_t write(ByteBuffer& src);
};

class ByteChannel : public virtual ReadableByteChannel, public virtual WritableByteChannel {};

// Reads into several buffers with one system call (readv/recvmsg): up to max_iovecs_per_call
// non-empty buffers and max_bytes_per_call bytes per call; empty buffers are skipped.
class ScatteringByteChannel : public virtual ReadableByteChannel {
 public:
  using ReadableByteChannel::read;
  virtual std::int64_t read(std::span<ByteBuffer> dsts, std::error_code& ec) = 0;
  std::int64_t read(std::span<ByteBuffer> dsts);
  // dsts[offset, offset + length). Throws IndexOutOfBoundsException when outside dsts.
  std::int64_t read(std::span<ByteBuffer> dsts, std::size_t offset, std::size_t length);
  std::int64_t read(std::span<ByteBuffer> dsts, std::size_t offset, std::size_t length,
                    std::error_code& ec);
};

// Writes several buffers as one stream (writev/sendmsg), split into as many calls as IOV_MAX and
// the per-call byte cap need. A blocking channel writes everything; a non-blocking one writes
// what the kernel takes now.
class GatheringByteChannel : public virtual WritableByteChannel {
 public:
  using WritableByteChannel::write;
  virtual std::int64_t write(std::span<ByteBuffer> srcs, std::error_code& ec) = 0;
  std::int64_t write(std::span<ByteBuffer> srcs);
  std::int64_t write(std::span<ByteBuffer> srcs, std::size_t offset, std::size_t length);
  std::int64_t write(std::span<ByteBuffer> srcs, std::size_t offset, std::size_t length,
                     std::error_code& ec);
};

class SeekableByteChannel : public virtual ByteChannel {
 public:
  virtual std::uint64_t position() const = 0;
  virtual SeekableByteChannel& position(std::uint64_t new_position) = 0;
  virtual std::uint64_t size() const = 0;
  // Shrinks to `size` if larger; never grows. The position is pulled down to `size`.
  virtual SeekableByteChannel& truncate(std::uint64_t size) = 0;
};

namespace detail {
// Throws std::system_error(ec, what) when ec is set; returns value otherwise.
std::int64_t throw_if(std::int64_t value, const std::error_code& ec, const char* what);
std::span<ByteBuffer> checked_subspan(std::span<ByteBuffer> buffers, std::size_t offset,
                                      std::size_t length);
}  // namespace detail

}  // namespace niox
