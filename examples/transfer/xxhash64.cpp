#include "xxhash64.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>

#include <csetjmp>
#include <csignal>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace niox::transfer {
namespace {

constexpr std::uint64_t prime1 = 0x9E3779B185EBCA87ULL;
constexpr std::uint64_t prime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr std::uint64_t prime3 = 0x165667B19E3779F9ULL;
constexpr std::uint64_t prime4 = 0x85EBCA77C2B2AE63ULL;
constexpr std::uint64_t prime5 = 0x27D4EB2F165667C5ULL;

// The specification reads input words little-endian.
inline std::uint64_t read64(const unsigned char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) {
    v = __builtin_bswap64(v);
  }
  return v;
}

inline std::uint32_t read32(const unsigned char* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  if constexpr (std::endian::native == std::endian::big) {
    v = __builtin_bswap32(v);
  }
  return v;
}

inline std::uint64_t round(std::uint64_t acc, std::uint64_t lane) noexcept {
  acc += lane * prime2;
  acc = std::rotl(acc, 31);
  return acc * prime1;
}

inline std::uint64_t merge_round(std::uint64_t acc, std::uint64_t val) noexcept {
  acc ^= round(0, val);
  return acc * prime1 + prime4;
}

// Consumes whole 32-byte stripes from p; returns the first unconsumed byte.
inline const unsigned char* stripes(std::uint64_t (&acc)[4], const unsigned char* p,
                                    const unsigned char* end) noexcept {
  std::uint64_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
  while (end - p >= 32) {
    a0 = round(a0, read64(p));
    a1 = round(a1, read64(p + 8));
    a2 = round(a2, read64(p + 16));
    a3 = round(a3, read64(p + 24));
    p += 32;
  }
  acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
  return p;
}

}  // namespace

void XxHash64::reset(std::uint64_t seed) noexcept {
  seed_ = seed;
  acc_[0] = seed + prime1 + prime2;
  acc_[1] = seed + prime2;
  acc_[2] = seed;
  acc_[3] = seed - prime1;
  total_len_ = 0;
  pending_len_ = 0;
}

XxHash64& XxHash64::update(std::span<const std::byte> data) noexcept {
  if (data.empty()) {
    return *this;  // an empty span may have no storage: keep memcpy away from a null pointer
  }
  auto p = reinterpret_cast<const unsigned char*>(data.data());
  const auto end = p + data.size();
  total_len_ += data.size();
  if (pending_len_ > 0) {
    std::size_t take = std::min<std::size_t>(32 - pending_len_, data.size());
    std::memcpy(pending_ + pending_len_, p, take);
    pending_len_ += take;
    p += take;
    if (pending_len_ < 32) {
      return *this;
    }
    stripes(acc_, pending_, pending_ + 32);
    pending_len_ = 0;
  }
  p = stripes(acc_, p, end);
  pending_len_ = static_cast<std::size_t>(end - p);
  if (pending_len_ > 0) {
    std::memcpy(pending_, p, pending_len_);
  }
  return *this;
}

std::uint64_t XxHash64::digest() const noexcept {
  std::uint64_t h;
  if (total_len_ >= 32) {
    h = std::rotl(acc_[0], 1) + std::rotl(acc_[1], 7) + std::rotl(acc_[2], 12) +
        std::rotl(acc_[3], 18);
    for (auto a : acc_) {
      h = merge_round(h, a);
    }
  } else {
    h = seed_ + prime5;
  }
  h += total_len_;
  const unsigned char* p = pending_;
  const unsigned char* end = pending_ + pending_len_;
  while (end - p >= 8) {
    h ^= round(0, read64(p));
    h = std::rotl(h, 27) * prime1 + prime4;
    p += 8;
  }
  if (end - p >= 4) {
    h ^= static_cast<std::uint64_t>(read32(p)) * prime1;
    h = std::rotl(h, 23) * prime2 + prime3;
    p += 4;
  }
  while (p < end) {
    h ^= static_cast<std::uint64_t>(*p) * prime5;
    h = std::rotl(h, 11) * prime1;
    ++p;
  }
  // Avalanche.
  h ^= h >> 33;
  h *= prime2;
  h ^= h >> 29;
  h *= prime3;
  h ^= h >> 32;
  return h;
}

std::uint64_t xxh64(std::span<const std::byte> data, std::uint64_t seed) noexcept {
  return XxHash64(seed).update(data).digest();
}

std::uint64_t xxh64(std::string_view text, std::uint64_t seed) noexcept {
  return XxHash64(seed).update(text).digest();
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
void hash_mapped(XxHash64& hash, int fd, std::uint64_t& offset, std::uint64_t& count,
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

void xxh64_file_update(XxHash64& hash, int fd, std::uint64_t offset, std::uint64_t count,
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

std::uint64_t xxh64_file(int fd, std::uint64_t offset, std::uint64_t count, std::error_code& ec) {
  constexpr std::size_t chunk = 256 * 1024;  // big enough to amortise the call, fits in L2
  auto buf = std::make_unique<std::byte[]>(chunk);
  XxHash64 h;
  xxh64_file_update(h, fd, offset, count, {buf.get(), chunk}, ec);
  return ec ? 0 : h.digest();
}

}  // namespace niox::transfer
