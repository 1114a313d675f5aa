// FileChannel (java.nio.channels.FileChannel): reading, writing, mapping and locking a file, plus
// positional vectored I/O (preadv/pwritev, which Java lacks) and zero-copy transfers that report
// the kernel path they used.
//
//   auto in = FileChannel::open(path, OpenOption::read);
//   auto r = in.transfer_to(0, in.size(), socket);    // r.bytes, r.path == TransferPath::sendfile
//
// The channel's position is the descriptor's file offset: relative read/write use and advance
// it; the positional forms (read(dst, position), write(src, position), transfer_to) never
// change it. A FileChannel is always blocking: a write writes every byte.
#pragma once

#include <niox/base/file_descriptor.hpp>
#include <niox/channels/channel.hpp>
#include <niox/channels/transfer_path.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>

#include <sys/types.h>

namespace niox {

// java.nio.file.StandardOpenOption (plus direct, Java's ExtendedOpenOption.DIRECT), combinable
// with `|`.
enum class OpenOption : unsigned {
  read = 1u << 0,
  write = 1u << 1,
  append = 1u << 2,             // every write goes to the end (implies write)
  create = 1u << 3,             // create if missing (needs write or append)
  create_new = 1u << 4,         // create, failing with EEXIST if present
  truncate_existing = 1u << 5,  // needs write; ignored for read-only channels like Java
  sync = 1u << 6,               // O_SYNC: data and metadata reach the device on each write
  dsync = 1u << 7,              // O_DSYNC: data reaches the device on each write
  direct = 1u << 8,             // O_DIRECT: buffers, positions and sizes must be block-aligned
};
constexpr OpenOption operator|(OpenOption a, OpenOption b) noexcept {
  return static_cast<OpenOption>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
constexpr bool has_option(OpenOption set, OpenOption o) noexcept {
  return (static_cast<unsigned>(set) & static_cast<unsigned>(o)) != 0;
}

// How map() shares the mapping (FileChannel.MapMode).
enum class MapMode { read_only, read_write, private_copy };

struct TransferResult {
  std::uint64_t bytes = 0;  // moved by this call
  // The path that moved the last bytes (or the last one tried when nothing moved).
  TransferPath path = TransferPath::copy;
  // The source ended before `count` bytes: count reached past the end of the file, the file
  // shrank during the transfer, or (transfer_from) the source stream ended.
  bool end_of_input = false;
};

class FileChannel;

// A region lock (FileLock): an open-file-description lock (F_OFD_SETLK), so two FileChannels of
// one process on the same file exclude each other, and closing another descriptor of the file
// does not drop it. Released by release(), by destruction, or when its channel closes.
class FileLock {
 public:
  FileLock() = default;
  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

  std::uint64_t position() const noexcept { return position_; }
  std::uint64_t size() const noexcept { return size_; }
  bool is_shared() const noexcept { return shared_; }
  // False once released or once its channel is closed.
  bool is_valid() const noexcept;
  void release() noexcept;

 private:
  friend class FileChannel;
  FileLock(std::shared_ptr<const FileDescriptor> fd, std::uint64_t position, std::uint64_t size,
           bool shared)
      : fd_(std::move(fd)), position_(position), size_(size), shared_(shared) {}

  // The channel's descriptor, owned by the channel (which closes or releases it); seen here
  // invalid once the channel closed.
  std::shared_ptr<const FileDescriptor> fd_;
  std::uint64_t position_ = 0;
  std::uint64_t size_ = 0;
  bool shared_ = false;
};

class FileChannel final : public virtual SeekableByteChannel,
                          public virtual ScatteringByteChannel,
                          public virtual GatheringByteChannel {
 public:
  // Opens `path` (O_CLOEXEC). No read/write/append given means read. New files get `mode`
  // (before umask). Throws std::system_error (EEXIST, ENOENT, EACCES, EINVAL for direct I/O on
  // a file system without it, ...), IllegalArgumentException for contradicting options
  // (append with read or truncate_existing, like Java).
  static FileChannel open(const std::filesystem::path& path, OpenOption options,
                          mode_t mode = 0644);
  static FileChannel open(const std::filesystem::path& path, OpenOption options, mode_t mode,
                          std::error_code& ec);
  // Adopts a descriptor; readability/writability are read from its flags.
  static FileChannel from_native(int fd) noexcept;

  FileChannel() = default;
  FileChannel(FileChannel&& other) noexcept;
  FileChannel& operator=(FileChannel&& other) noexcept;
  FileChannel(const FileChannel&) = delete;
  FileChannel& operator=(const FileChannel&) = delete;
  ~FileChannel() override;

  bool is_open() const noexcept override { return fd() >= 0; }
  // Also releases every lock taken through this channel.
  void close() noexcept override;
  // The number, owned by this channel until it closes or releases it.
  int native_handle() const noexcept override { return fd(); }
  // Gives the descriptor to the caller, who owns it from then on, and leaves this channel
  // closed (locks stay with the descriptor; the FileLocks report themselves invalid).
  int release() noexcept;

  // ---- Relative I/O at the channel's position -------------------------------------------
  using GatheringByteChannel::write;
  using ScatteringByteChannel::read;
  std::int64_t read(ByteBuffer& dst, std::error_code& ec) override;
  std::int64_t read(std::span<ByteBuffer> dsts, std::error_code& ec) override;
  std::int64_t write(ByteBuffer& src, std::error_code& ec) override;
  std::int64_t write(std::span<ByteBuffer> srcs, std::error_code& ec) override;

  // ---- Positional I/O (pread/pwrite, preadv/pwritev); the channel's position is unchanged --
  // read: one call; -1 when `position` is at or past the end of the file.
  std::int64_t read(ByteBuffer& dst, std::uint64_t position);
  std::int64_t read(ByteBuffer& dst, std::uint64_t position, std::error_code& ec);
  std::int64_t read(std::span<ByteBuffer> dsts, std::uint64_t position);
  std::int64_t read(std::span<ByteBuffer> dsts, std::uint64_t position, std::error_code& ec);
  // write: every remaining byte, at position onward (in append mode Linux appends instead).
  std::int64_t write(ByteBuffer& src, std::uint64_t position);
  std::int64_t write(ByteBuffer& src, std::uint64_t position, std::error_code& ec);
  std::int64_t write(std::span<ByteBuffer> srcs, std::uint64_t position);
  std::int64_t write(std::span<ByteBuffer> srcs, std::uint64_t position, std::error_code& ec);

  // ---- SeekableByteChannel ----------------------------------------------------------------
  std::uint64_t position() const override;
  FileChannel& position(std::uint64_t new_position) override;
  std::uint64_t size() const override;
  FileChannel& truncate(std::uint64_t size) override;
  // fdatasync (metadata = false) or fsync (true).
  void force(bool metadata);

  // ---- Mapping ----------------------------------------------------------------------------
  // A buffer over mmap of [position, position + size): capacity = size, position 0. It owns the
  // mapping: the mapping lives until the last buffer viewing it (any duplicate or slice) is
  // gone, also after this channel closes. read_only gives a read-only buffer; private_copy
  // changes only this process's copy. Mapping beyond the end of a read_write file grows it.
  ByteBuffer map(MapMode mode, std::uint64_t position, std::uint64_t size);

  // ---- Locking ----------------------------------------------------------------------------
  // Blocks until granted. size 0 is not special here: pass UINT64_MAX (or lock()) to lock to
  // infinity. Shared locks need a readable channel, exclusive ones a writable one (EBADF).
  FileLock lock(std::uint64_t position, std::uint64_t size, bool shared);
  FileLock lock() { return lock(0, UINT64_MAX, false); }
  // nullopt when another open file description holds a conflicting lock.
  std::optional<FileLock> try_lock(std::uint64_t position, std::uint64_t size, bool shared);
  std::optional<FileLock> try_lock() { return try_lock(0, UINT64_MAX, false); }

  // ---- Transfers --------------------------------------------------------------------------
  // Moves up to `count` bytes of this file from `position` into `target` (at its position),
  // with copy_file_range (target a regular file), else sendfile, else splice through a pipe,
  // else a copy loop; `allowed` restricts the paths tried. This channel's position is
  // unchanged. Stops early, with end_of_input, at the end of the file (also when it shrinks
  // during the transfer). A blocking target takes everything; a non-blocking one takes what it
  // can now (possibly 0 bytes). Errors throw (or set ec) only when nothing was moved; after a
  // partial transfer they show up on the next call. `target` must have a descriptor (EBADF
  // otherwise); it is only borrowed for the call, like the pipe a splice goes through, which
  // is this call's own.
  TransferResult transfer_to(std::uint64_t position, std::uint64_t count,
                             WritableByteChannel& target,
                             TransferPaths allowed = all_transfer_paths);
  TransferResult transfer_to(std::uint64_t position, std::uint64_t count,
                             WritableByteChannel& target, std::error_code& ec,
                             TransferPaths allowed = all_transfer_paths);
  // Moves up to `count` bytes from `source` (from its position, which advances) into this file
  // at `position` (this channel's position unchanged): copy_file_range for a regular file
  // source, else splice (sockets, pipes), else a copy loop. Stops with end_of_input when the
  // source ends; a non-blocking source stops when it has nothing more now. Bytes read from the
  // source and then not stored (a failed write) are reported even after a partial transfer.
  TransferResult transfer_from(ReadableByteChannel& source, std::uint64_t position,
                               std::uint64_t count, TransferPaths allowed = all_transfer_paths);
  TransferResult transfer_from(ReadableByteChannel& source, std::uint64_t position,
                               std::uint64_t count, std::error_code& ec,
                               TransferPaths allowed = all_transfer_paths);

 private:
  FileChannel(int fd, bool readable, bool writable, bool append) noexcept;
  int fd() const noexcept { return fd_ ? fd_->get() : -1; }

  // Owned by this channel; shared with its FileLocks only so that they see it closed.
  std::shared_ptr<FileDescriptor> fd_;
  bool readable_ = false;
  bool writable_ = false;
  bool append_ = false;
};

}  // namespace niox
