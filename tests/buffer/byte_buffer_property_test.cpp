// Randomised check of ByteBuffer against a deliberately naive model of java.nio.ByteBuffer:
// long random call sequences (fixed seeds) over a buffer and views derived from it, every call
// including the throwing ones, with the model predicting which exception comes out. The model
// is written from the JDK 17 javadoc, byte by byte, sharing no code with the implementation.
#include <niox/byte_buffer.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace {

using niox::ByteBuffer;
using niox::ByteOrder;
using u128 = unsigned __int128;

enum class Outcome { ok, overflow, underflow, read_only, index, illegal_argument, invalid_mark };

const char* name(Outcome o) {
  switch (o) {
    case Outcome::ok: return "ok";
    case Outcome::overflow: return "BufferOverflowException";
    case Outcome::underflow: return "BufferUnderflowException";
    case Outcome::read_only: return "ReadOnlyBufferException";
    case Outcome::index: return "IndexOutOfBoundsException";
    case Outcome::illegal_argument: return "IllegalArgumentException";
    case Outcome::invalid_mark: return "InvalidMarkException";
  }
  return "?";
}

// Runs f on the real buffer and reports which exception, if any, came out.
template <class F>
Outcome outcome_of(F&& f) {
  try {
    f();
    return Outcome::ok;
  } catch (const niox::BufferOverflowException&) {
    return Outcome::overflow;
  } catch (const niox::BufferUnderflowException&) {
    return Outcome::underflow;
  } catch (const niox::ReadOnlyBufferException&) {
    return Outcome::read_only;
  } catch (const niox::IndexOutOfBoundsException&) {
    return Outcome::index;
  } catch (const niox::IllegalArgumentException&) {
    return Outcome::illegal_argument;
  } catch (const niox::InvalidMarkException&) {
    return Outcome::invalid_mark;
  }
}

// ---- The model ---------------------------------------------------------------------------

constexpr long no_mark = -1;

struct Model {
  std::shared_ptr<std::vector<std::uint8_t>> mem = std::make_shared<std::vector<std::uint8_t>>();
  std::size_t base = 0;  // where this view's index 0 lies in *mem
  std::size_t cap = 0, lim = 0, pos = 0;
  long mark = no_mark;
  bool ro = false;
  bool direct = false;
  ByteOrder order = ByteOrder::big_endian;

  std::uint8_t& at(std::size_t i) const { return (*mem)[base + i]; }
  std::size_t rem() const { return lim - pos; }
  std::vector<std::uint8_t> remaining_bytes() const {
    return {mem->begin() + static_cast<long>(base + pos),
            mem->begin() + static_cast<long>(base + lim)};
  }
  // Java's Objects.checkFromIndexSize(index, size, lim), in arithmetic that cannot wrap.
  bool range_ok(std::size_t index, std::size_t size) const {
    return static_cast<u128>(index) + size <= lim;
  }
};

// Decoding and encoding one byte at a time, most significant first in big-endian.
template <class T>
T decode(const Model& m, std::size_t index) {
  constexpr std::size_t n = sizeof(T);
  std::uint64_t u = 0;
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t from = m.order == ByteOrder::big_endian ? k : n - 1 - k;
    u = (u << 8) | m.at(index + from);
  }
  using U = std::conditional_t<n == 2, std::uint16_t,
                               std::conditional_t<n == 4, std::uint32_t, std::uint64_t>>;
  return std::bit_cast<T>(static_cast<U>(u));
}

template <class T>
void encode(const Model& m, std::size_t index, T v) {
  constexpr std::size_t n = sizeof(T);
  using U = std::conditional_t<n == 2, std::uint16_t,
                               std::conditional_t<n == 4, std::uint32_t, std::uint64_t>>;
  std::uint64_t u = std::bit_cast<U>(v);
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t to = m.order == ByteOrder::big_endian ? n - 1 - k : k;
    m.at(index + to) = static_cast<std::uint8_t>(u & 0xff);
    u >>= 8;
  }
}

template <class T>
std::uint64_t bits(T v) {
  if constexpr (sizeof(T) == 2) {
    return std::bit_cast<std::uint16_t>(v);
  } else if constexpr (sizeof(T) == 4) {
    return std::bit_cast<std::uint32_t>(v);
  } else {
    return std::bit_cast<std::uint64_t>(v);
  }
}

// The six typed accessors, by type.
template <class T>
struct Typed;
#define NIOX_TYPED(T, Name)                                                      \
  template <>                                                                    \
  struct Typed<T> {                                                              \
    static constexpr const char* name = #Name;                                   \
    static T get(ByteBuffer& b) { return b.get_##Name(); }                       \
    static T get(const ByteBuffer& b, std::size_t i) { return b.get_##Name(i); } \
    static void put(ByteBuffer& b, T v) { b.put_##Name(v); }                     \
    static void put(ByteBuffer& b, std::size_t i, T v) { b.put_##Name(i, v); }   \
  };
NIOX_TYPED(std::int16_t, short)
NIOX_TYPED(char16_t, char)
NIOX_TYPED(std::int32_t, int)
NIOX_TYPED(std::int64_t, long)
NIOX_TYPED(float, float)
NIOX_TYPED(double, double)
#undef NIOX_TYPED

struct Slot {
  ByteBuffer buf;
  Model model;
};

struct Failure {
  std::string what;
};

class Runner {
 public:
  explicit Runner(std::uint64_t seed) : rng_(seed) {}

  void run(int ops) {
    new_root();
    for (op_ = 0; op_ < ops; ++op_) {
      step();
      for (std::size_t i = 0; i < slots_.size(); ++i) {
        check_slot(i);
      }
    }
  }

 private:
  std::size_t pick(std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
  }
  bool chance(int percent) { return pick(100) < static_cast<std::size_t>(percent); }

  // An index or length: mostly near the interesting range, sometimes absurd.
  std::size_t arg(std::size_t around) {
    switch (pick(10)) {
      case 0: return std::numeric_limits<std::size_t>::max() - pick(9);
      case 1: return std::numeric_limits<std::size_t>::max() / 2 + pick(3);
      default: return pick(around + 4);
    }
  }

  void fail(const std::string& what) {
    throw Failure{fmt::format("op #{} [{}] on slot {}: {}", op_, desc_, cur_, what)};
  }
  void expect(bool cond, const std::string& what) {
    if (!cond) {
      fail(what);
    }
  }
  void expect_outcome(Outcome got, Outcome want) {
    if (got != want) {
      fail(fmt::format("got {}, model expects {}", name(got), name(want)));
    }
  }

  // Probes the mark through a duplicate, so the buffer under test is not changed.
  static long real_mark(const ByteBuffer& b) {
    ByteBuffer d = b.duplicate();
    try {
      d.reset();
    } catch (const niox::InvalidMarkException&) {
      return no_mark;
    }
    return static_cast<long>(d.position());
  }

  void check_slot(std::size_t i) {
    const auto& [b, m] = slots_[i];
    cur_ = i;
    long mk = real_mark(b);
    expect(mk == no_mark || static_cast<std::size_t>(mk) <= b.position(), "mark > position");
    expect(b.position() <= b.limit() && b.limit() <= b.capacity(), "position <= limit <= capacity");
    expect(b.capacity() == m.cap && b.limit() == m.lim && b.position() == m.pos && mk == m.mark,
           fmt::format("indices pos={} lim={} cap={} mark={}, model pos={} lim={} cap={} mark={}",
                       b.position(), b.limit(), b.capacity(), mk, m.pos, m.lim, m.cap, m.mark));
    expect(b.remaining() == m.rem() && b.has_remaining() == (m.rem() > 0), "remaining");
    expect(b.is_read_only() == m.ro && b.is_direct() == m.direct && b.order() == m.order,
           "flags or order");
    auto a = b.array_view();
    expect(a.size() == m.cap, "array_view size");
    for (std::size_t k = 0; k < m.cap; ++k) {
      if (static_cast<std::uint8_t>(a[k]) != m.at(k)) {
        fail(fmt::format("content differs at {}: {} vs model {}", k, static_cast<unsigned>(a[k]),
                         m.at(k)));
      }
    }
  }

  void new_root() {
    std::size_t cap = pick(49);
    Model m;
    m.mem = std::make_shared<std::vector<std::uint8_t>>(cap);
    m.cap = m.lim = cap;
    ByteBuffer b;
    switch (pick(4)) {
      case 0: b = ByteBuffer::allocate(cap); break;
      case 1:
        b = ByteBuffer::allocate_direct(cap);
        m.direct = true;
        break;
      default: {
        // Caller memory, kept alive by the runner, filled with noise first.
        auto& mem = wrapped_.emplace_back(std::make_unique<std::vector<std::byte>>(cap));
        for (std::size_t k = 0; k < cap; ++k) {
          (*mem)[k] = static_cast<std::byte>(pick(256));
          (*m.mem)[k] = static_cast<std::uint8_t>((*mem)[k]);
        }
        if (chance(30)) {
          b = ByteBuffer::wrap(std::span<const std::byte>(*mem));
          m.ro = true;
        } else {
          b = ByteBuffer::wrap(std::span<std::byte>(*mem));
        }
      }
    }
    put_slot(Slot{std::move(b), std::move(m)});
  }

  void put_slot(Slot s) {
    if (slots_.size() < 6) {
      slots_.push_back(std::move(s));
    } else {
      slots_[pick(slots_.size())] = std::move(s);
    }
  }

  template <class T>
  void typed(ByteBuffer& b, Model& m) {
    constexpr std::size_t n = sizeof(T);
    using A = Typed<T>;
    std::uint64_t r = rng_();
    using U = std::conditional_t<n == 2, std::uint16_t,
                                 std::conditional_t<n == 4, std::uint32_t, std::uint64_t>>;
    T v = std::bit_cast<T>(static_cast<U>(r));
    switch (pick(4)) {
      case 0: {
        desc_ = fmt::format("get_{}()", A::name);
        T got{};
        Outcome want = m.rem() < n ? Outcome::underflow : Outcome::ok;
        expect_outcome(outcome_of([&] { got = A::get(b); }), want);
        if (want == Outcome::ok) {
          expect(bits(got) == bits(decode<T>(m, m.pos)), "typed relative get value");
          m.pos += n;
        }
        break;
      }
      case 1: {
        std::size_t i = arg(m.lim);
        desc_ = fmt::format("get_{}({})", A::name, i);
        T got{};
        Outcome want = m.range_ok(i, n) ? Outcome::ok : Outcome::index;
        expect_outcome(outcome_of([&] { got = A::get(std::as_const(b), i); }), want);
        if (want == Outcome::ok) {
          expect(bits(got) == bits(decode<T>(m, i)), "typed absolute get value");
        }
        break;
      }
      case 2: {
        desc_ = fmt::format("put_{}({:#x})", A::name, bits(v));
        Outcome want = m.ro ? Outcome::read_only : m.rem() < n ? Outcome::overflow : Outcome::ok;
        expect_outcome(outcome_of([&] { A::put(b, v); }), want);
        if (want == Outcome::ok) {
          encode<T>(m, m.pos, v);
          m.pos += n;
        }
        break;
      }
      default: {
        std::size_t i = arg(m.lim);
        desc_ = fmt::format("put_{}({}, {:#x})", A::name, i, bits(v));
        Outcome want = m.ro ? Outcome::read_only : !m.range_ok(i, n) ? Outcome::index : Outcome::ok;
        expect_outcome(outcome_of([&] { A::put(b, i, v); }), want);
        if (want == Outcome::ok) {
          encode<T>(m, i, v);
        }
      }
    }
  }

  void step() {
    cur_ = pick(slots_.size());
    ByteBuffer& b = slots_[cur_].buf;
    Model& m = slots_[cur_].model;
    switch (pick(30)) {
      case 0: {
        std::size_t n = arg(m.cap);
        desc_ = fmt::format("position({})", n);
        Outcome want = n > m.lim ? Outcome::illegal_argument : Outcome::ok;
        expect_outcome(outcome_of([&] { b.position(n); }), want);
        if (want == Outcome::ok) {
          m.pos = n;
          if (m.mark > static_cast<long>(n)) m.mark = no_mark;
        }
        break;
      }
      case 1: {
        std::size_t n = arg(m.cap);
        desc_ = fmt::format("limit({})", n);
        Outcome want = n > m.cap ? Outcome::illegal_argument : Outcome::ok;
        expect_outcome(outcome_of([&] { b.limit(n); }), want);
        if (want == Outcome::ok) {
          m.lim = n;
          if (m.pos > n) m.pos = n;
          if (m.mark > static_cast<long>(n)) m.mark = no_mark;
        }
        break;
      }
      case 2:
        desc_ = "mark()";
        b.mark();
        m.mark = static_cast<long>(m.pos);
        break;
      case 3: {
        desc_ = "reset()";
        Outcome want = m.mark < 0 ? Outcome::invalid_mark : Outcome::ok;
        expect_outcome(outcome_of([&] { b.reset(); }), want);
        if (want == Outcome::ok) m.pos = static_cast<std::size_t>(m.mark);
        break;
      }
      case 4:
        switch (pick(3)) {
          case 0:
            desc_ = "clear()";
            b.clear();
            m.pos = 0;
            m.lim = m.cap;
            break;
          case 1:
            desc_ = "flip()";
            b.flip();
            m.lim = m.pos;
            m.pos = 0;
            break;
          default:
            desc_ = "rewind()";
            b.rewind();
            m.pos = 0;
        }
        m.mark = no_mark;
        break;
      case 5: {
        desc_ = "compact()";
        Outcome want = m.ro ? Outcome::read_only : Outcome::ok;
        expect_outcome(outcome_of([&] { b.compact(); }), want);
        if (want == Outcome::ok) {
          auto r = m.remaining_bytes();
          for (std::size_t k = 0; k < r.size(); ++k) m.at(k) = r[k];
          m.pos = r.size();
          m.lim = m.cap;
          m.mark = no_mark;
        }
        break;
      }
      case 6: {
        auto o = chance(50) ? ByteOrder::big_endian : ByteOrder::little_endian;
        desc_ = "order()";
        b.order(o);
        m.order = o;
        break;
      }
      case 7: {
        desc_ = "get()";
        std::uint8_t got = 0;
        Outcome want = m.pos >= m.lim ? Outcome::underflow : Outcome::ok;
        expect_outcome(outcome_of([&] { got = b.get(); }), want);
        if (want == Outcome::ok) {
          expect(got == m.at(m.pos), "get() value");
          ++m.pos;
        }
        break;
      }
      case 8: {
        std::size_t i = arg(m.lim);
        desc_ = fmt::format("get({})", i);
        std::uint8_t got = 0;
        Outcome want = i >= m.lim ? Outcome::index : Outcome::ok;
        expect_outcome(outcome_of([&] { got = std::as_const(b).get(i); }), want);
        if (want == Outcome::ok) expect(got == m.at(i), "get(i) value");
        break;
      }
      case 9: {
        auto v = static_cast<std::uint8_t>(pick(256));
        desc_ = fmt::format("put({})", v);
        Outcome want = m.ro ? Outcome::read_only : m.pos >= m.lim ? Outcome::overflow : Outcome::ok;
        expect_outcome(outcome_of([&] { b.put(v); }), want);
        if (want == Outcome::ok) m.at(m.pos++) = v;
        break;
      }
      case 10: {
        std::size_t i = arg(m.lim);
        auto v = static_cast<std::uint8_t>(pick(256));
        desc_ = fmt::format("put({}, {})", i, v);
        Outcome want = m.ro ? Outcome::read_only : i >= m.lim ? Outcome::index : Outcome::ok;
        expect_outcome(outcome_of([&] { b.put(i, v); }), want);
        if (want == Outcome::ok) m.at(i) = v;
        break;
      }
      case 11: {
        std::size_t n = pick(m.rem() + 4);
        desc_ = fmt::format("get(span[{}])", n);
        std::vector<std::byte> dst(n, std::byte{0xA5});
        Outcome want = n > m.rem() ? Outcome::underflow : Outcome::ok;
        expect_outcome(outcome_of([&] { b.get(std::span<std::byte>(dst)); }), want);
        for (std::size_t k = 0; k < n; ++k) {
          auto expected = want == Outcome::ok ? m.at(m.pos + k) : std::uint8_t{0xA5};
          expect(static_cast<std::uint8_t>(dst[k]) == expected, "bulk get content");
        }
        if (want == Outcome::ok) m.pos += n;
        break;
      }
      case 12: {
        std::size_t i = arg(m.lim);
        std::size_t n = pick(m.lim + 3);
        desc_ = fmt::format("get({}, span[{}])", i, n);
        std::vector<std::byte> dst(n, std::byte{0x5A});
        Outcome want = m.range_ok(i, n) ? Outcome::ok : Outcome::index;
        expect_outcome(outcome_of([&] { b.get(i, std::span<std::byte>(dst)); }), want);
        for (std::size_t k = 0; k < n; ++k) {
          auto expected = want == Outcome::ok ? m.at(i + k) : std::uint8_t{0x5A};
          expect(static_cast<std::uint8_t>(dst[k]) == expected, "absolute bulk get content");
        }
        break;
      }
      case 13: {
        std::size_t n = pick(m.rem() + 4);
        desc_ = fmt::format("put(span[{}])", n);
        std::vector<std::byte> src(n);
        for (auto& x : src) x = static_cast<std::byte>(pick(256));
        Outcome want = m.ro ? Outcome::read_only : n > m.rem() ? Outcome::overflow : Outcome::ok;
        expect_outcome(outcome_of([&] { b.put(std::span<const std::byte>(src)); }), want);
        if (want == Outcome::ok) {
          for (std::size_t k = 0; k < n; ++k) m.at(m.pos + k) = static_cast<std::uint8_t>(src[k]);
          m.pos += n;
        }
        break;
      }
      case 14: {
        std::size_t i = arg(m.lim);
        std::size_t n = pick(m.lim + 3);
        desc_ = fmt::format("put({}, span[{}])", i, n);
        std::vector<std::byte> src(n);
        for (auto& x : src) x = static_cast<std::byte>(pick(256));
        Outcome want = m.ro ? Outcome::read_only : !m.range_ok(i, n) ? Outcome::index : Outcome::ok;
        expect_outcome(outcome_of([&] { b.put(i, std::span<const std::byte>(src)); }), want);
        if (want == Outcome::ok) {
          for (std::size_t k = 0; k < n; ++k) m.at(i + k) = static_cast<std::uint8_t>(src[k]);
        }
        break;
      }
      case 15:
      case 16: {
        // Draining another view (often of the same memory, so ranges overlap), or itself.
        std::size_t s = chance(10) ? cur_ : pick(slots_.size());
        ByteBuffer& src = slots_[s].buf;
        Model& sm = slots_[s].model;
        desc_ = fmt::format("put(slot {} buffer)", s);
        Outcome want = s == cur_            ? Outcome::illegal_argument
                       : m.ro               ? Outcome::read_only
                       : sm.rem() > m.rem() ? Outcome::overflow
                                            : Outcome::ok;
        expect_outcome(outcome_of([&] { b.put(src); }), want);
        if (want == Outcome::ok) {
          auto r = sm.remaining_bytes();  // copy first: that is memmove
          for (std::size_t k = 0; k < r.size(); ++k) m.at(m.pos + k) = r[k];
          m.pos += r.size();
          sm.pos += r.size();
        }
        break;
      }
      case 17: {
        std::size_t s = pick(slots_.size());
        const ByteBuffer& src = slots_[s].buf;
        const Model& sm = slots_[s].model;
        std::size_t i = arg(m.lim);
        std::size_t off = arg(sm.lim);
        std::size_t n = chance(20) ? arg(m.lim) : pick(std::min(m.lim, sm.lim) + 2);
        desc_ = fmt::format("put({}, slot {} buffer, {}, {})", i, s, off, n);
        Outcome want = !m.range_ok(i, n)                     ? Outcome::index
                       : static_cast<u128>(off) + n > sm.lim ? Outcome::index
                       : m.ro                                ? Outcome::read_only
                                                             : Outcome::ok;
        expect_outcome(outcome_of([&] { b.put(i, src, off, n); }), want);
        if (want == Outcome::ok) {
          std::vector<std::uint8_t> r(n);
          for (std::size_t k = 0; k < n; ++k) r[k] = sm.at(off + k);
          for (std::size_t k = 0; k < n; ++k) m.at(i + k) = r[k];
        }
        break;
      }
      case 18:
      case 19:
      case 20:
      case 21:
      case 22:
      case 23:
        switch (pick(6)) {
          case 0: typed<std::int16_t>(b, m); break;
          case 1: typed<char16_t>(b, m); break;
          case 2: typed<std::int32_t>(b, m); break;
          case 3: typed<std::int64_t>(b, m); break;
          case 4: typed<float>(b, m); break;
          default: typed<double>(b, m); break;
        }
        break;
      case 24: {
        // Derive a view.
        Model v = m;
        ByteBuffer nb;
        switch (pick(4)) {
          case 0:
            desc_ = "slice()";
            nb = b.slice();
            v.base = m.base + m.pos;
            v.cap = v.lim = m.rem();
            v.pos = 0;
            v.mark = no_mark;
            break;
          case 1: {
            std::size_t i = arg(m.lim);
            std::size_t n = chance(20) ? arg(m.lim) : pick(m.lim + 2);
            desc_ = fmt::format("slice({}, {})", i, n);
            Outcome want = m.range_ok(i, n) ? Outcome::ok : Outcome::index;
            expect_outcome(outcome_of([&] { nb = b.slice(i, n); }), want);
            if (want != Outcome::ok) return;
            v.base = m.base + i;
            v.cap = v.lim = n;
            v.pos = 0;
            v.mark = no_mark;
            break;
          }
          case 2:
            desc_ = "duplicate()";
            nb = chance(50) ? b.duplicate() : ByteBuffer(b);
            break;
          default:
            desc_ = "as_read_only_buffer()";
            nb = b.as_read_only_buffer();
            v.ro = true;
        }
        put_slot(Slot{std::move(nb), std::move(v)});
        break;
      }
      case 25: {
        // Java's equals, mismatch, hashCode, and niox's unsigned ordering, against another view.
        std::size_t s = pick(slots_.size());
        const ByteBuffer& o = slots_[s].buf;
        desc_ = fmt::format("compare with slot {}", s);
        auto x = m.remaining_bytes();
        auto y = slots_[s].model.remaining_bytes();
        expect((b == o) == (x == y), "operator==");
        long mm = -1;
        for (std::size_t k = 0; k < std::min(x.size(), y.size()); ++k) {
          if (x[k] != y[k]) {
            mm = static_cast<long>(k);
            break;
          }
        }
        if (mm < 0 && x.size() != y.size()) mm = static_cast<long>(std::min(x.size(), y.size()));
        expect(b.mismatch(o) == mm, fmt::format("mismatch {} vs model {}", b.mismatch(o), mm));
        auto c = b <=> o;
        auto mc = x <=> y;  // vector<uint8_t>: unsigned lexicographic, then length
        expect((c < 0) == (mc < 0) && (c == 0) == (mc == 0), "operator<=>");
        std::int64_t h = 1;
        for (std::size_t k = x.size(); k-- > 0;) {
          h = static_cast<std::int32_t>(
              static_cast<std::uint32_t>(31 * h + static_cast<std::int8_t>(x[k])));
        }
        expect(b.hash_code() == h, fmt::format("hash_code {} vs model {}", b.hash_code(), h));
        break;
      }
      case 26: {
        desc_ = "bytes()/writable_bytes()";
        auto r = b.bytes();
        expect(r.size() == m.rem(), "bytes() size");
        for (std::size_t k = 0; k < r.size(); ++k) {
          expect(static_cast<std::uint8_t>(r[k]) == m.at(m.pos + k), "bytes() content");
        }
        Outcome want = m.ro ? Outcome::read_only : Outcome::ok;
        expect_outcome(outcome_of([&] {
                         auto w = b.writable_bytes();
                         if (!w.empty())
                           w[0] = static_cast<std::byte>(~static_cast<unsigned>(w[0]));
                       }),
                       want);
        if (want == Outcome::ok && m.rem() > 0)
          m.at(m.pos) = static_cast<std::uint8_t>(~m.at(m.pos));
        break;
      }
      case 27: {
        // Move or copy-assign one slot into another.
        std::size_t to = pick(slots_.size());
        if (to == cur_) return;
        if (chance(50)) {
          desc_ = fmt::format("slot {} = move(slot {})", to, cur_);
          slots_[to].buf = std::move(b);
          slots_[to].model = std::move(m);
          slots_[cur_].model = Model{};  // moved-from: an empty big-endian buffer
        } else {
          desc_ = fmt::format("slot {} = slot {}", to, cur_);
          slots_[to].buf = b;
          slots_[to].model = m;
        }
        break;
      }
      case 28:
        if (chance(20)) {
          desc_ = "new root";
          new_root();
        }
        break;
      default: {
        // A relative get after a failed call still sees consistent state.
        desc_ = "remaining()";
        expect(b.remaining() == m.rem(), "remaining");
      }
    }
  }

  std::mt19937_64 rng_;
  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<std::vector<std::byte>>> wrapped_;
  int op_ = 0;
  std::size_t cur_ = 0;
  std::string desc_;
};

class ByteBufferProperty : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(ByteBufferProperty, MatchesModel) {
  const std::uint64_t seed = GetParam();
  Runner r(seed);
  try {
    r.run(20000);
  } catch (const Failure& f) {
    FAIL() << "seed " << seed << ": " << f.what;
  } catch (const std::exception& e) {
    FAIL() << "seed " << seed << ": unexpected exception " << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, ByteBufferProperty,
                         ::testing::Values(1, 2, 3, 0x5eed, 20261129, 0xdeadbeef));

}  // namespace
