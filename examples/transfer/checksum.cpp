#include "checksum.hpp"

// The AVX2/SSE2 choice at run time for XXH3 (XXH3_64bits* become their _dispatch forms).
#include <xxh_x86dispatch.h>

#include <cerrno>
#include <memory>
#include <mutex>
#include <utility>

#include <csetjmp>
#include <csignal>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace niox::transfer {

Checksum::Checksum(ChecksumAlgorithm algorithm) noexcept : algorithm_(algorithm) { reset(); }

void Checksum::reset() noexcept {
  total_length_ = 0;
  if (algorithm_ == ChecksumAlgorithm::xxh64) {
    XXH64_reset(&xxh64_, 0);
  } else {
    XXH3_64bits_reset(&xxh3_);
  }
}

Checksum& Checksum::update(std::span<const std::byte> data) noexcept {
  total_length_ += data.size();
  if (algorithm_ == ChecksumAlgorithm::xxh64) {
    XXH64_update(&xxh64_, data.data(), data.size());
  } else {
    XXH3_64bits_update(&xxh3_, data.data(), data.size());
  }
  return *this;
}

std::uint64_t Checksum::digest() const noexcept {
  return algorithm_ == ChecksumAlgorithm::xxh64 ? XXH64_digest(&xxh64_)
                                                : XXH3_64bits_digest(&xxh3_);
}

std::uint64_t xxh3_64(std::span<const std::byte> data) noexcept {
  return XXH3_64bits(data.data(), data.size());
}
std::uint64_t xxh3_64(std::string_view text) noexcept {
  return XXH3_64bits(text.data(), text.size());
}
std::uint64_t xxh64(std::span<const std::byte> data, std::uint64_t seed) noexcept {
  return XXH64(data.data(), data.size(), seed);
}
std::uint64_t xxh64(std::string_view text, std::uint64_t seed) noexcept {
  return XXH64(text.data(), text.size(), seed);
}

namespace {

// A file mapped for hashing can shrink under us (another process truncates it): touching a page
// past the new end raises SIGBUS. While hash_guarded() reads a mapping, SIGBUS jumps back to it
// and becomes an io_error; any other SIGBUS keeps its default action.
thread_local sigjmp_buf* sigbus_target = nullptr;

void on_sigbus(int sig, siginfo_t*, void*) {
  if (sigbus_target != nullptr) {
    siglongjmp(*sigbus_target, 1);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void install_sigbus_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;  // NODEFER: SIGBUS stays unblocked after the jump
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, nullptr);
  });
}

// Hashes mapped bytes; false if they were cut off by the file shrinking (SIGBUS). On its own so
// that no local of the caller is live across the sigsetjmp.
bool hash_guarded(Checksum& hash, std::span<const std::byte> mapped) {
  sigjmp_buf jump;
  if (sigsetjmp(jump, 0) == 0) {
    sigbus_target = &jump;
    hash.update(mapped);
    sigbus_target = nullptr;
    return true;
  }
  sigbus_target = nullptr;
  return false;
}

}  // namespace

FileHasher::FileHasher(FileHasher&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)),
      map_(std::exchange(o.map_, nullptr)),
      map_offset_(o.map_offset_),
      map_length_(std::exchange(o.map_length_, 0)),
      scratch_(std::move(o.scratch_)) {}

FileHasher& FileHasher::operator=(FileHasher&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = std::exchange(o.fd_, -1);
    map_ = std::exchange(o.map_, nullptr);
    map_offset_ = o.map_offset_;
    map_length_ = std::exchange(o.map_length_, 0);
    scratch_ = std::move(o.scratch_);
  }
  return *this;
}

void FileHasher::release() noexcept {
  if (map_ != nullptr) {
    ::munmap(map_, map_length_);
  }
  fd_ = -1;
  map_ = nullptr;
  map_length_ = 0;
}

// No MAP_POPULATE: a receiver's window reaches past what it has written (the file is
// fallocated to its full size), and populating would read those blocks in as zero pages only
// for the splice to overwrite them. Fault-around maps what is cached, a folio at a time.
bool FileHasher::map_window(int fd, std::uint64_t offset) noexcept {
  constexpr std::uint64_t align = 2 << 20;  // PMD size on x86-64 and arm64 with 4 KiB pages
  constexpr std::uint64_t window = 64 << 20;
  release();
  // Only what the file holds now is mapped: bytes of a last page past the end would read as
  // zeros instead of failing. Past the end, pread finds the end.
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<std::uint64_t>(st.st_size) <= offset) {
    return false;
  }
  const std::uint64_t base = offset & ~(align - 1);
  const auto len = static_cast<std::size_t>(
      std::min<std::uint64_t>(window, static_cast<std::uint64_t>(st.st_size) - base));
  void* m = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(base));
  if (m == MAP_FAILED) {
    return false;
  }
  install_sigbus_handler();
  fd_ = fd;
  map_ = static_cast<std::byte*>(m);
  map_offset_ = base;
  map_length_ = len;
  return true;
}

// Maps the range's pages before the hash reads them: one call instead of a page fault per
// fault-around block (64 KiB at most, 4 KiB when the cache holds the small folios of a file just
// written in small pieces), and for a file that is not cached, reads it in with the readahead
// of a sequential reader instead of a synchronous read per fault (cold 256 MiB, hashed 1 MiB at
// a time: 0.04 s of CPU instead of 0.8 s here). Only what is hashed is populated: a receiver's
// window reaches past what arrived. A kernel without MADV_POPULATE_READ (before 5.14) faults as
// before; a failure (the file shrank) is left to the hash, which reports it.
void FileHasher::populate(std::size_t at, std::size_t len) noexcept {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t begin = at & ~(page - 1);
  ::madvise(map_ + begin, at + len - begin, MADV_POPULATE_READ);
}

void FileHasher::update(Checksum& hash, int fd, std::uint64_t offset, std::uint64_t count,
                        std::error_code& ec) {
  ec.clear();
  while (count > 0 && (covers(fd, offset) || map_window(fd, offset))) {
    const std::size_t at = static_cast<std::size_t>(offset - map_offset_);
    const auto len = static_cast<std::size_t>(std::min<std::uint64_t>(count, map_length_ - at));
    populate(at, len);
    if (!hash_guarded(hash, {map_ + at, len})) {  // the file ended inside the mapping
      release();
      ec = std::make_error_code(std::errc::io_error);
      return;
    }
    offset += len;
    count -= len;
  }
  constexpr std::size_t scratch_size = 256 * 1024;
  if (count > 0 && !scratch_) {
    scratch_ = std::make_unique<std::byte[]>(scratch_size);
  }
  while (count > 0) {
    auto want = static_cast<std::size_t>(std::min<std::uint64_t>(count, scratch_size));
    ssize_t n = ::pread(fd, scratch_.get(), want, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      ec.assign(errno, std::system_category());
      return;
    }
    if (n == 0) {
      ec = std::make_error_code(std::errc::io_error);
      return;
    }
    hash.update({scratch_.get(), static_cast<std::size_t>(n)});
    offset += static_cast<std::uint64_t>(n);
    count -= static_cast<std::uint64_t>(n);
  }
}

std::uint64_t checksum_file(ChecksumAlgorithm algorithm, int fd, std::uint64_t offset,
                            std::uint64_t count, std::error_code& ec) {
  Checksum h(algorithm);
  FileHasher hasher;
  hasher.update(h, fd, offset, count, ec);
  return ec ? 0 : h.digest();
}

}  // namespace niox::transfer
