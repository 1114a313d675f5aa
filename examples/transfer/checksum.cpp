#include "checksum.hpp"

#include <cerrno>
#include <memory>
#include <mutex>

#include <csetjmp>
#include <csignal>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace niox::transfer {

Checksum::Checksum(ChecksumAlgorithm algorithm) noexcept : algorithm_(algorithm) {}

Checksum& Checksum::update(std::span<const std::byte> data) noexcept {
  if (algorithm_ == ChecksumAlgorithm::xxh64) {
    xxh64_.update(data);
  } else {
    xxh3_.update(data);
  }
  return *this;
}

std::uint64_t Checksum::digest() const noexcept {
  return algorithm_ == ChecksumAlgorithm::xxh64 ? xxh64_.digest() : xxh3_.digest();
}

std::uint64_t Checksum::total_length() const noexcept {
  return algorithm_ == ChecksumAlgorithm::xxh64 ? xxh64_.total_length() : xxh3_.total_length();
}

namespace {

// A file mapped for hashing can shrink under us (another process truncates it): touching a page
// past the new end raises SIGBUS. While hash_mapped() reads a mapping, SIGBUS jumps back to it
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

// Hashes through read-only mappings, MAP_POPULATE'd a window at a time: no copy of the file into
// a buffer, which is the larger part of hashing a file from the page cache through pread.
// Advances offset/count past what it hashed; returns early (ec clear) where mmap fails, leaving
// the rest to pread.
void hash_mapped(Checksum& hash, int fd, std::uint64_t& offset, std::uint64_t& count,
                 std::error_code& ec) {
  static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  constexpr std::uint64_t window = 4 << 20;
  // Only what the file holds now is mapped: bytes of a last page past the end would read as
  // zeros instead of failing. pread finds the end for the rest.
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) <= offset) {
    return;
  }
  std::uint64_t mappable = std::min<std::uint64_t>(count, static_cast<std::uint64_t>(st.st_size) - offset);
  install_sigbus_handler();
  while (mappable > 0) {
    const std::uint64_t base = offset & ~(page - 1);
    const auto skip = static_cast<std::size_t>(offset - base);
    const auto len = static_cast<std::size_t>(std::min<std::uint64_t>(mappable, window - skip));
    void* m = ::mmap(nullptr, skip + len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd,
                     static_cast<off_t>(base));
    if (m == MAP_FAILED) {
      return;
    }
    sigjmp_buf jump;
    if (sigsetjmp(jump, 0) == 0) {
      sigbus_target = &jump;
      hash.update({static_cast<const std::byte*>(m) + skip, len});
      sigbus_target = nullptr;
    } else {
      sigbus_target = nullptr;  // the file ended inside the mapping
      ::munmap(m, skip + len);
      ec = std::make_error_code(std::errc::io_error);
      return;
    }
    ::munmap(m, skip + len);
    offset += len;
    count -= len;
    mappable -= len;
  }
}

}  // namespace

void checksum_file_update(Checksum& hash, int fd, std::uint64_t offset, std::uint64_t count,
                          std::span<std::byte> scratch, std::error_code& ec) {
  ec.clear();
  hash_mapped(hash, fd, offset, count, ec);
  if (ec) {
    return;
  }
  while (count > 0) {
    auto want = static_cast<std::size_t>(std::min<std::uint64_t>(count, scratch.size()));
    ssize_t n = ::pread(fd, scratch.data(), want, static_cast<off_t>(offset));
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
    hash.update(scratch.first(static_cast<std::size_t>(n)));
    offset += static_cast<std::uint64_t>(n);
    count -= static_cast<std::uint64_t>(n);
  }
}

std::uint64_t checksum_file(ChecksumAlgorithm algorithm, int fd, std::uint64_t offset,
                            std::uint64_t count, std::error_code& ec) {
  constexpr std::size_t chunk = 256 * 1024;  // big enough to amortise the call, fits in L2
  auto buf = std::make_unique<std::byte[]>(chunk);
  Checksum h(algorithm);
  checksum_file_update(h, fd, offset, count, {buf.get(), chunk}, ec);
  return ec ? 0 : h.digest();
}

}  // namespace niox::transfer
