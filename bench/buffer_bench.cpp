// ByteBuffer typed and bulk access against the hand-written floor: a plain array with memcpy,
// byte-swapped with __builtin_bswap where the order is not native.
//
// Each pair (".../niox" and ".../raw") does the same work with the same barriers: one
// benchmark iteration walks a 64 KiB buffer element by element, and every element's value goes
// through a register barrier (the value read by a get, the value given to a put), so neither
// side can be folded away or vectorised across elements; benchmark::ClobberMemory ends each
// pass. The "op" counter is the CPU time per element (typed) or per call (bulk). See
// bench/README.md.
#include <niox/byte_buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

namespace {

using niox::ByteBuffer;
using niox::ByteOrder;

constexpr std::size_t buffer_bytes = 64 * 1024;

template <class T>
struct Typed;
template <>
struct Typed<std::int32_t> {
  static constexpr const char* name = "int";
  static std::int32_t get(ByteBuffer& b) { return b.get_int(); }
  static std::int32_t get(const ByteBuffer& b, std::size_t i) { return b.get_int(i); }
  static void put(ByteBuffer& b, std::int32_t v) { b.put_int(v); }
  static void put(ByteBuffer& b, std::size_t i, std::int32_t v) { b.put_int(i, v); }
  static std::uint32_t swap(std::uint32_t u) { return __builtin_bswap32(u); }
  using bits = std::uint32_t;
};
template <>
struct Typed<std::int64_t> {
  static constexpr const char* name = "long";
  static std::int64_t get(ByteBuffer& b) { return b.get_long(); }
  static std::int64_t get(const ByteBuffer& b, std::size_t i) { return b.get_long(i); }
  static void put(ByteBuffer& b, std::int64_t v) { b.put_long(v); }
  static void put(ByteBuffer& b, std::size_t i, std::int64_t v) { b.put_long(i, v); }
  static std::uint64_t swap(std::uint64_t u) { return __builtin_bswap64(u); }
  using bits = std::uint64_t;
};

enum class Mode { get_relative, get_absolute, put_relative, put_absolute };

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::get_relative: return "get_rel";
    case Mode::get_absolute: return "get_abs";
    case Mode::put_relative: return "put_rel";
    case Mode::put_absolute: return "put_abs";
  }
  return "?";
}

// Per-element barriers, identical on both sides. They live in registers on purpose: with
// benchmark::DoNotOptimize's memory alternative GCC 12 may hand the asm the buffer's own bytes
// and drop the load being measured.
template <class T>
inline __attribute__((always_inline)) void sink(T v) {  // v must really be computed
  asm volatile("" : : "r"(v));
}
template <class T>
inline __attribute__((always_inline)) void opaque(T& v) {  // v could be anything
  asm volatile("" : "+r"(v));
}
// In the escaped variants, unknown code runs between elements: all memory may have changed.
template <bool Escaped>
inline __attribute__((always_inline)) void between_elements() {
  if constexpr (Escaped) {
    benchmark::ClobberMemory();
  }
}

void per_op(benchmark::State& st, std::size_t ops_per_iteration) {
  st.counters["op"] = benchmark::Counter(
      static_cast<double>(ops_per_iteration),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// Escaped: the buffer's address leaves the function (as for a member or a reference
// parameter), so every barrier forces its indices back to memory. The raw side then keeps its
// pointer and position in an escaped struct too.
template <class T, Mode M, bool Escaped>
void niox_typed(benchmark::State& st, ByteOrder order) {
  using A = Typed<T>;
  constexpr std::size_t n = buffer_bytes / sizeof(T);
  auto b = ByteBuffer::allocate(buffer_bytes);
  b.order(order);
  if constexpr (Escaped) {
    benchmark::DoNotOptimize(&b);
  }
  for (auto _ : st) {
    if constexpr (M == Mode::get_relative) {
      b.clear();
      for (std::size_t i = 0; i < n; ++i) {
        sink(A::get(b));
        between_elements<Escaped>();
      }
    } else if constexpr (M == Mode::get_absolute) {
      for (std::size_t i = 0; i < n; ++i) {
        sink(A::get(std::as_const(b), i * sizeof(T)));
        between_elements<Escaped>();
      }
    } else if constexpr (M == Mode::put_relative) {
      b.clear();
      for (std::size_t i = 0; i < n; ++i) {
        T v = static_cast<T>(i);
        opaque(v);
        A::put(b, v);
        between_elements<Escaped>();
      }
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        T v = static_cast<T>(i);
        opaque(v);
        A::put(b, i * sizeof(T), v);
        between_elements<Escaped>();
      }
    }
    benchmark::ClobberMemory();
  }
  per_op(st, n);
}

// The floor: the same walk over a plain array, no checks at all.
template <class T, Mode M, bool Swap, bool Escaped>
void raw_typed(benchmark::State& st) {
  using A = Typed<T>;
  using U = typename A::bits;
  constexpr std::size_t n = buffer_bytes / sizeof(T);
  auto mem = std::make_unique<std::byte[]>(buffer_bytes);
  struct Cursor {
    std::byte* p;
    std::size_t pos;
  } c{mem.get(), 0};
  if constexpr (Escaped) {
    benchmark::DoNotOptimize(&c);
  }
  for (auto _ : st) {
    if constexpr (M == Mode::get_relative || M == Mode::get_absolute) {
      c.pos = 0;
      for (std::size_t i = 0; i < n; ++i) {
        U u;
        std::memcpy(&u, c.p + (M == Mode::get_relative ? c.pos : i * sizeof(T)), sizeof(U));
        if constexpr (M == Mode::get_relative) c.pos += sizeof(T);
        if constexpr (Swap) u = A::swap(u);
        sink(static_cast<T>(u));
        between_elements<Escaped>();
      }
    } else {
      c.pos = 0;
      for (std::size_t i = 0; i < n; ++i) {
        T v = static_cast<T>(i);
        opaque(v);
        U u = static_cast<U>(v);
        if constexpr (Swap) u = A::swap(u);
        std::memcpy(c.p + (M == Mode::put_relative ? c.pos : i * sizeof(T)), &u, sizeof(U));
        if constexpr (M == Mode::put_relative) c.pos += sizeof(T);
        between_elements<Escaped>();
      }
    }
    benchmark::ClobberMemory();
  }
  per_op(st, n);
}

// Bulk: one call per iteration, walking the 64 KiB buffer chunk by chunk.
void niox_bulk_get(benchmark::State& st) {
  const auto chunk = static_cast<std::size_t>(st.range(0));
  auto b = ByteBuffer::allocate(buffer_bytes);
  auto dst = std::make_unique<std::byte[]>(chunk);
  std::span<std::byte> d(dst.get(), chunk);
  for (auto _ : st) {
    if (b.remaining() < chunk) b.clear();
    b.get(d);
    benchmark::DoNotOptimize(d.data());
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations() * chunk));
  per_op(st, 1);
}

void raw_bulk_get(benchmark::State& st) {
  const auto chunk = static_cast<std::size_t>(st.range(0));
  auto mem = std::make_unique<std::byte[]>(buffer_bytes);
  auto dst = std::make_unique<std::byte[]>(chunk);
  std::size_t pos = 0;
  for (auto _ : st) {
    if (buffer_bytes - pos < chunk) pos = 0;
    std::memcpy(dst.get(), mem.get() + pos, chunk);
    pos += chunk;
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations() * chunk));
  per_op(st, 1);
}

void niox_bulk_put(benchmark::State& st) {
  const auto chunk = static_cast<std::size_t>(st.range(0));
  auto b = ByteBuffer::allocate(buffer_bytes);
  auto src = std::make_unique<std::byte[]>(chunk);
  std::span<const std::byte> s(src.get(), chunk);
  for (auto _ : st) {
    if (b.remaining() < chunk) b.clear();
    b.put(s);
    benchmark::DoNotOptimize(s.data());
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations() * chunk));
  per_op(st, 1);
}

void raw_bulk_put(benchmark::State& st) {
  const auto chunk = static_cast<std::size_t>(st.range(0));
  auto mem = std::make_unique<std::byte[]>(buffer_bytes);
  auto src = std::make_unique<std::byte[]>(chunk);
  std::size_t pos = 0;
  for (auto _ : st) {
    if (buffer_bytes - pos < chunk) pos = 0;
    std::memcpy(mem.get() + pos, src.get(), chunk);
    pos += chunk;
    benchmark::DoNotOptimize(src.get());
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations() * chunk));
  per_op(st, 1);
}

template <class T, Mode M, bool Escaped>
void register_typed() {
  const std::string base =
      fmt::format("{}_{}{}", mode_name(M), Typed<T>::name, Escaped ? "/escaped" : "");
  constexpr bool swap_big = niox::native_order() != ByteOrder::big_endian;
  // Big-endian (Java's default) first: byte-swapped on little-endian machines.
  benchmark::RegisterBenchmark((base + "/big/niox").c_str(), [](benchmark::State& st) {
    niox_typed<T, M, Escaped>(st, ByteOrder::big_endian);
  });
  benchmark::RegisterBenchmark((base + "/big/raw").c_str(), raw_typed<T, M, swap_big, Escaped>);
  benchmark::RegisterBenchmark((base + "/native/niox").c_str(), [](benchmark::State& st) {
    niox_typed<T, M, Escaped>(st, niox::native_order());
  });
  benchmark::RegisterBenchmark((base + "/native/raw").c_str(), raw_typed<T, M, false, Escaped>);
}

template <class T>
void register_all_modes() {
  register_typed<T, Mode::get_relative, false>();
  register_typed<T, Mode::get_absolute, false>();
  register_typed<T, Mode::put_relative, false>();
  register_typed<T, Mode::put_absolute, false>();
}

template <class T>
void register_escaped() {
  register_typed<T, Mode::get_relative, true>();
  register_typed<T, Mode::put_relative, true>();
}

}  // namespace

int main(int argc, char** argv) {
  register_all_modes<std::int32_t>();
  register_all_modes<std::int64_t>();
  register_escaped<std::int32_t>();
  register_escaped<std::int64_t>();
  for (std::int64_t chunk : {64, 1024, 64 * 1024}) {
    benchmark::RegisterBenchmark("bulk_get/niox", niox_bulk_get)->Arg(chunk);
    benchmark::RegisterBenchmark("bulk_get/raw", raw_bulk_get)->Arg(chunk);
    benchmark::RegisterBenchmark("bulk_put/niox", niox_bulk_put)->Arg(chunk);
    benchmark::RegisterBenchmark("bulk_put/raw", raw_bulk_put)->Arg(chunk);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
