// niox::ByteBuffer — java.nio.ByteBuffer (JDK 17) for C++, with Java's names in snake_case.
//
// A ByteBuffer is a window of four indices over a run of bytes:
//
//        0 <= mark <= position <= limit <= capacity
//
//   +-----------------+---------------------+------------------+
//   |   already read  |  remaining()        |  beyond limit    |
//   |   (or written)  |  bytes() spans this |  (not readable)  |
//   +-----------------+---------------------+------------------+
//   0              position               limit           capacity
//
// Relative get/put move `position` and fail at `limit`; absolute ones take an index and never
// move it; `flip()` turns a filled buffer into one to drain, `compact()`/`clear()` the reverse.
// The mark, when set, is forgotten whenever position or limit drop below it.
//
// Storage.  The bytes belong to a shared, reference-counted block for buffers made with
// allocate()/allocate_direct(); every view derived from them (slice, duplicate,
// as_read_only_buffer, a copy) holds a reference, so memory lives as long as any view of it.
// wrap() views caller memory and owns nothing: the caller keeps that memory alive and in place
// for as long as any buffer (or any I/O operation given one) may use it.
//
// Value semantics.  Copying a ByteBuffer is duplicate(): shared content, own indices. Moving one
// is a few word copies and leaves the source empty (capacity 0).
//
// Threads.  Like Java's, a ByteBuffer is not synchronised; views of the same memory may be used
// on different threads only with external ordering. The reference count itself is atomic.
//
// Differences from Java (decided, see docs/buffer.md): derived buffers keep the parent's byte order;
// operator<=> compares remaining bytes as unsigned, like memcmp.
#pragma once

#include <niox/buffer/buffer_exceptions.hpp>

#include <bit>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

namespace niox {

enum class ByteOrder { big_endian, little_endian };

constexpr ByteOrder native_order() noexcept {
  return std::endian::native == std::endian::big ? ByteOrder::big_endian : ByteOrder::little_endian;
}

namespace detail {
// Cold, out-of-line throwers keep the inline fast paths small.
[[noreturn]] void throw_overflow();
[[noreturn]] void throw_underflow();
[[noreturn]] void throw_read_only();
[[noreturn]] void throw_index(std::size_t index, std::size_t size, std::size_t bound);
[[noreturn]] void throw_invalid_mark();
[[noreturn]] void throw_illegal_argument(const char* what);
// The zero-filled block behind allocate()/allocate_direct() (page-aligned when direct).
std::shared_ptr<std::byte> allocate_storage(std::size_t capacity, bool direct);

template <class T>
inline T byteswap(T v) noexcept {
  static_assert(std::is_integral_v<T>);
  if constexpr (sizeof(T) == 1) {
    return v;
  } else if constexpr (sizeof(T) == 2) {
    return static_cast<T>(__builtin_bswap16(static_cast<std::uint16_t>(v)));
  } else if constexpr (sizeof(T) == 4) {
    return static_cast<T>(__builtin_bswap32(static_cast<std::uint32_t>(v)));
  } else {
    return static_cast<T>(__builtin_bswap64(static_cast<std::uint64_t>(v)));
  }
}

// A contiguous range of std::byte other than the spans ByteBuffer::wrap takes directly.
template <class R>
concept wrappable_range = std::is_convertible_v<R&&, std::span<const std::byte>> &&
                          !std::is_same_v<std::remove_cvref_t<R>, std::span<std::byte>> &&
                          !std::is_same_v<std::remove_cvref_t<R>, std::span<const std::byte>>;

// The unsigned integer with the same width as T, used to move T's bytes.
template <class T>
using bits_t = std::conditional_t<sizeof(T) == 2, std::uint16_t,
                                  std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>;
}  // namespace detail

class ByteBuffer {
 public:
  // ---- Creation ---------------------------------------------------------------------------

  // A zero-filled buffer of `capacity` bytes owned by the returned buffer and its views.
  static ByteBuffer allocate(std::size_t capacity);
  // Like allocate(), but page-aligned, so it can back O_DIRECT file I/O and registered
  // io_uring buffers. is_direct() is true.
  static ByteBuffer allocate_direct(std::size_t capacity);
  // Views `array` without copying or owning it: capacity = array.size(), position 0.
  static ByteBuffer wrap(std::span<std::byte> array) noexcept;
  // Views `array` with position = offset and limit = offset + length (capacity = array.size()).
  // Throws IndexOutOfBoundsException when [offset, offset+length) is not inside `array`.
  static ByteBuffer wrap(std::span<std::byte> array, std::size_t offset, std::size_t length);
  // Read-only views of constant memory (Java's wrap of a CharSequence has this flavour).
  static ByteBuffer wrap(std::span<const std::byte> array) noexcept;
  static ByteBuffer wrap(std::span<const std::byte> array, std::size_t offset, std::size_t length);
  static ByteBuffer wrap(std::string_view text) noexcept;
  // Any contiguous range of std::byte (std::vector, std::array, a C array): writable when the
  // range is, read-only when it is const. Without this, such a range would match both span
  // overloads above. A temporary container is refused: the buffer would outlive its memory.
  template <class R>
  requires(detail::wrappable_range<R> &&
           (std::is_lvalue_reference_v<R> || std::ranges::borrowed_range<R>)) static ByteBuffer
      wrap(R&& array) {
    if constexpr (std::is_convertible_v<R&&, std::span<std::byte>>) {
      return wrap(std::span<std::byte>(array));
    } else {
      return wrap(std::span<const std::byte>(array));
    }
  }
  template <class R>
  requires(detail::wrappable_range<R> &&
           (std::is_lvalue_reference_v<R> || std::ranges::borrowed_range<R>)) static ByteBuffer
      wrap(R&& array, std::size_t offset, std::size_t length) {
    if constexpr (std::is_convertible_v<R&&, std::span<std::byte>>) {
      return wrap(std::span<std::byte>(array), offset, length);
    } else {
      return wrap(std::span<const std::byte>(array), offset, length);
    }
  }
  template <class R>
  requires(detail::wrappable_range<R> &&
           !(std::is_lvalue_reference_v<R> || std::ranges::borrowed_range<R>)) static ByteBuffer
      wrap(R&& array) = delete;
  template <class R>
  requires(detail::wrappable_range<R> &&
           !(std::is_lvalue_reference_v<R> || std::ranges::borrowed_range<R>)) static ByteBuffer
      wrap(R&& array, std::size_t offset, std::size_t length) = delete;
  static ByteBuffer wrap(std::string&& text) = delete;

  // An empty buffer (capacity 0).
  ByteBuffer() noexcept = default;
  // Copying is duplicate(): the copy shares content, has its own indices.
  ByteBuffer(const ByteBuffer&) = default;
  ByteBuffer& operator=(const ByteBuffer&) = default;
  // Moving leaves `other` as if default-constructed: empty (capacity 0), big-endian, writable,
  // not direct.
  ByteBuffer(ByteBuffer&& other) noexcept
      : storage_(std::move(other.storage_)),
        base_(std::exchange(other.base_, nullptr)),
        capacity_(std::exchange(other.capacity_, 0)),
        limit_(std::exchange(other.limit_, 0)),
        position_(std::exchange(other.position_, 0)),
        mark_(std::exchange(other.mark_, no_mark)),
        flags_(std::exchange(other.flags_, default_flags)) {}
  ByteBuffer& operator=(ByteBuffer&& other) noexcept {
    if (this != &other) {
      storage_ = std::move(other.storage_);
      base_ = std::exchange(other.base_, nullptr);
      capacity_ = std::exchange(other.capacity_, 0);
      limit_ = std::exchange(other.limit_, 0);
      position_ = std::exchange(other.position_, 0);
      mark_ = std::exchange(other.mark_, no_mark);
      flags_ = std::exchange(other.flags_, default_flags);
    }
    return *this;
  }
  ~ByteBuffer() = default;

  // ---- Indices ----------------------------------------------------------------------------

  std::size_t capacity() const noexcept { return capacity_; }
  std::size_t position() const noexcept { return position_; }
  std::size_t limit() const noexcept { return limit_; }
  std::size_t remaining() const noexcept { return limit_ - position_; }
  bool has_remaining() const noexcept { return position_ < limit_; }

  // Throws IllegalArgumentException if new_position > limit(). Drops a mark above it.
  ByteBuffer& position(std::size_t new_position) {
    if (new_position > limit_) [[unlikely]] {
      detail::throw_illegal_argument("newPosition > limit");
    }
    position_ = new_position;
    if (mark_ != no_mark && mark_ > new_position) {
      mark_ = no_mark;
    }
    return *this;
  }
  // Throws IllegalArgumentException if new_limit > capacity(). Pulls position down to it and
  // drops a mark above it.
  ByteBuffer& limit(std::size_t new_limit);

  ByteBuffer& mark() noexcept {
    mark_ = position_;
    return *this;
  }
  // Throws InvalidMarkException if no mark is set.
  ByteBuffer& reset();
  ByteBuffer& clear() noexcept {
    position_ = 0;
    limit_ = capacity_;
    mark_ = no_mark;
    return *this;
  }
  ByteBuffer& flip() noexcept {
    limit_ = position_;
    position_ = 0;
    mark_ = no_mark;
    return *this;
  }
  ByteBuffer& rewind() noexcept {
    position_ = 0;
    mark_ = no_mark;
    return *this;
  }
  // Moves [position, limit) to the start, position = remaining(), limit = capacity(), no mark.
  // Throws ReadOnlyBufferException on a read-only buffer.
  ByteBuffer& compact();

  bool is_read_only() const noexcept { return (flags_ & read_only_flag) != 0; }
  bool is_direct() const noexcept { return (flags_ & direct_flag) != 0; }
  ByteOrder order() const noexcept {
    constexpr ByteOrder other =
        native_order() == ByteOrder::big_endian ? ByteOrder::little_endian : ByteOrder::big_endian;
    return (flags_ & swap_flag) != 0 ? other : native_order();
  }
  ByteBuffer& order(ByteOrder bo) noexcept {
    flags_ =
        static_cast<std::uint8_t>(bo == native_order() ? flags_ & ~swap_flag : flags_ | swap_flag);
    return *this;
  }

  // ---- Views ------------------------------------------------------------------------------
  // All share content with this buffer, keep its byte order, read-only and direct flags.

  // [position, limit) as a new buffer: position 0, limit = capacity = remaining(), no mark.
  ByteBuffer slice() const;
  // [index, index+length) as a new buffer. Throws IndexOutOfBoundsException if that range is
  // not inside [0, limit()).
  ByteBuffer slice(std::size_t index, std::size_t length) const;
  // Same content and indices (mark included).
  ByteBuffer duplicate() const { return *this; }
  // A duplicate through which the content cannot be changed.
  ByteBuffer as_read_only_buffer() const {
    ByteBuffer b(*this);
    b.flags_ |= read_only_flag;
    return b;
  }

  // ---- Single bytes -----------------------------------------------------------------------

  // Relative: throws BufferUnderflowException at the limit.
  std::uint8_t get() {
    if (position_ >= limit_) [[unlikely]] {
      detail::throw_underflow();
    }
    return static_cast<std::uint8_t>(base_[position_++]);
  }
  // Absolute: throws IndexOutOfBoundsException unless index < limit().
  std::uint8_t get(std::size_t index) const {
    if (index >= limit_) [[unlikely]] {
      detail::throw_index(index, 1, limit_);
    }
    return static_cast<std::uint8_t>(base_[index]);
  }
  // Relative: throws ReadOnlyBufferException, then BufferOverflowException at the limit.
  ByteBuffer& put(std::uint8_t b) {
    check_writable();
    if (position_ >= limit_) [[unlikely]] {
      detail::throw_overflow();
    }
    base_[position_++] = static_cast<std::byte>(b);
    return *this;
  }
  // Absolute: throws ReadOnlyBufferException, then IndexOutOfBoundsException unless index < limit().
  ByteBuffer& put(std::size_t index, std::uint8_t b) {
    check_writable();
    if (index >= limit_) [[unlikely]] {
      detail::throw_index(index, 1, limit_);
    }
    base_[index] = static_cast<std::byte>(b);
    return *this;
  }

  // ---- Bulk -------------------------------------------------------------------------------

  // Relative: copies dst.size() bytes into dst. Throws BufferUnderflowException (moving
  // nothing) if fewer remain.
  ByteBuffer& get(std::span<std::byte> dst) {
    if (dst.size() > remaining()) [[unlikely]] {
      detail::throw_underflow();
    }
    copy_out(position_, dst);
    position_ += dst.size();
    return *this;
  }
  // Absolute (JDK 16): copies [index, index+dst.size()) into dst; position unchanged.
  const ByteBuffer& get(std::size_t index, std::span<std::byte> dst) const {
    check_range(index, dst.size());
    copy_out(index, dst);
    return *this;
  }
  ByteBuffer& get(std::size_t index, std::span<std::byte> dst) {
    check_range(index, dst.size());
    copy_out(index, dst);
    return *this;
  }
  // Relative: throws ReadOnlyBufferException, then BufferOverflowException (moving nothing) if
  // src does not fit in remaining().
  ByteBuffer& put(std::span<const std::byte> src) {
    check_writable();
    if (src.size() > remaining()) [[unlikely]] {
      detail::throw_overflow();
    }
    copy_in(position_, src);
    position_ += src.size();
    return *this;
  }
  ByteBuffer& put(std::string_view src) { return put(std::as_bytes(std::span(src))); }
  // Absolute (JDK 16): writes src at [index, index+src.size()); position unchanged.
  ByteBuffer& put(std::size_t index, std::span<const std::byte> src) {
    check_writable();
    check_range(index, src.size());
    copy_in(index, src);
    return *this;
  }
  // Drains src's remaining bytes into this buffer, advancing both positions. Throws
  // IllegalArgumentException if src is this very object, ReadOnlyBufferException, then
  // BufferOverflowException if they do not fit. Views of the same memory may overlap: the
  // copy behaves like memmove.
  ByteBuffer& put(ByteBuffer& src);
  ByteBuffer& put(ByteBuffer&& src) { return put(src); }
  // Absolute (JDK 16): copies src's [offset, offset+length) to [index, index+length); neither
  // position moves. Throws IndexOutOfBoundsException if either range is outside its buffer's
  // limit, and only then ReadOnlyBufferException (Java checks in that order here). src may be
  // this buffer or share its memory: the copy behaves like memmove.
  ByteBuffer& put(std::size_t index, const ByteBuffer& src, std::size_t offset, std::size_t length);

  // ---- Typed access -----------------------------------------------------------------------
  // In order(): big-endian unless changed. Relative forms throw BufferUnderflowException /
  // BufferOverflowException when fewer than sizeof(T) bytes remain; absolute forms throw
  // IndexOutOfBoundsException unless [index, index+sizeof(T)) lies below limit(). Puts check
  // read-only first.

  std::int16_t get_short() { return get_rel<std::int16_t>(); }
  std::int16_t get_short(std::size_t i) const { return get_abs<std::int16_t>(i); }
  ByteBuffer& put_short(std::int16_t v) { return put_rel(v); }
  ByteBuffer& put_short(std::size_t i, std::int16_t v) { return put_abs(i, v); }

  char16_t get_char() { return get_rel<char16_t>(); }
  char16_t get_char(std::size_t i) const { return get_abs<char16_t>(i); }
  ByteBuffer& put_char(char16_t v) { return put_rel(v); }
  ByteBuffer& put_char(std::size_t i, char16_t v) { return put_abs(i, v); }

  std::int32_t get_int() { return get_rel<std::int32_t>(); }
  std::int32_t get_int(std::size_t i) const { return get_abs<std::int32_t>(i); }
  ByteBuffer& put_int(std::int32_t v) { return put_rel(v); }
  ByteBuffer& put_int(std::size_t i, std::int32_t v) { return put_abs(i, v); }

  std::int64_t get_long() { return get_rel<std::int64_t>(); }
  std::int64_t get_long(std::size_t i) const { return get_abs<std::int64_t>(i); }
  ByteBuffer& put_long(std::int64_t v) { return put_rel(v); }
  ByteBuffer& put_long(std::size_t i, std::int64_t v) { return put_abs(i, v); }

  float get_float() { return get_rel<float>(); }
  float get_float(std::size_t i) const { return get_abs<float>(i); }
  ByteBuffer& put_float(float v) { return put_rel(v); }
  ByteBuffer& put_float(std::size_t i, float v) { return put_abs(i, v); }

  double get_double() { return get_rel<double>(); }
  double get_double(std::size_t i) const { return get_abs<double>(i); }
  ByteBuffer& put_double(double v) { return put_rel(v); }
  ByteBuffer& put_double(std::size_t i, double v) { return put_abs(i, v); }

  // ---- Comparison -------------------------------------------------------------------------

  // Java equals(): same remaining() and equal remaining bytes. Indices elsewhere don't matter.
  bool operator==(const ByteBuffer& other) const noexcept;
  // Remaining bytes compared as unsigned (memcmp), then by remaining(). Java compares signed.
  std::strong_ordering operator<=>(const ByteBuffer& other) const noexcept;
  // Java mismatch(): the relative index of the first differing remaining byte, or -1 if the
  // remaining contents are equal.
  std::ptrdiff_t mismatch(const ByteBuffer& other) const noexcept;
  // Java hashCode(), the same int Java computes: depends on the remaining bytes only.
  std::int32_t hash_code() const noexcept;

  // ---- Alignment (JDK 9) ------------------------------------------------------------------

  // The address of byte `index` modulo unit_size. Throws IllegalArgumentException unless
  // unit_size is a power of two. Unlike Java, unit sizes above 8 are allowed for non-direct
  // buffers too: their memory never moves.
  std::size_t alignment_offset(std::size_t index, std::size_t unit_size) const;
  // slice() of the largest unit_size-aligned part of [position, limit): position rounded up and
  // limit rounded down to an aligned address; empty if none. Throws like alignment_offset().
  ByteBuffer aligned_slice(std::size_t unit_size) const;

  // ---- Raw access for I/O -----------------------------------------------------------------
  // The spans alias this buffer's memory: valid while any buffer owning it lives (or, for a
  // wrapped buffer, while the caller's memory does).

  // [position, limit), for writing this buffer's content out.
  std::span<const std::byte> bytes() const noexcept { return {base_ + position_, remaining()}; }
  // [position, limit), for reading into this buffer. Throws ReadOnlyBufferException.
  std::span<std::byte> writable_bytes() {
    check_writable();
    return {base_ + position_, remaining()};
  }
  // [0, capacity), like Java's array() with array_offset() == 0. Throws ReadOnlyBufferException.
  std::span<std::byte> array() {
    check_writable();
    return {base_, capacity_};
  }
  // [0, capacity), read-only.
  std::span<const std::byte> array_view() const noexcept { return {base_, capacity_}; }
  // The remaining bytes as characters.
  std::string_view string_view() const noexcept {
    return {reinterpret_cast<const char*>(base_ + position_), remaining()};
  }

  // Whether some byte of [0, capacity) is also a byte of other's [0, capacity).
  bool shares_memory_with(const ByteBuffer& other) const noexcept;

  // Views `memory` (capacity = memory.size(), position 0) and shares ownership of `owner`, which
  // is released when the last view is gone. For memory that must outlive a scope but is not
  // malloc'ed: a file mapping (FileChannel::map), a registered I/O region.
  static ByteBuffer wrap_shared(std::span<std::byte> memory, std::shared_ptr<void> owner) noexcept;

 private:
  static constexpr std::size_t no_mark = static_cast<std::size_t>(-1);
  static constexpr std::uint8_t swap_flag = 1;
  static constexpr std::uint8_t read_only_flag = 2;
  static constexpr std::uint8_t direct_flag = 4;
  // Big-endian, writable, not direct.
  static constexpr std::uint8_t default_flags =
      native_order() == ByteOrder::big_endian ? 0 : swap_flag;

  // Creation is inline on purpose: a buffer whose address never leaves the function that made
  // it can then live in registers, indices included.
  ByteBuffer(std::shared_ptr<std::byte> storage, std::byte* base, std::size_t capacity,
             bool read_only, bool direct) noexcept
      : storage_(std::move(storage)),
        base_(base),
        capacity_(capacity),
        limit_(capacity),
        flags_(static_cast<std::uint8_t>(default_flags | (read_only ? read_only_flag : 0) |
                                         (direct ? direct_flag : 0))) {}
  static void check_wrap_range(std::size_t size, std::size_t offset, std::size_t length) {
    if (offset > size || length > size - offset) [[unlikely]] {
      detail::throw_index(offset, length, size);
    }
  }

  void check_writable() const {
    if ((flags_ & read_only_flag) != 0) [[unlikely]] {
      detail::throw_read_only();
    }
  }
  void check_range(std::size_t index, std::size_t n) const {
    if (index > limit_ || n > limit_ - index) [[unlikely]] {
      detail::throw_index(index, n, limit_);
    }
  }
  // memmove, not memcpy: the caller's span may be a view of this very memory (array(), a
  // wrapped array), where Java's System.arraycopy also behaves like memmove.
  void copy_out(std::size_t at, std::span<std::byte> dst) const noexcept {
    if (!dst.empty()) {
      std::memmove(dst.data(), base_ + at, dst.size());
    }
  }
  void copy_in(std::size_t at, std::span<const std::byte> src) noexcept {
    if (!src.empty()) {
      std::memmove(base_ + at, src.data(), src.size());
    }
  }

  template <class T>
  T load(std::size_t at) const noexcept {
    using U = detail::bits_t<T>;
    U u;
    std::memcpy(&u, base_ + at, sizeof(U));
    if ((flags_ & swap_flag) != 0) {
      u = detail::byteswap(u);
    }
    T v;
    std::memcpy(&v, &u, sizeof(T));
    return v;
  }
  template <class T>
  void store(std::size_t at, T v) noexcept {
    using U = detail::bits_t<T>;
    U u;
    std::memcpy(&u, &v, sizeof(T));
    if ((flags_ & swap_flag) != 0) {
      u = detail::byteswap(u);
    }
    std::memcpy(base_ + at, &u, sizeof(U));
  }
  template <class T>
  T get_rel() {
    if (limit_ - position_ < sizeof(T)) [[unlikely]] {
      detail::throw_underflow();
    }
    T v = load<T>(position_);
    position_ += sizeof(T);
    return v;
  }
  template <class T>
  T get_abs(std::size_t index) const {
    if (index > limit_ || limit_ - index < sizeof(T)) [[unlikely]] {
      detail::throw_index(index, sizeof(T), limit_);
    }
    return load<T>(index);
  }
  template <class T>
  ByteBuffer& put_rel(T v) {
    check_writable();
    if (limit_ - position_ < sizeof(T)) [[unlikely]] {
      detail::throw_overflow();
    }
    store<T>(position_, v);
    position_ += sizeof(T);
    return *this;
  }
  template <class T>
  ByteBuffer& put_abs(std::size_t index, T v) {
    check_writable();
    if (index > limit_ || limit_ - index < sizeof(T)) [[unlikely]] {
      detail::throw_index(index, sizeof(T), limit_);
    }
    store<T>(index, v);
    return *this;
  }

  // Owner of the storage (null for wrapped memory); base_ is index 0 of this view.
  std::shared_ptr<std::byte> storage_;
  std::byte* base_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t limit_ = 0;
  std::size_t position_ = 0;
  std::size_t mark_ = no_mark;
  // Byte order, read-only and direct in one byte, so that a typed put reads one field for both
  // its read-only check and its byte-order choice. swap_flag: order() is not native_order().
  std::uint8_t flags_ = default_flags;
};

inline ByteBuffer ByteBuffer::allocate(std::size_t capacity) {
  auto storage = detail::allocate_storage(capacity, false);
  std::byte* base = storage.get();
  return ByteBuffer(std::move(storage), base, capacity, false, false);
}

inline ByteBuffer ByteBuffer::allocate_direct(std::size_t capacity) {
  auto storage = detail::allocate_storage(capacity, true);
  std::byte* base = storage.get();
  return ByteBuffer(std::move(storage), base, capacity, false, true);
}

inline ByteBuffer ByteBuffer::wrap(std::span<std::byte> array) noexcept {
  return ByteBuffer(nullptr, array.data(), array.size(), false, false);
}

inline ByteBuffer ByteBuffer::wrap(std::span<std::byte> array, std::size_t offset,
                                   std::size_t length) {
  check_wrap_range(array.size(), offset, length);
  ByteBuffer b = wrap(array);
  b.position_ = offset;
  b.limit_ = offset + length;
  return b;
}

inline ByteBuffer ByteBuffer::wrap(std::span<const std::byte> array) noexcept {
  // The const_cast is sound: the read-only flag guards every path that writes through base_.
  return ByteBuffer(nullptr, const_cast<std::byte*>(array.data()), array.size(), true, false);
}

inline ByteBuffer ByteBuffer::wrap(std::span<const std::byte> array, std::size_t offset,
                                   std::size_t length) {
  check_wrap_range(array.size(), offset, length);
  ByteBuffer b = wrap(array);
  b.position_ = offset;
  b.limit_ = offset + length;
  return b;
}

inline ByteBuffer ByteBuffer::wrap(std::string_view text) noexcept {
  return wrap(std::as_bytes(std::span(text)));
}

// Netty-style pretty hex dump of buffer's remaining bytes: offset, 16 hex bytes, ASCII.
std::string hex_dump(const ByteBuffer& buffer);

}  // namespace niox

template <>
struct std::hash<niox::ByteBuffer> {
  std::size_t operator()(const niox::ByteBuffer& b) const noexcept {
    return static_cast<std::uint32_t>(b.hash_code());
  }
};

// Prints like Java's toString(): ByteBuffer[pos=0 lim=16 cap=16].
template <>
struct fmt::formatter<niox::ByteBuffer> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <class Ctx>
  auto format(const niox::ByteBuffer& b, Ctx& ctx) const {
    return fmt::format_to(ctx.out(), "ByteBuffer[pos={} lim={} cap={}]", b.position(), b.limit(),
                          b.capacity());
  }
};
