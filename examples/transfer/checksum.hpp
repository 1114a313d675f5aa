// Checksum — a transfer's body checksum, by the algorithm its header names: XXH3-64 (what
// niox-transfer sends, see xxh3.hpp) or XXH64 (what it sent before, still accepted), and the
// helpers that hash a range of a file through the page cache.
#pragma once

#include "transfer_protocol.hpp"
#include "xxh3.hpp"
#include "xxhash64.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <system_error>

namespace niox::transfer {

class Checksum {
 public:
  explicit Checksum(ChecksumAlgorithm algorithm = ChecksumAlgorithm::xxh3_64) noexcept;

  ChecksumAlgorithm algorithm() const noexcept { return algorithm_; }
  Checksum& update(std::span<const std::byte> data) noexcept;
  std::uint64_t digest() const noexcept;
  std::uint64_t total_length() const noexcept;

 private:
  ChecksumAlgorithm algorithm_;
  Xxh3 xxh3_;
  XxHash64 xxh64_;
};

// The checksum of `count` bytes of the file `fd` from `offset`, read through the page cache (so
// the file position is untouched and a file just written or about to be sent is served from
// memory). Fails with the errno of a failed read, or with std::errc::io_error if the file ends
// before `count`.
std::uint64_t checksum_file(ChecksumAlgorithm algorithm, int fd, std::uint64_t offset,
                            std::uint64_t count, std::error_code& ec);

// Adds `count` bytes of the file `fd` from `offset` to `hash`. Reads through read-only mappings
// (no copy; a file that shrinks meanwhile is an io_error, not a SIGBUS: a SIGBUS handler is
// installed for that), and with pread through `scratch` where the file cannot be mapped (a
// buffer that fits in the CPU's cache is best: 256 KiB). Errors as checksum_file; on an error
// `hash` holds an unspecified part of the range.
void checksum_file_update(Checksum& hash, int fd, std::uint64_t offset, std::uint64_t count,
                          std::span<std::byte> scratch, std::error_code& ec);

}  // namespace niox::transfer
