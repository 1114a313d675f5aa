// FileRegion: `count` bytes of a file starting at `position`, to be sent to a socket without
// passing through user memory (EventLoop::transfer_to, sendfile, by the transport). Netty's
// DefaultFileRegion.
//
// Ownership: the descriptor is shared — every copy of a FileRegion (and the outbound buffer
// entry holding one) holds a std::shared_ptr<const FileDescriptor>, and the descriptor is
// closed when the last one goes. So a handler may write a region and forget the file: the
// transport keeps it open until the region completes or fails. The descriptor is only read
// from (fstat, and the input of EventLoop::transfer_to, which belongs to the socket it writes
// to), so the last copy closes it directly, not through the loop.
//
// In the OutboundBuffer a FileRegion is an entry of its own: a gathering write stops in front of
// it, the transport sends it through its transfer path and reports progress with
// OutboundBuffer::remove_bytes() like for bytes; transferred() counts what went out.
#pragma once

#include <niox/base/file_descriptor.hpp>

#include <cstdint>
#include <memory>
#include <system_error>

namespace niox {

class FileRegion {
 public:
  FileRegion() = default;
  // Shares `file`: the descriptor stays open as long as this region or a copy of it exists
  // (several regions may share one file).
  FileRegion(std::shared_ptr<const FileDescriptor> file, std::uint64_t position,
             std::uint64_t count) noexcept
      : file_(std::move(file)), position_(position), count_(count) {}
  // Takes ownership of `file`; the region and its copies close it when the last one goes.
  FileRegion(FileDescriptor file, std::uint64_t position, std::uint64_t count)
      : FileRegion(std::make_shared<const FileDescriptor>(std::move(file)), position, count) {}

  const std::shared_ptr<const FileDescriptor>& file() const noexcept { return file_; }
  // The number, owned by the shared FileDescriptor; -1 without a file.
  int fd() const noexcept { return file_ ? file_->get() : -1; }
  // Where the region starts in the file; never changes.
  std::uint64_t position() const noexcept { return position_; }
  std::uint64_t count() const noexcept { return count_; }
  std::uint64_t transferred() const noexcept { return transferred_; }
  std::uint64_t remaining() const noexcept { return count_ - transferred_; }
  // The file offset of the next byte to send.
  std::uint64_t next_offset() const noexcept { return position_ + transferred_; }
  // Records that `n` more bytes went out (clamped to remaining()).
  void add_transferred(std::uint64_t n) noexcept {
    transferred_ += n < remaining() ? n : remaining();
  }

  // Whether the file (now) holds [position, position + count): fstat's size against the end of
  // the region. Empty error when it does; Errc::file_region_truncated when it is shorter; the
  // errno when fstat fails. The transport calls it before the first transfer and when a
  // transfer returns 0 bytes early, so a short file fails the write instead of spinning.
  std::error_code check_file_length() const noexcept;

 private:
  std::shared_ptr<const FileDescriptor> file_;
  std::uint64_t position_ = 0;
  std::uint64_t count_ = 0;
  std::uint64_t transferred_ = 0;
};

}  // namespace niox
