// Pipe: a unidirectional pair of channels (java.nio.channels.Pipe). Bytes written to sink() are
// read from source() in order.
//
// Writing to a sink whose source is closed fails with EPIPE and never raises SIGPIPE: the
// signal is blocked for the calling thread during the write and a resulting pending SIGPIPE is
// consumed, so the process's signal disposition is left alone.
#pragma once

#include <niox/channels/channel.hpp>
#include <niox/channels/selectable_channel.hpp>

namespace niox {

class Pipe {
 public:
  class SourceChannel final : public SelectableChannel,
                              public virtual ReadableByteChannel,
                              public virtual ScatteringByteChannel {
   public:
    SourceChannel() = default;
    // Owns `fd` from here on.
    explicit SourceChannel(int fd) noexcept : SelectableChannel(FileDescriptor(fd)) {}
    SourceChannel(SourceChannel&&) noexcept = default;
    SourceChannel& operator=(SourceChannel&&) noexcept = default;

    using ScatteringByteChannel::read;
    std::int64_t read(ByteBuffer& dst, std::error_code& ec) override;
    std::int64_t read(std::span<ByteBuffer> dsts, std::error_code& ec) override;
    int valid_ops() const noexcept override;
    bool is_open() const noexcept override { return SelectableChannel::is_open(); }
    void close() noexcept override { SelectableChannel::close(); }
    int native_handle() const noexcept override { return fd_.get(); }
  };

  class SinkChannel final : public SelectableChannel,
                            public virtual WritableByteChannel,
                            public virtual GatheringByteChannel {
   public:
    SinkChannel() = default;
    // Owns `fd` from here on.
    explicit SinkChannel(int fd) noexcept : SelectableChannel(FileDescriptor(fd)) {}
    SinkChannel(SinkChannel&&) noexcept = default;
    SinkChannel& operator=(SinkChannel&&) noexcept = default;

    using GatheringByteChannel::write;
    std::int64_t write(ByteBuffer& src, std::error_code& ec) override;
    std::int64_t write(std::span<ByteBuffer> srcs, std::error_code& ec) override;
    int valid_ops() const noexcept override;
    bool is_open() const noexcept override { return SelectableChannel::is_open(); }
    void close() noexcept override { SelectableChannel::close(); }
    int native_handle() const noexcept override { return fd_.get(); }
  };

  // pipe2(O_CLOEXEC); both ends blocking. Throws std::system_error.
  static Pipe open();

  SourceChannel& source() noexcept { return source_; }
  SinkChannel& sink() noexcept { return sink_; }

 private:
  SourceChannel source_;
  SinkChannel sink_;
};

}  // namespace niox
