// Checksum — a transfer's body checksum, by the algorithm its header names: XXH3-64 (what
// niox-transfer sends) or XXH64 (what it sent before, still accepted), and the helpers that hash
// a range of a file through the page cache.
//
// Both come from libxxhash (xxHash's reference implementation, Debian's libxxhash-dev): XXH3
// through its x86 dispatch, which picks the AVX2 or SSE2 stripe kernel on first use, so the
// hash runs at the widest vector width the CPU has. Like XXH64 it guards against accidental
// damage, not against an attacker. The hash states live inside Checksum (static linking API):
// hashing allocates nothing.
#pragma once

#include "transfer_protocol.hpp"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t / XXH64_state_t as members
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <system_error>

namespace niox::transfer {

// Incremental: update() any number of times with pieces of any size, then digest(); the result
// equals the one-shot hash of the concatenation. digest() does not change the state.
class Checksum {
 public:
  explicit Checksum(ChecksumAlgorithm algorithm = ChecksumAlgorithm::xxh3_64) noexcept;

  ChecksumAlgorithm algorithm() const noexcept { return algorithm_; }
  void reset() noexcept;
  Checksum& update(std::span<const std::byte> data) noexcept;
  Checksum& update(std::string_view text) noexcept {
    return update(std::as_bytes(std::span(text.data(), text.size())));
  }
  std::uint64_t digest() const noexcept;
  std::uint64_t total_length() const noexcept { return total_length_; }

 private:
  ChecksumAlgorithm algorithm_;
  std::uint64_t total_length_ = 0;
  XXH3_state_t xxh3_;
  XXH64_state_t xxh64_;
};

// One-shot hashes (seed 0 unless given).
std::uint64_t xxh3_64(std::span<const std::byte> data) noexcept;
std::uint64_t xxh3_64(std::string_view text) noexcept;
std::uint64_t xxh64(std::span<const std::byte> data, std::uint64_t seed = 0) noexcept;
std::uint64_t xxh64(std::string_view text, std::uint64_t seed = 0) noexcept;

// The checksum of `count` bytes of the file `fd` from `offset`, read through the page cache (so
// the file position is untouched and a file just written or about to be sent is served from
// memory). Fails with the errno of a failed read, or with std::errc::io_error if the file ends
// before `count`.
std::uint64_t checksum_file(ChecksumAlgorithm algorithm, int fd, std::uint64_t offset,
                            std::uint64_t count, std::error_code& ec);

// Hashes ranges of one file, in any order, through the page cache. It reads through a read-only
// mapping of up to 64 MiB that it keeps between calls, starting on a 2 MiB boundary of the file:
// a file whose page cache holds large folios (one read from disk, or written in large pieces)
// is then mapped a folio, or a whole PMD, at a time instead of a 4 KiB page at a time, and the
// per-chunk mmap/munmap of a sender or receiver that hashes 1 MiB at a time is gone. Each range
// is populated (MADV_POPULATE_READ) just before it is hashed: one call maps it, and a file that
// is not cached is read from disk with readahead rather than a fault at a time. Where the file
// cannot be mapped it reads with pread through a 256 KiB buffer (fits in L2).
//
// A file that shrinks while it is mapped is an io_error, not a SIGBUS: a process-wide SIGBUS
// handler is installed on first use for that (any other SIGBUS keeps its default action).
//
// The hasher holds a mapping of the file, not the descriptor: call release() (or destroy it)
// before `fd` is closed, since a later file given the same number would otherwise be read
// through the old mapping.
class FileHasher {
 public:
  FileHasher() = default;
  ~FileHasher() { release(); }
  FileHasher(FileHasher&& o) noexcept;
  FileHasher& operator=(FileHasher&& o) noexcept;
  FileHasher(const FileHasher&) = delete;
  FileHasher& operator=(const FileHasher&) = delete;

  // Adds `count` bytes of the file `fd` from `offset` to `hash`. Errors as checksum_file; on an
  // error `hash` holds an unspecified part of the range.
  void update(Checksum& hash, int fd, std::uint64_t offset, std::uint64_t count,
              std::error_code& ec);

  // Unmaps the window; the next update() maps again.
  void release() noexcept;

 private:
  bool map_window(int fd, std::uint64_t offset) noexcept;
  void populate(std::size_t at, std::size_t len) noexcept;
  bool covers(int fd, std::uint64_t offset) const noexcept {
    return map_ != nullptr && fd == fd_ && offset >= map_offset_ &&
           offset - map_offset_ < map_length_;
  }

  int fd_ = -1;
  std::byte* map_ = nullptr;
  std::uint64_t map_offset_ = 0;  // file offset of map_[0], a multiple of 2 MiB
  std::size_t map_length_ = 0;    // all inside the file when it was mapped
  std::unique_ptr<std::byte[]> scratch_;
};

}  // namespace niox::transfer
