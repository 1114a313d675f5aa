#include <niox/buffer/byte_buffer.hpp>

#include <algorithm>
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

// One allocation per owned buffer; the shared_ptr control block is the reference count.
std::shared_ptr<std::byte> allocate_storage(std::size_t capacity, bool direct) {
  // Never hand malloc a zero size: every buffer gets a real, unique base pointer.
  std::size_t bytes = std::max<std::size_t>(capacity, 1);
  void* p;
  if (direct) {
    bytes = (bytes + page_size - 1) & ~(page_size - 1);
    p = std::aligned_alloc(page_size, bytes);
  } else {
    p = std::malloc(bytes);
  }
  if (p == nullptr) {
    throw std::bad_alloc();
  }
  std::memset(p, 0, bytes);
  return {static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); }};
}
}  // namespace

ByteBuffer ByteBuffer::allocate(std::size_t capacity) {
  ByteBuffer b;
  b.storage_ = allocate_storage(capacity, false);
  b.base_ = b.storage_.get();
  b.capacity_ = b.limit_ = capacity;
  return b;
}

ByteBuffer ByteBuffer::allocate_direct(std::size_t capacity) {
  ByteBuffer b;
  b.storage_ = allocate_storage(capacity, true);
  b.base_ = b.storage_.get();
  b.capacity_ = b.limit_ = capacity;
  b.direct_ = true;
  return b;
}

ByteBuffer ByteBuffer::wrap(std::span<std::byte> array) noexcept {
  ByteBuffer b;
  b.base_ = array.data();
  b.capacity_ = b.limit_ = array.size();
  return b;
}

ByteBuffer ByteBuffer::wrap(std::span<std::byte> array, std::size_t offset, std::size_t length) {
  if (offset > array.size() || length > array.size() - offset) {
    detail::throw_index(offset, length, array.size());
  }
  ByteBuffer b = wrap(array);
  b.position_ = offset;
  b.limit_ = offset + length;
  return b;
}

ByteBuffer ByteBuffer::wrap(std::span<const std::byte> array) noexcept {
  // The const_cast is sound: read_only_ guards every path that writes through base_.
  ByteBuffer b = wrap(std::span<std::byte>(const_cast<std::byte*>(array.data()), array.size()));
  b.read_only_ = true;
  return b;
}

ByteBuffer ByteBuffer::wrap(std::string_view text) noexcept {
  return wrap(std::as_bytes(std::span(text)));
}

ByteBuffer::ByteBuffer(ByteBuffer&& other) noexcept
    : storage_(std::move(other.storage_)),
      base_(std::exchange(other.base_, nullptr)),
      capacity_(std::exchange(other.capacity_, 0)),
      limit_(std::exchange(other.limit_, 0)),
      position_(std::exchange(other.position_, 0)),
      mark_(std::exchange(other.mark_, no_mark)),
      order_(other.order_),
      read_only_(other.read_only_),
      direct_(other.direct_) {}

ByteBuffer& ByteBuffer::operator=(ByteBuffer&& other) noexcept {
  if (this != &other) {
    storage_ = std::move(other.storage_);
    base_ = std::exchange(other.base_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
    limit_ = std::exchange(other.limit_, 0);
    position_ = std::exchange(other.position_, 0);
    mark_ = std::exchange(other.mark_, no_mark);
    order_ = other.order_;
    read_only_ = other.read_only_;
    direct_ = other.direct_;
  }
  return *this;
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

bool ByteBuffer::operator==(const ByteBuffer& other) const noexcept {
  return remaining() == other.remaining() &&
         (remaining() == 0 || std::memcmp(base_ + position_, other.base_ + other.position_,
                                          remaining()) == 0);
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

std::size_t ByteBuffer::hash_code() const noexcept {
  // Java's: h = 1; for i from limit-1 down to position: h = 31*h + (int)get(i) (signed bytes).
  std::int32_t h = 1;
  for (std::size_t i = limit_; i-- > position_;) {
    h = static_cast<std::int32_t>(31u * static_cast<std::uint32_t>(h) +
                                  static_cast<std::uint32_t>(static_cast<std::int8_t>(base_[i])));
  }
  return static_cast<std::size_t>(static_cast<std::uint32_t>(h));
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
  out += "         +-------------------------------------------------+\n"
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
