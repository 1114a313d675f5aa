// niox::ByteBuffer against the JDK 17 java.nio.ByteBuffer/Buffer specification: every method,
// every exception and which one wins when two rules are broken at once.
#include <niox/byte_buffer.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace {

using niox::BufferOverflowException;
using niox::BufferUnderflowException;
using niox::ByteBuffer;
using niox::ByteOrder;
using niox::IllegalArgumentException;
using niox::IndexOutOfBoundsException;
using niox::InvalidMarkException;
using niox::ReadOnlyBufferException;

constexpr std::size_t huge = std::numeric_limits<std::size_t>::max();

template <class... I>
std::vector<std::byte> bytes_of(I... v) {
  return {static_cast<std::byte>(v)...};
}

std::vector<std::byte> iota_bytes(std::size_t n, int first = 0) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = static_cast<std::byte>(first + static_cast<int>(i));
  }
  return v;
}

// The whole backing content, [0, capacity).
std::vector<std::byte> content(const ByteBuffer& b) {
  auto a = b.array_view();
  return {a.begin(), a.end()};
}

void expect_indices(const ByteBuffer& b, std::size_t pos, std::size_t lim, std::size_t cap) {
  EXPECT_EQ(b.position(), pos);
  EXPECT_EQ(b.limit(), lim);
  EXPECT_EQ(b.capacity(), cap);
  EXPECT_EQ(b.remaining(), lim - pos);
  EXPECT_EQ(b.has_remaining(), pos < lim);
}

// Whether reset() finds a mark, and if so where it puts position (restoring it afterwards).
std::optional<std::size_t> mark_of(ByteBuffer b) {
  try {
    b.reset();
  } catch (const InvalidMarkException&) {
    return std::nullopt;
  }
  return b.position();
}

// ---- Exceptions --------------------------------------------------------------------------

TEST(ByteBufferExceptions, HierarchyMatchesStandardExceptions) {
  static_assert(std::is_base_of_v<std::out_of_range, IndexOutOfBoundsException>);
  static_assert(std::is_base_of_v<std::invalid_argument, IllegalArgumentException>);
  static_assert(std::is_base_of_v<std::exception, BufferOverflowException>);
  static_assert(std::is_base_of_v<std::exception, BufferUnderflowException>);
  static_assert(std::is_base_of_v<std::logic_error, InvalidMarkException>);
  static_assert(std::is_base_of_v<std::logic_error, ReadOnlyBufferException>);
  // Distinct types: a handler for one never catches another by accident.
  static_assert(!std::is_base_of_v<BufferOverflowException, BufferUnderflowException>);
  static_assert(!std::is_base_of_v<BufferUnderflowException, BufferOverflowException>);

  auto b = ByteBuffer::allocate(4);
  EXPECT_THROW(b.get(4), std::out_of_range);
  EXPECT_THROW(b.position(5), std::invalid_argument);
  EXPECT_THROW(b.limit(5), std::invalid_argument);
  try {
    b.get_int(1);
    FAIL() << "no exception";
  } catch (const IndexOutOfBoundsException& e) {
    EXPECT_NE(std::string(e.what()).find("out of bounds"), std::string::npos) << e.what();
  }
  EXPECT_STREQ(BufferOverflowException().what(), "java.nio.BufferOverflowException");
  EXPECT_STREQ(BufferUnderflowException().what(), "java.nio.BufferUnderflowException");
  EXPECT_STREQ(InvalidMarkException().what(), "java.nio.InvalidMarkException");
  EXPECT_STREQ(ReadOnlyBufferException().what(), "java.nio.ReadOnlyBufferException");
}

// ---- Creation ----------------------------------------------------------------------------

TEST(ByteBufferCreate, AllocateIsZeroFilledBigEndianWritableHeap) {
  for (std::size_t cap : {1u, 7u, 16u, 4096u, 5000u}) {
    auto b = ByteBuffer::allocate(cap);
    expect_indices(b, 0, cap, cap);
    EXPECT_EQ(b.order(), ByteOrder::big_endian);
    EXPECT_FALSE(b.is_read_only());
    EXPECT_FALSE(b.is_direct());
    EXPECT_FALSE(mark_of(b));
    for (auto x : content(b)) {
      ASSERT_EQ(x, std::byte{0});
    }
  }
}

TEST(ByteBufferCreate, AllocateZero) {
  for (auto b : {ByteBuffer::allocate(0), ByteBuffer::allocate_direct(0)}) {
    expect_indices(b, 0, 0, 0);
    EXPECT_THROW(b.get(), BufferUnderflowException);
    EXPECT_THROW(b.put(std::uint8_t{1}), BufferOverflowException);
    EXPECT_THROW(b.get(0), IndexOutOfBoundsException);
    EXPECT_TRUE(b.bytes().empty());
    EXPECT_EQ(b.slice().capacity(), 0u);
    EXPECT_EQ(b, ByteBuffer::allocate(0));
  }
}

TEST(ByteBufferCreate, AllocateDirectIsPageAlignedZeroFilledDirect) {
  for (std::size_t cap : {1u, 100u, 4096u, 4097u, 65536u}) {
    auto b = ByteBuffer::allocate_direct(cap);
    expect_indices(b, 0, cap, cap);
    EXPECT_TRUE(b.is_direct());
    EXPECT_FALSE(b.is_read_only());
    EXPECT_EQ(b.order(), ByteOrder::big_endian);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.array_view().data()) % 4096, 0u);
    EXPECT_EQ(b.alignment_offset(0, 4096), 0u);
    for (auto x : content(b)) {
      ASSERT_EQ(x, std::byte{0});
    }
    // Every byte is usable (ASan would see an overrun).
    b.put(cap - 1, std::uint8_t{0xee});
    EXPECT_EQ(b.get(cap - 1), 0xee);
  }
}

TEST(ByteBufferCreate, AbsurdCapacityIsBadAllocNotATinyBlock) {
  for (std::size_t cap : {huge, huge - 1, static_cast<std::size_t>(PTRDIFF_MAX) + 1}) {
    EXPECT_THROW(ByteBuffer::allocate(cap), std::bad_alloc);
    EXPECT_THROW(ByteBuffer::allocate_direct(cap), std::bad_alloc);
  }
}

TEST(ByteBufferCreate, WrapViewsCallerMemoryWithoutCopy) {
  auto mem = iota_bytes(10);
  auto b = ByteBuffer::wrap(std::span<std::byte>(mem));
  expect_indices(b, 0, 10, 10);
  EXPECT_FALSE(b.is_read_only());
  EXPECT_FALSE(b.is_direct());
  EXPECT_EQ(b.array_view().data(), mem.data());
  mem[3] = std::byte{0x77};
  EXPECT_EQ(b.get(3), 0x77);
  b.put(4, std::uint8_t{0x66});
  EXPECT_EQ(mem[4], std::byte{0x66});
}

TEST(ByteBufferCreate, WrapWithOffsetSetsPositionAndLimitKeepsCapacity) {
  auto mem = iota_bytes(10);
  auto b = ByteBuffer::wrap(std::span<std::byte>(mem), 2, 5);
  expect_indices(b, 2, 7, 10);
  EXPECT_EQ(b.get(), 2);
  EXPECT_EQ(b.get(0), 0);  // Java's indices are relative to the array start, not to offset.
  EXPECT_THROW(b.get(7), IndexOutOfBoundsException);
  EXPECT_FALSE(mark_of(b));
  b.clear();
  expect_indices(b, 0, 10, 10);

  expect_indices(ByteBuffer::wrap(std::span<std::byte>(mem), 10, 0), 10, 10, 10);
  expect_indices(ByteBuffer::wrap(std::span<std::byte>(mem), 0, 10), 0, 10, 10);
}

TEST(ByteBufferCreate, WrapWithOffsetOutOfBoundsThrowsIndexOutOfBounds) {
  auto mem = iota_bytes(10);
  std::span<std::byte> s(mem);
  EXPECT_THROW(ByteBuffer::wrap(s, 11, 0), IndexOutOfBoundsException);
  EXPECT_THROW(ByteBuffer::wrap(s, 0, 11), IndexOutOfBoundsException);
  EXPECT_THROW(ByteBuffer::wrap(s, 5, 6), IndexOutOfBoundsException);
  EXPECT_THROW(ByteBuffer::wrap(s, 1, huge), IndexOutOfBoundsException);
  EXPECT_THROW(ByteBuffer::wrap(s, huge, 2), IndexOutOfBoundsException);
  std::span<const std::byte> cs(mem);
  EXPECT_THROW(ByteBuffer::wrap(cs, 5, 6), IndexOutOfBoundsException);
  EXPECT_THROW(ByteBuffer::wrap(cs, huge, huge), IndexOutOfBoundsException);
}

TEST(ByteBufferCreate, WrapOfConstMemoryIsReadOnly) {
  const auto mem = iota_bytes(8, 1);
  auto b = ByteBuffer::wrap(std::span<const std::byte>(mem));
  EXPECT_TRUE(b.is_read_only());
  expect_indices(b, 0, 8, 8);
  EXPECT_EQ(b.get_int(), 0x01020304);
  EXPECT_THROW(b.put(std::uint8_t{1}), ReadOnlyBufferException);
  EXPECT_THROW(b.put(0, std::uint8_t{1}), ReadOnlyBufferException);
  EXPECT_THROW(b.writable_bytes(), ReadOnlyBufferException);
  EXPECT_EQ(mem, iota_bytes(8, 1));

  auto o = ByteBuffer::wrap(std::span<const std::byte>(mem), 2, 3);
  EXPECT_TRUE(o.is_read_only());
  expect_indices(o, 2, 5, 8);

  auto t = ByteBuffer::wrap(std::string_view("hello"));
  EXPECT_TRUE(t.is_read_only());
  EXPECT_EQ(t.string_view(), "hello");
  EXPECT_THROW(t.put_short(1), ReadOnlyBufferException);
}

template <class T>
concept wrappable = requires(T&& t) {
  ByteBuffer::wrap(std::forward<T>(t));
};
template <class T>
concept wrappable_at = requires(T&& t) {
  ByteBuffer::wrap(std::forward<T>(t), 0, 0);
};
// Memory that dies at the end of the statement cannot be wrapped.
static_assert(wrappable<std::vector<std::byte>&>);
static_assert(wrappable<const std::vector<std::byte>&>);
static_assert(wrappable<std::array<std::byte, 4>&>);
static_assert(!wrappable<std::vector<std::byte>>);
static_assert(!wrappable<std::array<std::byte, 4>>);
static_assert(!wrappable_at<std::vector<std::byte>>);
static_assert(wrappable_at<std::vector<std::byte>&>);
static_assert(wrappable<std::span<std::byte>>);
static_assert(wrappable<std::string&>);
static_assert(!wrappable<std::string>);

TEST(ByteBufferCreate, WrapOfRangesPicksWritabilityFromConstness) {
  std::vector<std::byte> v = iota_bytes(4);
  auto bv = ByteBuffer::wrap(v);
  EXPECT_FALSE(bv.is_read_only());
  EXPECT_EQ(bv.array_view().data(), v.data());

  const std::vector<std::byte>& cv = v;
  auto bc = ByteBuffer::wrap(cv);
  EXPECT_TRUE(bc.is_read_only());

  std::array<std::byte, 6> a{};
  auto ba = ByteBuffer::wrap(a, 1, 4);
  expect_indices(ba, 1, 5, 6);
  ba.put(std::uint8_t{9});
  EXPECT_EQ(a[1], std::byte{9});

  std::byte raw[3] = {};
  EXPECT_EQ(ByteBuffer::wrap(raw).capacity(), 3u);
  EXPECT_THROW(ByteBuffer::wrap(v, 3, 2), IndexOutOfBoundsException);
}

// ---- Indices -----------------------------------------------------------------------------

TEST(ByteBufferIndices, PositionBeyondLimitIsIllegalArgument) {
  auto b = ByteBuffer::allocate(10);
  b.limit(6);
  EXPECT_THROW(b.position(7), IllegalArgumentException);
  EXPECT_THROW(b.position(huge), IllegalArgumentException);
  expect_indices(b, 0, 6, 10);
  b.position(6);
  expect_indices(b, 6, 6, 10);
}

TEST(ByteBufferIndices, PositionDropsOnlyAMarkAboveIt) {
  auto b = ByteBuffer::allocate(10);
  b.position(4).mark();
  b.position(4);  // mark == new position stays (Java: mark > newPosition drops it)
  EXPECT_EQ(mark_of(b), 4u);
  b.position(9);
  EXPECT_EQ(mark_of(b), 4u);
  b.position(3);
  EXPECT_FALSE(mark_of(b));
  EXPECT_THROW(b.reset(), InvalidMarkException);
}

TEST(ByteBufferIndices, LimitBeyondCapacityIsIllegalArgument) {
  auto b = ByteBuffer::allocate(10);
  b.position(3).mark();
  EXPECT_THROW(b.limit(11), IllegalArgumentException);
  EXPECT_THROW(b.limit(huge), IllegalArgumentException);
  expect_indices(b, 3, 10, 10);
  EXPECT_EQ(mark_of(b), 3u);
}

TEST(ByteBufferIndices, LimitPullsPositionDownAndDropsMarkAboveIt) {
  auto b = ByteBuffer::allocate(10);
  b.position(8).mark();
  b.limit(8);
  expect_indices(b, 8, 8, 10);
  EXPECT_EQ(mark_of(b), 8u);  // mark == new limit stays
  b.limit(5);
  expect_indices(b, 5, 5, 10);
  EXPECT_FALSE(mark_of(b));
  b.position(2).mark();
  b.limit(9);  // raising the limit moves nothing
  expect_indices(b, 2, 9, 10);
  EXPECT_EQ(mark_of(b), 2u);
  b.limit(0);
  expect_indices(b, 0, 0, 10);
  EXPECT_FALSE(mark_of(b));
}

TEST(ByteBufferIndices, MarkAndReset) {
  auto b = ByteBuffer::allocate(10);
  EXPECT_THROW(b.reset(), InvalidMarkException);
  b.position(2).mark().position(7);
  EXPECT_EQ(&b.reset(), &b);
  EXPECT_EQ(b.position(), 2u);
  b.reset();  // the mark survives reset
  EXPECT_EQ(b.position(), 2u);
  b.get();
  b.mark();
  b.get();
  b.reset();
  EXPECT_EQ(b.position(), 3u);
}

TEST(ByteBufferIndices, ClearFlipRewindCompactDropTheMark) {
  auto b = ByteBuffer::allocate(10);
  b.position(1).mark().position(4).limit(8);
  b.clear();
  expect_indices(b, 0, 10, 10);
  EXPECT_THROW(b.reset(), InvalidMarkException);

  b.position(1).mark().position(4).limit(8);
  b.flip();
  expect_indices(b, 0, 4, 10);
  EXPECT_THROW(b.reset(), InvalidMarkException);

  b.position(1).mark().position(3);
  b.rewind();
  expect_indices(b, 0, 4, 10);
  EXPECT_THROW(b.reset(), InvalidMarkException);

  b.position(0).mark();
  b.compact();
  EXPECT_THROW(b.reset(), InvalidMarkException);
}

TEST(ByteBufferIndices, ClearFlipRewindDoNotTouchContent) {
  auto mem = iota_bytes(6, 1);
  auto b = ByteBuffer::wrap(std::span<std::byte>(mem));
  b.position(3).flip();
  expect_indices(b, 0, 3, 6);
  b.flip();  // flipping twice gives an empty buffer, as in Java
  expect_indices(b, 0, 0, 6);
  b.clear().rewind();
  EXPECT_EQ(mem, iota_bytes(6, 1));
}

TEST(ByteBufferIndices, CompactMovesRemainingToStart) {
  auto mem = iota_bytes(10, 1);
  auto b = ByteBuffer::wrap(std::span<std::byte>(mem));
  b.position(3).limit(7);
  EXPECT_EQ(&b.compact(), &b);
  expect_indices(b, 4, 10, 10);
  EXPECT_EQ(mem, bytes_of(4, 5, 6, 7, 5, 6, 7, 8, 9, 10));

  b.clear().compact();  // nothing consumed: no move, position = remaining
  expect_indices(b, 10, 10, 10);
  b.flip().position(10).compact();  // everything consumed
  expect_indices(b, 0, 10, 10);
  EXPECT_EQ(mem, bytes_of(4, 5, 6, 7, 5, 6, 7, 8, 9, 10));
}

TEST(ByteBufferIndices, CompactOnReadOnlyThrowsAndChangesNothing) {
  auto b = ByteBuffer::allocate(8);
  b.put(std::uint8_t{1}).put(std::uint8_t{2}).flip().get();
  b.mark();
  auto r = b.as_read_only_buffer();
  EXPECT_THROW(r.compact(), ReadOnlyBufferException);
  expect_indices(r, 1, 2, 8);
  EXPECT_EQ(mark_of(r), 1u);
  EXPECT_EQ(content(r)[0], std::byte{1});
}

TEST(ByteBufferIndices, OrderDefaultsToBigEndianAndIsPerBuffer) {
  auto b = ByteBuffer::allocate(4);
  EXPECT_EQ(b.order(), ByteOrder::big_endian);
  EXPECT_EQ(&b.order(ByteOrder::little_endian), &b);
  EXPECT_EQ(b.order(), ByteOrder::little_endian);
  auto c = ByteBuffer::allocate(4);
  EXPECT_EQ(c.order(), ByteOrder::big_endian);
  EXPECT_EQ(niox::native_order(), std::endian::native == std::endian::little
                                      ? ByteOrder::little_endian
                                      : ByteOrder::big_endian);
}

// ---- Views -------------------------------------------------------------------------------

TEST(ByteBufferViews, SliceCoversRemainingAndSharesContent) {
  auto b = ByteBuffer::allocate(10);
  b.order(ByteOrder::little_endian);
  b.position(2).mark().position(3).limit(8);
  auto s = b.slice();
  expect_indices(s, 0, 5, 5);
  EXPECT_FALSE(mark_of(s));
  EXPECT_EQ(s.order(), ByteOrder::little_endian);  // decided: derived buffers keep the order
  EXPECT_FALSE(s.is_read_only());
  EXPECT_FALSE(s.is_direct());
  s.put(0, std::uint8_t{0x11});
  EXPECT_EQ(b.get(3), 0x11);
  b.put(7, std::uint8_t{0x22});
  EXPECT_EQ(s.get(4), 0x22);
  EXPECT_THROW(s.get(5), IndexOutOfBoundsException);  // not b's byte 8
  // The parent's indices are untouched.
  expect_indices(b, 3, 8, 10);
  EXPECT_EQ(mark_of(b), 2u);

  auto ss = s.slice(1, 3).slice();
  expect_indices(ss, 0, 3, 3);
  ss.put(0, std::uint8_t{0x33});
  EXPECT_EQ(b.get(4), 0x33);
}

TEST(ByteBufferViews, SliceKeepsDirectAndReadOnly) {
  auto d = ByteBuffer::allocate_direct(64);
  d.position(8);
  EXPECT_TRUE(d.slice().is_direct());
  EXPECT_TRUE(d.slice(0, 4).is_direct());
  EXPECT_TRUE(d.duplicate().is_direct());
  EXPECT_TRUE(d.as_read_only_buffer().is_direct());
  auto r = d.as_read_only_buffer();
  EXPECT_TRUE(r.slice().is_read_only());
  EXPECT_TRUE(r.slice(1, 2).is_read_only());
  EXPECT_TRUE(r.duplicate().is_read_only());
  auto copy = r;  // a copy is a duplicate: read-only too
  EXPECT_TRUE(copy.is_read_only());
}

TEST(ByteBufferViews, SliceWithIndexIsBoundedByLimitNotCapacity) {
  auto b = ByteBuffer::allocate(10);
  b.position(6).limit(8);
  auto s = b.slice(2, 6);  // absolute: ignores position
  expect_indices(s, 0, 6, 6);
  s.put(0, std::uint8_t{5});
  EXPECT_EQ(b.get(2), 5);
  EXPECT_EQ(b.slice(8, 0).capacity(), 0u);
  EXPECT_THROW(b.slice(2, 7), IndexOutOfBoundsException);
  EXPECT_THROW(b.slice(9, 0), IndexOutOfBoundsException);
  EXPECT_THROW(b.slice(8, 1), IndexOutOfBoundsException);
  EXPECT_THROW(b.slice(1, huge), IndexOutOfBoundsException);
  EXPECT_THROW(b.slice(huge, 2), IndexOutOfBoundsException);
  EXPECT_THROW(b.slice(huge, huge), IndexOutOfBoundsException);
}

TEST(ByteBufferViews, DuplicateKeepsIndicesMarkOrderAndSharesContent) {
  auto b = ByteBuffer::allocate(10);
  b.order(ByteOrder::little_endian);
  b.position(2).mark().position(5).limit(9);
  auto d = b.duplicate();
  expect_indices(d, 5, 9, 10);
  EXPECT_EQ(mark_of(d), 2u);
  EXPECT_EQ(d.order(), ByteOrder::little_endian);
  d.put(std::uint8_t{0x44});
  EXPECT_EQ(b.get(5), 0x44);
  EXPECT_EQ(b.position(), 5u);  // own indices
  d.order(ByteOrder::big_endian);
  EXPECT_EQ(b.order(), ByteOrder::little_endian);  // own order

  ByteBuffer c(b);  // copying is duplicate()
  expect_indices(c, 5, 9, 10);
  EXPECT_EQ(mark_of(c), 2u);
  c.put(std::uint8_t{0x55});
  EXPECT_EQ(b.get(5), 0x55);
  ByteBuffer e;
  e = b;
  expect_indices(e, 5, 9, 10);
  EXPECT_EQ(e.array_view().data(), b.array_view().data());
}

TEST(ByteBufferViews, ReadOnlyViewSharesContentKeepsIndicesRefusesEveryChange) {
  auto b = ByteBuffer::allocate(16);
  b.order(ByteOrder::little_endian);
  b.position(2).mark().position(4).limit(12);
  auto r = b.as_read_only_buffer();
  EXPECT_TRUE(r.is_read_only());
  EXPECT_FALSE(b.is_read_only());
  expect_indices(r, 4, 12, 16);
  EXPECT_EQ(mark_of(r), 2u);
  EXPECT_EQ(r.order(), ByteOrder::little_endian);
  b.put(4, std::uint8_t{0x99});
  EXPECT_EQ(r.get(4), 0x99);  // changes through the writable buffer are visible

  auto src = ByteBuffer::allocate(1);
  std::array<std::byte, 1> one{};
  EXPECT_THROW(r.put(std::uint8_t{1}), ReadOnlyBufferException);
  EXPECT_THROW(r.put(4, std::uint8_t{1}), ReadOnlyBufferException);
  EXPECT_THROW(r.put(std::span<const std::byte>(one)), ReadOnlyBufferException);
  EXPECT_THROW(r.put(4, std::span<const std::byte>(one)), ReadOnlyBufferException);
  EXPECT_THROW(r.put(std::string_view("x")), ReadOnlyBufferException);
  EXPECT_THROW(r.put(src), ReadOnlyBufferException);
  EXPECT_THROW(r.put(4, src, 0, 1), ReadOnlyBufferException);
  EXPECT_THROW(r.put_short(1), ReadOnlyBufferException);
  EXPECT_THROW(r.put_short(4, 1), ReadOnlyBufferException);
  EXPECT_THROW(r.put_char(u'a'), ReadOnlyBufferException);
  EXPECT_THROW(r.put_char(4, u'a'), ReadOnlyBufferException);
  EXPECT_THROW(r.put_int(1), ReadOnlyBufferException);
  EXPECT_THROW(r.put_int(4, 1), ReadOnlyBufferException);
  EXPECT_THROW(r.put_long(1), ReadOnlyBufferException);
  EXPECT_THROW(r.put_long(4, 1), ReadOnlyBufferException);
  EXPECT_THROW(r.put_float(1), ReadOnlyBufferException);
  EXPECT_THROW(r.put_float(4, 1), ReadOnlyBufferException);
  EXPECT_THROW(r.put_double(1), ReadOnlyBufferException);
  EXPECT_THROW(r.put_double(4, 1), ReadOnlyBufferException);
  EXPECT_THROW(r.compact(), ReadOnlyBufferException);
  EXPECT_THROW(r.writable_bytes(), ReadOnlyBufferException);
  EXPECT_THROW(r.array(), ReadOnlyBufferException);
  expect_indices(r, 4, 12, 16);
  EXPECT_EQ(src.position(), 0u);  // a refused put(ByteBuffer&) does not drain src
  b.clear();
  std::vector<std::byte> expected(16);
  expected[4] = std::byte{0x99};
  EXPECT_EQ(content(b), expected);

  // Reads and index changes work.
  EXPECT_EQ(r.get(), 0x99);
  r.position(4);
  EXPECT_EQ(r.get_int(), 0x99);
  r.flip().clear().rewind().mark().reset();
}

TEST(ByteBufferViews, ASliceOutlivesItsOriginal) {
  ByteBuffer s;
  ByteBuffer r;
  ByteBuffer d;
  {
    auto b = ByteBuffer::allocate_direct(100);
    b.put_int(0x01020304);
    s = b.slice();
    r = b.as_read_only_buffer();
    d = ByteBuffer::allocate(8).slice(2, 4);
  }
  // Every view still owns the memory (ASan reports a use-after-free otherwise).
  s.put_long(0, 0x1122334455667788);
  EXPECT_EQ(s.get_long(0), 0x1122334455667788);
  EXPECT_EQ(r.get_int(0), 0x01020304);
  EXPECT_EQ(r.get(4), 0x11);
  d.put_int(0, -1);
  EXPECT_EQ(d.get_int(0), -1);
  s = ByteBuffer();
  EXPECT_EQ(r.get(99), 0);  // the last owner keeps it alive
}

TEST(ByteBufferViews, SharesMemoryWith) {
  auto b = ByteBuffer::allocate(16);
  EXPECT_TRUE(b.shares_memory_with(b.slice(4, 4)));
  EXPECT_TRUE(b.slice(0, 8).shares_memory_with(b.slice(7, 2)));
  EXPECT_FALSE(b.slice(0, 8).shares_memory_with(b.slice(8, 8)));
  EXPECT_FALSE(b.shares_memory_with(ByteBuffer::allocate(16)));
  EXPECT_FALSE(b.shares_memory_with(ByteBuffer()));
}

// ---- Single bytes ------------------------------------------------------------------------

TEST(ByteBufferBytes, RelativeGetPutMovePositionAndStopAtLimit) {
  auto b = ByteBuffer::allocate(4);
  b.limit(2);
  EXPECT_EQ(&b.put(std::uint8_t{0xfe}), &b);
  b.put(std::uint8_t{0x01});
  EXPECT_THROW(b.put(std::uint8_t{2}), BufferOverflowException);
  expect_indices(b, 2, 2, 4);
  EXPECT_EQ(content(b), bytes_of(0xfe, 1, 0, 0));
  b.flip();
  EXPECT_EQ(b.get(), 0xfe);  // unsigned, unlike Java's signed byte
  EXPECT_EQ(b.get(), 0x01);
  EXPECT_THROW(b.get(), BufferUnderflowException);
  expect_indices(b, 2, 2, 4);
}

TEST(ByteBufferBytes, AbsoluteGetPutCheckAgainstLimitAndKeepPosition) {
  auto b = ByteBuffer::allocate(8);
  b.position(1).limit(5);
  EXPECT_EQ(&b.put(4, std::uint8_t{0x80}), &b);
  EXPECT_EQ(b.get(4), 0x80);
  b.put(0, std::uint8_t{7});  // below position is fine
  EXPECT_EQ(b.get(0), 7);
  EXPECT_THROW(b.get(5), IndexOutOfBoundsException);  // inside capacity, beyond limit
  EXPECT_THROW(b.put(5, std::uint8_t{1}), IndexOutOfBoundsException);
  EXPECT_THROW(b.get(huge), IndexOutOfBoundsException);
  EXPECT_THROW(b.put(huge, std::uint8_t{1}), IndexOutOfBoundsException);
  expect_indices(b, 1, 5, 8);
  EXPECT_EQ(content(b), bytes_of(7, 0, 0, 0, 0x80, 0, 0, 0));
}

// ---- Exception precedence ----------------------------------------------------------------

TEST(ByteBufferPrecedence, ReadOnlyComesBeforeOverflowAndIndex) {
  auto full = ByteBuffer::allocate(4);
  full.position(4);
  auto r = full.as_read_only_buffer();
  std::array<std::byte, 8> big{};
  auto src = ByteBuffer::allocate(8);
  EXPECT_THROW(r.put(std::uint8_t{1}), ReadOnlyBufferException);
  EXPECT_THROW(r.put(100, std::uint8_t{1}), ReadOnlyBufferException);
  EXPECT_THROW(r.put(huge, std::uint8_t{1}), ReadOnlyBufferException);
  EXPECT_THROW(r.put(std::span<const std::byte>(big)), ReadOnlyBufferException);
  EXPECT_THROW(r.put(100, std::span<const std::byte>(big)), ReadOnlyBufferException);
  EXPECT_THROW(r.put(src), ReadOnlyBufferException);
  EXPECT_THROW(r.put_int(1), ReadOnlyBufferException);
  EXPECT_THROW(r.put_int(huge - 1, 1), ReadOnlyBufferException);
  EXPECT_THROW(r.put_long(3, 1), ReadOnlyBufferException);
  EXPECT_THROW(r.put_double(2.0), ReadOnlyBufferException);
}

TEST(ByteBufferPrecedence, PutSelfIsIllegalArgumentBeforeAnythingElse) {
  auto b = ByteBuffer::allocate(4);
  EXPECT_THROW(b.put(b), IllegalArgumentException);
  auto r = b.as_read_only_buffer();
  EXPECT_THROW(r.put(r), IllegalArgumentException);  // before ReadOnly
  b.position(4);
  EXPECT_THROW(b.put(b), IllegalArgumentException);  // also with nothing to copy
  expect_indices(b, 4, 4, 4);
}

TEST(ByteBufferPrecedence, AbsoluteBufferPutChecksIndicesBeforeReadOnly) {
  // JDK 17 put(int, ByteBuffer, int, int) checks both ranges, then read-only.
  auto r = ByteBuffer::allocate(4).as_read_only_buffer();
  auto src = ByteBuffer::allocate(4);
  EXPECT_THROW(r.put(3, src, 0, 2), IndexOutOfBoundsException);
  EXPECT_THROW(r.put(0, src, 3, 2), IndexOutOfBoundsException);
  EXPECT_THROW(r.put(0, src, 0, 2), ReadOnlyBufferException);
}

// ---- Bulk --------------------------------------------------------------------------------

TEST(ByteBufferBulk, RelativeGetCopiesAndAdvances) {
  auto mem = iota_bytes(10, 1);
  auto b = ByteBuffer::wrap(std::span<std::byte>(mem));
  b.position(2).limit(8);
  std::array<std::byte, 4> dst{};
  EXPECT_EQ(&b.get(std::span<std::byte>(dst)), &b);
  EXPECT_EQ(std::vector<std::byte>(dst.begin(), dst.end()), bytes_of(3, 4, 5, 6));
  expect_indices(b, 6, 8, 10);
  b.get(std::span<std::byte>());  // empty is fine, even at the limit
  b.position(8).get(std::span<std::byte>());
  expect_indices(b, 8, 8, 10);
}

TEST(ByteBufferBulk, RelativeGetUnderflowMovesNothing) {
  auto mem = iota_bytes(10, 1);
  auto b = ByteBuffer::wrap(std::span<std::byte>(mem));
  b.position(5).limit(8).mark();
  std::array<std::byte, 4> dst{};
  EXPECT_THROW(b.get(std::span<std::byte>(dst)), BufferUnderflowException);
  expect_indices(b, 5, 8, 10);
  EXPECT_EQ(mark_of(b), 5u);
  EXPECT_EQ(dst, (std::array<std::byte, 4>{}));
}

TEST(ByteBufferBulk, AbsoluteGetKeepsPositionAndChecksLimit) {
  auto mem = iota_bytes(10, 1);
  auto b = ByteBuffer::wrap(std::span<std::byte>(mem));
  b.position(7).limit(8);
  std::array<std::byte, 3> dst{};
  EXPECT_EQ(&b.get(5, std::span<std::byte>(dst)), &b);
  EXPECT_EQ(std::vector<std::byte>(dst.begin(), dst.end()), bytes_of(6, 7, 8));
  expect_indices(b, 7, 8, 10);
  dst = {};
  EXPECT_THROW(b.get(6, std::span<std::byte>(dst)), IndexOutOfBoundsException);
  EXPECT_THROW(b.get(huge - 1, std::span<std::byte>(dst)), IndexOutOfBoundsException);
  EXPECT_THROW(b.get(9, std::span<std::byte>()), IndexOutOfBoundsException);
  b.get(8, std::span<std::byte>());
  const ByteBuffer& cb = b;
  cb.get(0, std::span<std::byte>(dst));
  EXPECT_EQ(std::vector<std::byte>(dst.begin(), dst.end()), bytes_of(1, 2, 3));
  expect_indices(b, 7, 8, 10);
}

TEST(ByteBufferBulk, BulkCopiesToAndFromTheBuffersOwnMemoryOverlap) {
  auto b = ByteBuffer::allocate(8);
  b.put(std::span<const std::byte>(iota_bytes(8, 1))).clear();
  b.position(2).get(b.array().subspan(0, 4));  // reads [2, 6) into [0, 4)
  EXPECT_EQ(content(b), bytes_of(3, 4, 5, 6, 5, 6, 7, 8));
  expect_indices(b, 6, 8, 8);
  b.get(1, b.array().subspan(2, 5));  // reads [1, 6) into [2, 7)
  EXPECT_EQ(content(b), bytes_of(3, 4, 4, 5, 6, 5, 6, 8));
  b.position(3).put(std::span<const std::byte>(b.array().subspan(0, 5)));  // [0, 5) to [3, 8)
  EXPECT_EQ(content(b), bytes_of(3, 4, 4, 3, 4, 4, 5, 6));
  b.put(0, std::span<const std::byte>(b.array().subspan(2, 6)));
  EXPECT_EQ(content(b), bytes_of(4, 3, 4, 4, 5, 6, 5, 6));
}

TEST(ByteBufferBulk, RelativePutCopiesAdvancesOverflowMovesNothing) {
  auto b = ByteBuffer::allocate(8);
  b.position(1).limit(6);
  auto src = bytes_of(9, 8, 7);
  EXPECT_EQ(&b.put(std::span<const std::byte>(src)), &b);
  expect_indices(b, 4, 6, 8);
  EXPECT_THROW(b.put(std::span<const std::byte>(src)), BufferOverflowException);
  expect_indices(b, 4, 6, 8);
  EXPECT_EQ(content(b), bytes_of(0, 9, 8, 7, 0, 0, 0, 0));
  b.put(std::string_view("ab"));
  expect_indices(b, 6, 6, 8);
  EXPECT_EQ(content(b), bytes_of(0, 9, 8, 7, 'a', 'b', 0, 0));
  b.put(std::span<const std::byte>());
  EXPECT_THROW(b.put(std::string_view("c")), BufferOverflowException);
}

TEST(ByteBufferBulk, AbsolutePutKeepsPositionAndChecksLimit) {
  auto b = ByteBuffer::allocate(8);
  b.position(2).limit(6);
  auto src = bytes_of(1, 2, 3);
  EXPECT_EQ(&b.put(3, std::span<const std::byte>(src)), &b);
  expect_indices(b, 2, 6, 8);
  EXPECT_EQ(content(b), bytes_of(0, 0, 0, 1, 2, 3, 0, 0));
  EXPECT_THROW(b.put(4, std::span<const std::byte>(src)), IndexOutOfBoundsException);
  EXPECT_THROW(b.put(huge - 1, std::span<const std::byte>(src)), IndexOutOfBoundsException);
  EXPECT_THROW(b.put(7, std::span<const std::byte>()), IndexOutOfBoundsException);
  EXPECT_EQ(content(b), bytes_of(0, 0, 0, 1, 2, 3, 0, 0));
  b.put(6, std::span<const std::byte>());
}

TEST(ByteBufferBulk, PutBufferDrainsSource) {
  auto dst = ByteBuffer::allocate(8);
  auto mem = iota_bytes(6, 1);
  auto src = ByteBuffer::wrap(std::span<std::byte>(mem), 1, 3);
  dst.position(2);
  EXPECT_EQ(&dst.put(src), &dst);
  expect_indices(dst, 5, 8, 8);
  expect_indices(src, 4, 4, 6);
  EXPECT_EQ(content(dst), bytes_of(0, 0, 2, 3, 4, 0, 0, 0));
  dst.put(src);  // nothing left: no change
  expect_indices(dst, 5, 8, 8);
  // Read-only sources are fine; so are temporaries.
  dst.put(ByteBuffer::wrap(std::string_view("xyz")));
  expect_indices(dst, 8, 8, 8);
}

TEST(ByteBufferBulk, PutBufferOverflowMovesNothing) {
  auto dst = ByteBuffer::allocate(4);
  dst.position(2).mark();
  auto src = ByteBuffer::allocate(3);
  src.put(0, std::uint8_t{5}).position(0);
  EXPECT_THROW(dst.put(src), BufferOverflowException);
  expect_indices(dst, 2, 4, 4);
  expect_indices(src, 0, 3, 3);
  EXPECT_EQ(mark_of(dst), 2u);
  EXPECT_EQ(content(dst), bytes_of(0, 0, 0, 0));
}

TEST(ByteBufferBulk, PutBufferBetweenOverlappingViewsIsMemmove) {
  // Forward: destination after source.
  {
    auto mem = iota_bytes(10, 1);
    auto a = ByteBuffer::wrap(std::span<std::byte>(mem));
    auto src = a.duplicate();
    src.limit(6);   // [0, 6)
    a.position(2);  // into [2, 8)
    a.put(src);
    EXPECT_EQ(mem, bytes_of(1, 2, 1, 2, 3, 4, 5, 6, 9, 10));
    expect_indices(a, 8, 10, 10);
    expect_indices(src, 6, 6, 10);
  }
  // Backward: destination before source, through slices of an allocated buffer.
  {
    auto b = ByteBuffer::allocate(10);
    b.put(std::span<const std::byte>(iota_bytes(10, 1))).clear();
    auto src = b.slice(3, 6);
    auto dst = b.slice(1, 8);
    dst.put(src);
    EXPECT_EQ(content(b), bytes_of(1, 4, 5, 6, 7, 8, 9, 8, 9, 10));
  }
  // Same position: a no-op copy.
  {
    auto b = ByteBuffer::allocate(4);
    b.put_int(0, 0x0a0b0c0d);
    auto d = b.duplicate();
    b.put(d);
    EXPECT_EQ(b.get_int(0), 0x0a0b0c0d);
  }
}

TEST(ByteBufferBulk, AbsolutePutBuffer) {
  auto dst = ByteBuffer::allocate(8);
  dst.position(1).limit(7);
  auto mem = iota_bytes(6, 1);
  auto src = ByteBuffer::wrap(std::span<std::byte>(mem));
  src.position(5).limit(5);
  EXPECT_EQ(&dst.put(4, src, 1, 3), &dst);  // src's position/limit... only limit bounds it
  EXPECT_EQ(content(dst), bytes_of(0, 0, 0, 0, 2, 3, 4, 0));
  expect_indices(dst, 1, 7, 8);
  expect_indices(src, 5, 5, 6);
  EXPECT_THROW(dst.put(5, src, 0, 3), IndexOutOfBoundsException);  // 5+3 > limit 7
  EXPECT_THROW(dst.put(0, src, 3, 3), IndexOutOfBoundsException);  // 3+3 > src limit 5
  EXPECT_THROW(dst.put(huge, src, 0, 1), IndexOutOfBoundsException);
  EXPECT_THROW(dst.put(0, src, 1, huge), IndexOutOfBoundsException);
  dst.put(7, src, 5, 0);
  // Itself, overlapping: memmove.
  dst.put(0, dst, 4, 3);
  EXPECT_EQ(content(dst), bytes_of(2, 3, 4, 0, 2, 3, 4, 0));
  dst.put(1, dst, 0, 4);
  EXPECT_EQ(content(dst), bytes_of(2, 2, 3, 4, 0, 3, 4, 0));
}

// ---- Typed access ------------------------------------------------------------------------

// One struct per Java primitive, so a typed test runs the same checks on all six.
#define NIOX_TYPED_OPS(T, Name, sample_value, ...)                                           \
  struct Name##Ops {                                                                         \
    using type = T;                                                                          \
    static constexpr const char* name = #Name;                                               \
    static T sample() { return sample_value; }                                               \
    static std::vector<std::byte> sample_big_endian() { return bytes_of(__VA_ARGS__); }      \
    static T get(ByteBuffer& b) { return b.get_##Name(); }                                   \
    static T get(const ByteBuffer& b, std::size_t i) { return b.get_##Name(i); }             \
    static ByteBuffer& put(ByteBuffer& b, T v) { return b.put_##Name(v); }                   \
    static ByteBuffer& put(ByteBuffer& b, std::size_t i, T v) { return b.put_##Name(i, v); } \
  };

NIOX_TYPED_OPS(std::int16_t, short, static_cast<std::int16_t>(0xA1B2), 0xA1, 0xB2)
NIOX_TYPED_OPS(char16_t, char, u'\uC3D4', 0xC3, 0xD4)
NIOX_TYPED_OPS(std::int32_t, int, static_cast<std::int32_t>(0x81234567), 0x81, 0x23, 0x45, 0x67)
NIOX_TYPED_OPS(std::int64_t, long, static_cast<std::int64_t>(0x8877665544332211), 0x88, 0x77, 0x66,
               0x55, 0x44, 0x33, 0x22, 0x11)
NIOX_TYPED_OPS(float, float, std::bit_cast<float>(0xC0490FDBu), 0xC0, 0x49, 0x0F, 0xDB)
NIOX_TYPED_OPS(double, double, std::bit_cast<double>(0x400921FB54442D18ull), 0x40, 0x09, 0x21, 0xFB,
               0x54, 0x44, 0x2D, 0x18)
#undef NIOX_TYPED_OPS

template <class T>
bool same_bits(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    return std::bit_cast<U>(a) == std::bit_cast<U>(b);
  } else {
    return a == b;
  }
}

template <class Ops>
class ByteBufferTyped : public ::testing::Test {};
using AllTypes = ::testing::Types<shortOps, charOps, intOps, longOps, floatOps, doubleOps>;
TYPED_TEST_SUITE(ByteBufferTyped, AllTypes);

template <class Ops>
std::vector<std::byte> sample_bytes(ByteOrder order) {
  auto v = Ops::sample_big_endian();
  if (order == ByteOrder::little_endian) {
    std::reverse(v.begin(), v.end());
  }
  return v;
}

TYPED_TEST(ByteBufferTyped, RelativePutWritesExactBytesInEitherOrder) {
  using Ops = TypeParam;
  constexpr std::size_t n = sizeof(typename Ops::type);
  for (auto order : {ByteOrder::big_endian, ByteOrder::little_endian}) {
    SCOPED_TRACE(order == ByteOrder::big_endian ? "big-endian" : "little-endian");
    auto b = ByteBuffer::allocate(n + 3);
    b.order(order).position(1);
    EXPECT_EQ(&Ops::put(b, Ops::sample()), &b);
    expect_indices(b, 1 + n, n + 3, n + 3);
    std::vector<std::byte> expected(n + 3);
    auto s = sample_bytes<Ops>(order);
    std::copy(s.begin(), s.end(), expected.begin() + 1);
    EXPECT_EQ(content(b), expected);

    b.position(1);
    EXPECT_TRUE(same_bits(Ops::get(b), Ops::sample()));
    expect_indices(b, 1 + n, n + 3, n + 3);
  }
}

TYPED_TEST(ByteBufferTyped, AbsolutePutWritesExactBytesAndKeepsPosition) {
  using Ops = TypeParam;
  constexpr std::size_t n = sizeof(typename Ops::type);
  for (auto order : {ByteOrder::big_endian, ByteOrder::little_endian}) {
    auto b = ByteBuffer::allocate(n + 4);
    b.order(order).position(3).mark();
    EXPECT_EQ(&Ops::put(b, 4, Ops::sample()), &b);
    expect_indices(b, 3, n + 4, n + 4);
    EXPECT_EQ(mark_of(b), 3u);
    std::vector<std::byte> expected(n + 4);
    auto s = sample_bytes<Ops>(order);
    std::copy(s.begin(), s.end(), expected.begin() + 4);
    EXPECT_EQ(content(b), expected);
    EXPECT_TRUE(same_bits(Ops::get(std::as_const(b), 4), Ops::sample()));
    expect_indices(b, 3, n + 4, n + 4);
  }
}

TYPED_TEST(ByteBufferTyped, GetDecodesKnownBytesInEitherOrder) {
  using Ops = TypeParam;
  constexpr std::size_t n = sizeof(typename Ops::type);
  for (auto order : {ByteOrder::big_endian, ByteOrder::little_endian}) {
    auto mem = sample_bytes<Ops>(order);
    mem.insert(mem.begin(), std::byte{0xEE});  // unaligned on purpose
    auto b = ByteBuffer::wrap(std::span<const std::byte>(mem));
    b.order(order);
    EXPECT_TRUE(same_bits(Ops::get(std::as_const(b), 1), Ops::sample()));
    b.position(1);
    EXPECT_TRUE(same_bits(Ops::get(b), Ops::sample()));
    EXPECT_EQ(b.position(), 1 + n);
    // The other order reads the bytes reversed.
    b.order(order == ByteOrder::big_endian ? ByteOrder::little_endian : ByteOrder::big_endian);
    EXPECT_FALSE(same_bits(Ops::get(std::as_const(b), 1), Ops::sample()));
  }
}

TYPED_TEST(ByteBufferTyped, RelativeAccessStopsAtLimitMovingNothing) {
  using Ops = TypeParam;
  constexpr std::size_t n = sizeof(typename Ops::type);
  auto b = ByteBuffer::allocate(n + 8);
  b.limit(n + 4).position(5);  // n - 1 bytes remain
  b.mark();
  EXPECT_THROW(Ops::get(b), BufferUnderflowException);
  EXPECT_THROW(Ops::put(b, Ops::sample()), BufferOverflowException);
  expect_indices(b, 5, n + 4, n + 8);
  EXPECT_EQ(mark_of(b), 5u);
  EXPECT_EQ(content(b), std::vector<std::byte>(n + 8));
  b.position(4);  // exactly n remain
  Ops::put(b, Ops::sample());
  EXPECT_FALSE(b.has_remaining());
  // limit below the size of T altogether
  auto tiny = ByteBuffer::allocate(n - 1);
  EXPECT_THROW(Ops::get(tiny), BufferUnderflowException);
  EXPECT_THROW(Ops::put(tiny, Ops::sample()), BufferOverflowException);
}

TYPED_TEST(ByteBufferTyped, AbsoluteAccessIsCheckedAgainstLimitWithoutOverflow) {
  using Ops = TypeParam;
  constexpr std::size_t n = sizeof(typename Ops::type);
  auto b = ByteBuffer::allocate(n + 8);
  const std::size_t lim = n + 4;
  b.limit(lim);
  Ops::put(b, lim - n, Ops::sample());  // the last index that fits
  EXPECT_TRUE(same_bits(Ops::get(std::as_const(b), lim - n), Ops::sample()));
  auto before = content(b);
  for (std::size_t bad : {lim - n + 1, lim - 1, lim, lim + 1, n + 8, huge, huge - n + 1,
                          huge - n + 2, huge - 1, huge / 2 + 1}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(Ops::get(std::as_const(b), bad), IndexOutOfBoundsException);
    EXPECT_THROW(Ops::put(b, bad, Ops::sample()), IndexOutOfBoundsException);
  }
  EXPECT_EQ(content(b), before);
  expect_indices(b, 0, lim, n + 8);
  auto tiny = ByteBuffer::allocate(n - 1);
  EXPECT_THROW(Ops::get(std::as_const(tiny), 0), IndexOutOfBoundsException);
  EXPECT_THROW(Ops::put(tiny, 0, Ops::sample()), IndexOutOfBoundsException);
}

TYPED_TEST(ByteBufferTyped, ReadOnlyRefusesPutsBeforeAnyBoundsCheck) {
  using Ops = TypeParam;
  auto r = ByteBuffer::allocate(16).as_read_only_buffer();
  r.position(16);
  EXPECT_THROW(Ops::put(r, Ops::sample()), ReadOnlyBufferException);
  EXPECT_THROW(Ops::put(r, 0, Ops::sample()), ReadOnlyBufferException);
  EXPECT_THROW(Ops::put(r, huge, Ops::sample()), ReadOnlyBufferException);
  r.position(0);
  EXPECT_TRUE(same_bits(Ops::get(r), typename Ops::type{}));
}

TEST(ByteBufferTypedValues, KnownJavaEncodings) {
  auto b = ByteBuffer::allocate(32);
  b.put_short(-2).put_char(u'A').put_int(-1).put_long(1).put_float(1.0f).put_double(-0.0);
  EXPECT_EQ(content(b), bytes_of(0xFF, 0xFE, 0x00, 0x41, 0xFF, 0xFF, 0xFF, 0xFF,  //
                                 0, 0, 0, 0, 0, 0, 0, 1,                          //
                                 0x3F, 0x80, 0, 0,                                //
                                 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
  b.flip();
  EXPECT_EQ(b.get_short(), -2);
  EXPECT_EQ(b.get_char(), u'A');
  EXPECT_EQ(b.get_int(), -1);
  EXPECT_EQ(b.get_long(), 1);
  EXPECT_EQ(b.get_float(), 1.0f);
  EXPECT_TRUE(std::signbit(b.get_double()));
  EXPECT_FALSE(b.has_remaining());

  // A NaN keeps its payload both ways (Java's floatToRawIntBits / intBitsToFloat).
  auto c = ByteBuffer::allocate(12).order(ByteOrder::little_endian);
  c.put_float(std::bit_cast<float>(0x7FA00001u));
  c.put_double(std::bit_cast<double>(0x7FF4000000000001ull));
  EXPECT_EQ(content(c), bytes_of(0x01, 0x00, 0xA0, 0x7F, 0x01, 0, 0, 0, 0, 0, 0xF4, 0x7F));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(c.get_float(0)), 0x7FA00001u);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(c.get_double(4)), 0x7FF4000000000001ull);

  // Extreme values.
  auto d = ByteBuffer::allocate(8);
  d.put_long(0, std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(content(d), bytes_of(0x80, 0, 0, 0, 0, 0, 0, 0));
  EXPECT_EQ(d.get_long(0), std::numeric_limits<std::int64_t>::min());
  d.put_int(4, std::numeric_limits<std::int32_t>::max());
  EXPECT_EQ(d.get_int(4), 0x7FFFFFFF);
  d.put_char(0, u'\uFFFF');
  EXPECT_EQ(d.get_char(0), u'\uFFFF');
  EXPECT_EQ(d.get_short(0), -1);
}

// ---- Comparison and hashing --------------------------------------------------------------

TEST(ByteBufferCompare, EqualsComparesRemainingBytesOnly) {
  auto a = ByteBuffer::wrap(std::string_view("xxabc"));
  auto b = ByteBuffer::wrap(std::string_view("abcyy"));
  a.position(2);
  b.limit(3);
  EXPECT_TRUE(a == b);
  EXPECT_TRUE(a == a);
  b.limit(4);
  EXPECT_FALSE(a == b);  // different remaining()
  b.limit(3).position(1);
  a.position(3);
  EXPECT_TRUE(a == b);  // "bc" == "bc"
  a.position(2).limit(4);
  EXPECT_FALSE(a == b);  // "ab" != "bc"
  EXPECT_TRUE(ByteBuffer() == ByteBuffer::allocate(3).position(3));
  // Order, read-only and direct flags don't matter.
  auto c = ByteBuffer::allocate_direct(2).order(ByteOrder::little_endian);
  EXPECT_TRUE(c == ByteBuffer::allocate(2).as_read_only_buffer());
}

TEST(ByteBufferCompare, OrderingIsUnsignedLexicographicThenLength) {
  const auto lo_mem = bytes_of(0x7F);
  const auto hi_mem = bytes_of(0x80);
  auto lo = ByteBuffer::wrap(lo_mem);
  auto hi = ByteBuffer::wrap(hi_mem);
  // Java's compareTo would say 0x80 (-128) < 0x7F; niox compares like memcmp (decided).
  EXPECT_TRUE(lo < hi);
  EXPECT_TRUE((hi <=> lo) == std::strong_ordering::greater);
  auto ab = ByteBuffer::wrap(std::string_view("ab"));
  auto abc = ByteBuffer::wrap(std::string_view("abc"));
  EXPECT_TRUE(ab < abc);
  EXPECT_TRUE((abc <=> abc.duplicate()) == std::strong_ordering::equal);
  EXPECT_TRUE((ByteBuffer() <=> ByteBuffer()) == std::strong_ordering::equal);
  EXPECT_TRUE(ByteBuffer() < ab);
  abc.position(1);
  EXPECT_TRUE(ab < abc);  // "ab" < "bc"
}

TEST(ByteBufferCompare, MismatchLikeJava) {
  auto a = ByteBuffer::wrap(std::string_view("hello"));
  auto b = ByteBuffer::wrap(std::string_view("help!"));
  EXPECT_EQ(a.mismatch(b), 3);
  EXPECT_EQ(b.mismatch(a), 3);
  EXPECT_EQ(a.mismatch(a.duplicate()), -1);
  b.limit(3);
  EXPECT_EQ(a.mismatch(b), 3);  // b is a proper prefix: the shorter length
  a.limit(3);
  EXPECT_EQ(a.mismatch(b), -1);
  a.position(1);
  EXPECT_EQ(a.mismatch(b), 0);
  EXPECT_EQ(ByteBuffer().mismatch(ByteBuffer()), -1);
  EXPECT_EQ(ByteBuffer().mismatch(b), 0);
}

TEST(ByteBufferCompare, HashCodeIsJavasValue) {
  // Java: int h = 1; for (int i = limit() - 1; i >= position(); i--) h = 31 * h + (int) get(i);
  EXPECT_EQ(ByteBuffer().hash_code(), 1);
  EXPECT_EQ(ByteBuffer::wrap(std::span<const std::byte>(bytes_of(5))).hash_code(), 36);
  // (byte) 0x80 is -128 in Java: 31 - 128.
  EXPECT_EQ(ByteBuffer::wrap(std::span<const std::byte>(bytes_of(0x80))).hash_code(), -97);
  // [1, 2]: h = 31 + 2 = 33, then 31 * 33 + 1 = 1024.
  EXPECT_EQ(ByteBuffer::wrap(std::span<const std::byte>(bytes_of(1, 2))).hash_code(), 1024);
  // "hello": o=111 -> 142, l=108 -> 4510, l -> 139918, e=101 -> 4337559, h=104 -> 134464433.
  EXPECT_EQ(ByteBuffer::wrap(std::string_view("hello")).hash_code(), 134464433);
  // Eight 0xFF bytes (each -1) wrap around 32 bits: h = 31^8 - (31^8 - 1) / 30
  //   = 852891037441 - 28429701248 = 824461336193 = 191 * 2^32 + 4122582657 -> -172384639.
  auto ff = ByteBuffer::allocate(8);
  ff.put_long(0, -1);
  EXPECT_EQ(ff.hash_code(), -172384639);
  // Only the remaining bytes count.
  auto x = ByteBuffer::wrap(std::string_view("__hello__"));
  x.position(2).limit(7);
  EXPECT_EQ(x.hash_code(), 134464433);
  EXPECT_EQ(std::hash<ByteBuffer>{}(x), static_cast<std::uint32_t>(134464433));
  EXPECT_EQ(std::hash<ByteBuffer>{}(ff), static_cast<std::uint32_t>(-172384639));
}

// ---- Moves -------------------------------------------------------------------------------

TEST(ByteBufferMove, MovedFromIsEmptyDefault) {
  auto a = ByteBuffer::allocate_direct(16);
  a.order(ByteOrder::little_endian).position(3).mark().limit(10);
  auto ro = a.as_read_only_buffer();
  ByteBuffer b(std::move(a));
  expect_indices(b, 3, 10, 16);
  EXPECT_EQ(mark_of(b), 3u);
  EXPECT_TRUE(b.is_direct());
  EXPECT_EQ(b.order(), ByteOrder::little_endian);
  // NOLINTBEGIN(bugprone-use-after-move): the moved-from state is specified.
  expect_indices(a, 0, 0, 0);
  EXPECT_FALSE(mark_of(a));
  EXPECT_FALSE(a.is_direct());
  EXPECT_FALSE(a.is_read_only());
  EXPECT_EQ(a.order(), ByteOrder::big_endian);
  EXPECT_THROW(a.get(), BufferUnderflowException);
  EXPECT_THROW(a.get(0), IndexOutOfBoundsException);

  ByteBuffer c;
  c = std::move(ro);
  EXPECT_TRUE(c.is_read_only());
  EXPECT_FALSE(ro.is_read_only());
  expect_indices(ro, 0, 0, 0);
  // NOLINTEND(bugprone-use-after-move)
  c = std::move(c);  // self-move keeps the buffer
  expect_indices(c, 3, 10, 16);
  a = b;  // a moved-from buffer can be assigned again
  expect_indices(a, 3, 10, 16);
}

// ---- Raw access --------------------------------------------------------------------------

TEST(ByteBufferRaw, SpansCoverRemainingAndCapacity) {
  auto b = ByteBuffer::allocate(8);
  b.position(2).limit(6);
  auto w = b.writable_bytes();
  EXPECT_EQ(w.size(), 4u);
  w[0] = std::byte{'h'};
  w[1] = std::byte{'i'};
  EXPECT_EQ(b.bytes().data(), w.data());
  EXPECT_EQ(b.bytes().size(), 4u);
  EXPECT_EQ(b.string_view(), std::string_view("hi\0\0", 4));
  EXPECT_EQ(b.array().size(), 8u);
  EXPECT_EQ(b.array().data() + 2, w.data());
  EXPECT_EQ(b.array_view().data(), b.array().data());
  b.position(b.position() + 2);  // "I read two bytes into writable_bytes()"
  EXPECT_EQ(b.remaining(), 2u);
}

TEST(ByteBufferAlignment, AlignmentOffsetAndAlignedSlice) {
  auto d = ByteBuffer::allocate_direct(64);
  EXPECT_EQ(d.alignment_offset(0, 8), 0u);
  EXPECT_EQ(d.alignment_offset(13, 8), 5u);
  EXPECT_EQ(d.alignment_offset(13, 1), 0u);
  EXPECT_EQ(d.alignment_offset(100, 64), 36u);  // not bounded by capacity, like Java
  EXPECT_THROW(d.alignment_offset(0, 0), IllegalArgumentException);
  EXPECT_THROW(d.alignment_offset(0, 3), IllegalArgumentException);
  EXPECT_THROW(d.aligned_slice(12), IllegalArgumentException);

  d.order(ByteOrder::little_endian).position(3).limit(30);
  auto s = d.aligned_slice(8);
  expect_indices(s, 0, 16, 16);  // [8, 24)
  EXPECT_EQ(s.array_view().data(), d.array_view().data() + 8);
  EXPECT_TRUE(s.is_direct());
  EXPECT_EQ(s.order(), ByteOrder::little_endian);
  expect_indices(d.aligned_slice(1), 0, 27, 27);
  d.position(9).limit(15);  // no aligned 8-byte unit inside
  EXPECT_EQ(d.aligned_slice(8).capacity(), 0u);
  d.position(1).limit(2);
  EXPECT_EQ(d.aligned_slice(4096).capacity(), 0u);
  EXPECT_EQ(d.aligned_slice(std::size_t{1} << 63).capacity(), 0u);

  // A view starting off-alignment: lim_mod may exceed lim.
  d.clear();
  auto v = d.slice(5, 2);
  EXPECT_EQ(v.alignment_offset(0, 8), 5u);
  EXPECT_EQ(v.aligned_slice(8).capacity(), 0u);
}

// ---- Formatting --------------------------------------------------------------------------

TEST(ByteBufferFormat, FmtPrintsLikeJavaToString) {
  auto b = ByteBuffer::allocate(16);
  EXPECT_EQ(fmt::format("{}", b), "ByteBuffer[pos=0 lim=16 cap=16]");
  b.put_int(1).limit(10);
  EXPECT_EQ(fmt::format("{}", b), "ByteBuffer[pos=4 lim=10 cap=16]");
  EXPECT_EQ(fmt::format("{}", ByteBuffer()), "ByteBuffer[pos=0 lim=0 cap=0]");
}

TEST(ByteBufferFormat, HexDumpIsNettyStyleOverRemaining) {
  const std::string head =
      "         +-------------------------------------------------+\n"
      "         |  0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f |\n"
      "+--------+-------------------------------------------------+----------------+\n";
  const std::string foot =
      "+--------+-------------------------------------------------+----------------+";
  auto b = ByteBuffer::wrap(std::string_view("__Hello, hex\x01\x7f\x80 dump!"));
  b.position(2);
  EXPECT_EQ(niox::hex_dump(b),
            head +
                "|00000000| 48 65 6c 6c 6f 2c 20 68 65 78 01 7f 80 20 64 75 |Hello, hex... du|\n"
                "|00000010| 6d 70 21" +
                std::string(13 * 3, ' ') + " |mp!" + std::string(13, ' ') + "|\n" + foot);
  EXPECT_EQ(niox::hex_dump(ByteBuffer()), head + foot);
  EXPECT_EQ(b.position(), 2u);  // dumping reads nothing
}

}  // namespace
