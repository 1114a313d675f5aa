// XxHash64 — the XXH64 hash (seed 0 by default), written from the public algorithm description
// (xxHash specification, "XXH64 algorithm description"). Why XXH64: it is a well-specified,
// widely implemented 64-bit checksum (xxhsum, python-xxhash and most languages can check a file
// against it), it runs at memory-bandwidth speeds (several GB/s per core: four independent
// multiply-rotate lanes over 32-byte stripes), and it detects accidental corruption far better
// than FNV-1a, which processes one byte per dependent multiply (~1 GB/s). It is not a
// cryptographic hash: it guards against broken transfers, not against an attacker.
//
// Incremental: update() any number of times with pieces of any size, then digest(); the result
// equals the one-shot xxh64() of the concatenation. digest() does not change the state, so a
// running digest may be taken at any time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <system_error>

namespace niox::transfer {

class XxHash64 {
 public:
  explicit XxHash64(std::uint64_t seed = 0) noexcept { reset(seed); }

  void reset(std::uint64_t seed = 0) noexcept;
  XxHash64& update(std::span<const std::byte> data) noexcept;
  XxHash64& update(std::string_view text) noexcept {
    return update(std::as_bytes(std::span(text.data(), text.size())));
  }
  std::uint64_t digest() const noexcept;
  std::uint64_t total_length() const noexcept { return total_len_; }

 private:
  std::uint64_t seed_ = 0;
  std::uint64_t acc_[4] = {};
  std::uint64_t total_len_ = 0;
  unsigned char pending_[32] = {};  // the tail of the input not yet a full 32-byte stripe
  std::size_t pending_len_ = 0;
};

std::uint64_t xxh64(std::span<const std::byte> data, std::uint64_t seed = 0) noexcept;
std::uint64_t xxh64(std::string_view text, std::uint64_t seed = 0) noexcept;

// XXH64 of `count` bytes of the file `fd` from `offset`, read with pread (so the file position
// is untouched and the page cache serves a file just written or about to be sent). Fails with
// the errno of a failed read, or with std::errc::io_error if the file ends before `count`.
std::uint64_t xxh64_file(int fd, std::uint64_t offset, std::uint64_t count, std::error_code& ec);

// Adds `count` bytes of the file `fd` from `offset` to `hash`. Reads through read-only mappings
// (no copy; a file that shrinks meanwhile is an io_error, not a SIGBUS: a SIGBUS handler is
// installed for that), and with pread through `scratch` where the file cannot be mapped (a
// buffer that fits in the CPU's cache is best: 256 KiB). Errors as xxh64_file; on an error
// `hash` holds an unspecified part of the range.
void xxh64_file_update(XxHash64& hash, int fd, std::uint64_t offset, std::uint64_t count,
                       std::span<std::byte> scratch, std::error_code& ec);

}  // namespace niox::transfer
