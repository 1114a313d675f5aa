#include <niox/buffer/byte_buffer.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>

#include <fmt/format.h>

namespace niox {

namespace detail {
void throw_overflow() { throw BufferOverflowException(); }
void throw_underflow() { throw BufferUnderflowException(); }
void throw_read_only() { throw ReadOnlyBufferException(); }
void throw_invalid_mark() { throw InvalidMarkException(); }
void throw_index(std::size_t index, std::size_t size, std::size_t bound) {
  throw IndexOutOfBoundsException(
      fmt::format("Range [{}, {} + {}) out of bounds for length {}", index, index, size, bound));
}
void throw_illegal_argument(const char* what) { throw IllegalArgumentException(what); }
}  // namespace detail

namespace {
constexpr std::size_t page_size = 4096;
}  // namespace

// One allocation per owned buffer; the shared_ptr control block is the reference count.
std::shared_ptr<std::byte> detail::allocate_storage(std::size_t capacity, bool direct) {
  // No object may be larger than PTRDIFF_MAX; refusing early also keeps the page rounding
  // below from wrapping around to a tiny block.
  if (capacity > static_cast<std::size_t>(PTRDIFF_MAX) - page_size) {
    throw std::bad_alloc();
  }
  // Never ask for a zero size: every buffer gets a real, unique base pointer.
  std::size_t bytes = std::max<std::size_t>(capacity, 1);
  void* p;
  if (direct) {
    bytes = (bytes + page_size - 1) & ~(page_size - 1);
    p = std::aligned_alloc(page_size, bytes);
    if (p != nullptr) {
      std::memset(p, 0, bytes);
    }
  } else {
    p = std::calloc(bytes, 1);  // fresh pages from the kernel are already zero
  }
  if (p == nullptr) {
    throw std::bad_alloc();
  }
  return {static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); }};
}

ByteBuffer& ByteBuffer::limit(std::size_t new_limit) {
  if (new_limit > capacity_) {
    detail::throw_illegal_argument("newLimit > capacity");
  }
  limit_ = new_limit;
  if (position_ > new_limit) {
    position_ = new_limit;
  }
  if (mark_ != no_mark && mark_ > new_limit) {
    mark_ = no_mark;
  }
  return *this;
}

ByteBuffer& ByteBuffer::reset() {
  if (mark_ == no_mark) {
    detail::throw_invalid_mark();
  }
  position_ = mark_;
  return *this;
}

ByteBuffer& ByteBuffer::compact() {
  check_writable();
  std::size_t n = remaining();
  if (n != 0 && position_ != 0) {
    std::memmove(base_, base_ + position_, n);
  }
  position_ = n;
  limit_ = capacity_;
  mark_ = no_mark;
  return *this;
}

ByteBuffer ByteBuffer::slice() const {
  ByteBuffer b(*this);
  b.base_ = base_ + position_;
  b.capacity_ = b.limit_ = remaining();
  b.position_ = 0;
  b.mark_ = no_mark;
  return b;
}

ByteBuffer ByteBuffer::slice(std::size_t index, std::size_t length) const {
  check_range(index, length);
  ByteBuffer b(*this);
  b.base_ = base_ + index;
  b.capacity_ = b.limit_ = length;
  b.position_ = 0;
  b.mark_ = no_mark;
  return b;
}

ByteBuffer& ByteBuffer::put(ByteBuffer& src) {
  if (&src == this) {
    detail::throw_illegal_argument("The source buffer is this buffer");
  }
  check_writable();
  std::size_t n = src.remaining();
  if (n > remaining()) {
    detail::throw_overflow();
  }
  copy_in(position_, src.bytes());  // memmove: views of one block may overlap
  position_ += n;
  src.position_ += n;
  return *this;
}

ByteBuffer& ByteBuffer::put(std::size_t index, const ByteBuffer& src, std::size_t offset,
                            std::size_t length) {
  check_range(index, length);
  src.check_range(offset, length);
  check_writable();
  if (length != 0) {
    std::memmove(base_ + index, src.base_ + offset, length);
  }
  return *this;
}

bool ByteBuffer::operator==(const ByteBuffer& other) const noexcept {
  return remaining() == other.remaining() &&
         (remaining() == 0 ||
          std::memcmp(base_ + position_, other.base_ + other.position_, remaining()) == 0);
}

std::strong_ordering ByteBuffer::operator<=>(const ByteBuffer& other) const noexcept {
  std::size_t n = std::min(remaining(), other.remaining());
  int c = n == 0 ? 0 : std::memcmp(base_ + position_, other.base_ + other.position_, n);
  if (c != 0) {
    return c < 0 ? std::strong_ordering::less : std::strong_ordering::greater;
  }
  return remaining() <=> other.remaining();
}

std::ptrdiff_t ByteBuffer::mismatch(const ByteBuffer& other) const noexcept {
  std::size_t n = std::min(remaining(), other.remaining());
  auto a = bytes();
  auto b = other.bytes();
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) {
      return static_cast<std::ptrdiff_t>(i);
    }
  }
  return remaining() == other.remaining() ? -1 : static_cast<std::ptrdiff_t>(n);
}

std::int32_t ByteBuffer::hash_code() const noexcept {
  // Java's: h = 1; for i from limit-1 down to position: h = 31*h + (int)get(i), bytes signed,
  // arithmetic wrapping at 32 bits (done unsigned here, where wrapping is defined).
  std::uint32_t h = 1;
  for (std::size_t i = limit_; i-- > position_;) {
    h = 31u * h + static_cast<std::uint32_t>(static_cast<std::int32_t>(
                      static_cast<std::int8_t>(static_cast<std::uint8_t>(base_[i]))));
  }
  return static_cast<std::int32_t>(h);
}

std::size_t ByteBuffer::alignment_offset(std::size_t index, std::size_t unit_size) const {
  if (unit_size == 0 || (unit_size & (unit_size - 1)) != 0) {
    detail::throw_illegal_argument("Unit size not a power of two");
  }
  return (reinterpret_cast<std::uintptr_t>(base_) + index) & (unit_size - 1);
}

ByteBuffer ByteBuffer::aligned_slice(std::size_t unit_size) const {
  std::size_t pos = position_;
  std::size_t lim = limit_;
  std::size_t pos_mod = alignment_offset(pos, unit_size);
  std::size_t lim_mod = alignment_offset(lim, unit_size);
  // Java rounds pos up by (unit_size - pos_mod); compared as a gap here so that a huge
  // unit_size cannot wrap around.
  std::size_t gap = pos_mod > 0 ? unit_size - pos_mod : 0;
  std::size_t aligned_pos = pos;
  std::size_t aligned_lim = pos;
  if (gap <= lim - pos && lim_mod <= lim - (pos + gap)) {
    aligned_pos = pos + gap;
    aligned_lim = lim - lim_mod;
  }
  return slice(aligned_pos, aligned_lim - aligned_pos);
}

bool ByteBuffer::shares_memory_with(const ByteBuffer& other) const noexcept {
  if (capacity_ == 0 || other.capacity_ == 0) {
    return false;
  }
  auto lo = reinterpret_cast<std::uintptr_t>(base_);
  auto olo = reinterpret_cast<std::uintptr_t>(other.base_);
  return lo < olo + other.capacity_ && olo < lo + capacity_;
}

std::string hex_dump(const ByteBuffer& buffer) {
  auto data = buffer.bytes();
  std::string out;
  out +=
      "         +-------------------------------------------------+\n"
      "         |  0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f |\n"
      "+--------+-------------------------------------------------+----------------+\n";
  for (std::size_t row = 0; row < data.size(); row += 16) {
    out += fmt::format("|{:08x}|", row);
    std::string ascii;
    for (std::size_t i = row; i < row + 16; ++i) {
      if (i < data.size()) {
        auto c = static_cast<unsigned char>(data[i]);
        out += fmt::format(" {:02x}", c);
        ascii += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '.';
      } else {
        out += "   ";
        ascii += ' ';
      }
    }
    out += " |" + ascii + "|\n";
  }
  out += "+--------+-------------------------------------------------+----------------+";
  return out;
}

ByteBuffer ByteBuffer::wrap_shared(std::span<std::byte> memory,
                                   std::shared_ptr<void> owner) noexcept {
  ByteBuffer b = wrap(memory);
  // Aliasing constructor: the reference count is owner's, the pointer is the memory.
  b.storage_ = std::shared_ptr<std::byte>(std::move(owner), memory.data());
  return b;
}

}  // namespace niox
