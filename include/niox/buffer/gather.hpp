// Gather/scatter: turning a sequence of ByteBuffers into iovecs, and advancing the buffers by
// exactly what a readv/writev (or their io_uring and sendmsg cousins) moved.
//
//   buffers:  [ a: pos..lim ][ b: empty ][ c: pos..lim ][ d: pos..lim ] ...
//   iovecs:   { a.pos, a.rem }           { c.pos, c.rem }{ d.pos, <trimmed to byte budget> }
//   advance(n): a fully, b skipped, c fully, d by the rest -> d may end mid-buffer
//
// Short transfers are the normal case: a caller builds iovecs, makes one call, advances by its
// result, and builds again from the first buffer that still has remaining bytes.
#pragma once

#include <niox/buffer/byte_buffer.hpp>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstring>
#include <span>

#include <sys/uio.h>

namespace niox {

// The kernel moves at most this many bytes in one read/write/readv/writev/sendfile call
// (MAX_RW_COUNT: INT_MAX rounded down to a page); asking for more is silently truncated.
inline constexpr std::size_t max_bytes_per_call = 0x7ffff000;
// iovecs one readv/writev/sendmsg accepts (IOV_MAX); more fail with EINVAL.
inline constexpr std::size_t max_iovecs_per_call = IOV_MAX;

// Fills `out` with one iovec per non-empty buffer over its [position, limit), in order, stopping
// at out.size() iovecs or `max_bytes` in total (the last iovec trimmed to fit). Returns how many
// iovecs were filled. The iovecs point into the buffers' memory: they stay valid while the
// buffers (and the memory they view) do and are not changed.
std::size_t gather_iovecs(std::span<const ByteBuffer> buffers, std::span<iovec> out,
                          std::size_t max_bytes = max_bytes_per_call) noexcept;

// The same for reading into the buffers. Throws ReadOnlyBufferException (before filling
// anything) if a read-only buffer has remaining space.
std::size_t scatter_iovecs(std::span<ByteBuffer> buffers, std::span<iovec> out,
                           std::size_t max_bytes = max_bytes_per_call);

// Advances positions by exactly `n` bytes in total, in order: each buffer up to its limit, the
// last one possibly mid-way. Returns the index of the first buffer that still has remaining
// bytes (buffers.size() when all are done). `n` beyond the total remaining is a caller bug and
// is clamped.
std::size_t advance(std::span<ByteBuffer> buffers, std::size_t n) noexcept;

// Sum of remaining() over the buffers.
std::size_t total_remaining(std::span<const ByteBuffer> buffers) noexcept;

// Copies src's remaining bytes into the buffers' room, in order, each filled before the next;
// src and each buffer advance by what moved. Returns the count (less than src held when the
// buffers fill). Throws ReadOnlyBufferException for a read-only buffer that would take bytes.
std::size_t copy_into(ByteBuffer& src, std::span<ByteBuffer> buffers);

// Builds the iovecs of ONE gathering write piece by piece, copying runs of small pieces into a
// caller-owned scratch area so that a run goes to the kernel as one iovec:
//
//   pieces:  [ 10 B ][ 7 B ][ 30 B ][ 64 KiB ][ 5 B ]
//   iovecs:  { scratch: 10+7+30 }   { 64 KiB }{ 5 B }   (a lone small piece is not copied)
//
// The bytes keep their order, so the source buffers are advanced exactly as without coalescing:
// `advance(buffers, n)` by what the kernel took, even when n ends inside a copied run.
//
// A piece of at most `coalesce_max` bytes is small. The first small piece of a run is referenced
// in place; when a second one follows, both are copied into the scratch and share one iovec, and
// later small pieces extend it while the scratch has room. When the scratch is full, add() of a
// small piece refuses it (returns false): the caller sends what was built and starts over, so a
// long run of tiny pieces goes out in scratch-sized writes rather than as one iovec each.
//
// The iovecs point into the pieces and into the scratch: keep both alive and unchanged until
// the write is done. coalesce_max 0 or an empty scratch never copies (plain gather_iovecs).
class GatherBuilder {
 public:
  GatherBuilder(std::span<iovec> out, std::size_t max_bytes, std::span<std::byte> scratch = {},
                std::size_t coalesce_max = 0) noexcept
      : out_(out),
        budget_(max_bytes),
        scratch_(scratch),
        coalesce_max_(scratch.empty() ? 0 : coalesce_max) {}

  // Adds `piece`, trimmed to the byte budget left. Returns false when nothing more can go into
  // this write (iovecs or budget used up, or a small piece met a full scratch); the piece was
  // then not added. An empty piece is skipped (true).
  bool add(std::span<const std::byte> piece) noexcept;

  std::size_t iovec_count() const noexcept { return n_; }
  std::size_t bytes() const noexcept { return bytes_; }
  std::span<const iovec> iovecs() const noexcept { return out_.first(n_); }

 private:
  enum class Last { none, large, small_in_place, small_copied };

  std::span<iovec> out_;
  std::size_t budget_;
  std::span<std::byte> scratch_;
  std::size_t coalesce_max_;
  std::size_t n_ = 0;
  std::size_t bytes_ = 0;
  std::size_t scratch_used_ = 0;
  Last last_ = Last::none;
};

// Inline: called once per segment on every gathering write.
inline bool GatherBuilder::add(std::span<const std::byte> piece) noexcept {
  if (piece.empty()) {
    return true;
  }
  if (budget_ == 0) {
    return false;
  }
  std::size_t len = std::min(piece.size(), budget_);
  const std::byte* src = piece.data();
  if (len <= coalesce_max_) {
    std::size_t room = scratch_.size() - scratch_used_;
    if (last_ == Last::small_copied) {
      if (room < len) {
        return false;  // scratch full: send this write, the run continues in the next one
      }
      std::memcpy(scratch_.data() + scratch_used_, src, len);
      scratch_used_ += len;
      out_[n_ - 1].iov_len += len;
      budget_ -= len;
      bytes_ += len;
      return true;
    }
    if (last_ == Last::small_in_place) {
      iovec& prev = out_[n_ - 1];
      if (room < prev.iov_len + len) {
        if (room < coalesce_max_) {
          return false;  // as above; a nearly full scratch counts as full
        }
        // Too little room for this pair but not full: reference the piece in place.
      } else {
        std::byte* dst = scratch_.data() + scratch_used_;
        std::memcpy(dst, prev.iov_base, prev.iov_len);
        std::memcpy(dst + prev.iov_len, src, len);
        scratch_used_ += prev.iov_len + len;
        prev = iovec{dst, prev.iov_len + len};
        last_ = Last::small_copied;
        budget_ -= len;
        bytes_ += len;
        return true;
      }
    }
  }
  if (n_ == out_.size()) {
    return false;
  }
  // writev never writes through iov_base; the cast only satisfies struct iovec.
  out_[n_++] = iovec{const_cast<std::byte*>(src), len};
  last_ = len <= coalesce_max_ ? Last::small_in_place : Last::large;
  budget_ -= len;
  bytes_ += len;
  return true;
}

// gather_iovecs through a GatherBuilder: the non-empty buffers' remaining bytes, in order,
// coalescing as described there. Returns the number of iovecs filled; `bytes` receives their
// total.
std::size_t gather_iovecs(std::span<const ByteBuffer> buffers, std::span<iovec> out,
                          std::size_t max_bytes, std::span<std::byte> scratch,
                          std::size_t coalesce_max, std::size_t& bytes) noexcept;

}  // namespace niox
