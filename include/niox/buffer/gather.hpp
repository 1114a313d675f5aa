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

#include <climits>
#include <cstddef>
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

}  // namespace niox
