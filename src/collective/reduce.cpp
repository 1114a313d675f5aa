// The loops are written so that GCC and Clang vectorise them at -O2 and above (no aliasing:
// __restrict; no reassociation: each element is combined once, so no -ffast-math is needed and
// the result is bit-for-bit what a scalar loop gives). target_clones builds each function
// twice, for x86-64's baseline (SSE2) and for AVX2, and the loader picks one for the CPU at run
// time. min and max take the first operand when the two compare equal or either is NaN, as
// `b < a ? b : a` does: the form minps / maxps implement.
#include "reduce.hpp"

#include <cstdint>

namespace niox::collective::detail {

namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define NIOX_REDUCE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define NIOX_REDUCE_CLONES
#endif

#define NIOX_REDUCE_FN(name, T, expr)                                                   \
  NIOX_REDUCE_CLONES void name(T* __restrict d, const T* __restrict s, std::size_t n) { \
    for (std::size_t i = 0; i < n; ++i) {                                               \
      T a = d[i];                                                                       \
      T b = s[i];                                                                       \
      d[i] = (expr);                                                                    \
    }                                                                                   \
  }

// T combined as U: uint8_t as unsigned (wrapping modulo 256 once stored), the signed integers
// as their unsigned twins (signed overflow is undefined in C++: two's complement wrap-around
// is what MPI implementations give in practice), compared as T.
#define NIOX_REDUCE_TYPE(T, U, suffix)                                                    \
  NIOX_REDUCE_FN(sum_##suffix, T, static_cast<T>(static_cast<U>(a) + static_cast<U>(b)))  \
  NIOX_REDUCE_FN(prod_##suffix, T, static_cast<T>(static_cast<U>(a) * static_cast<U>(b))) \
  NIOX_REDUCE_FN(min_##suffix, T, b < a ? b : a)                                          \
  NIOX_REDUCE_FN(max_##suffix, T, a < b ? b : a)                                          \
  void reduce_##suffix(void* d, const void* s, std::size_t n, ReduceOp op) noexcept {     \
    auto* dd = static_cast<T*>(d);                                                        \
    auto* ss = static_cast<const T*>(s);                                                  \
    switch (op) {                                                                         \
      case ReduceOp::sum: return sum_##suffix(dd, ss, n);                                 \
      case ReduceOp::prod: return prod_##suffix(dd, ss, n);                               \
      case ReduceOp::min: return min_##suffix(dd, ss, n);                                 \
      case ReduceOp::max: return max_##suffix(dd, ss, n);                                 \
    }                                                                                     \
  }

NIOX_REDUCE_TYPE(std::uint8_t, unsigned, u8)
NIOX_REDUCE_TYPE(std::int32_t, std::uint32_t, i32)
NIOX_REDUCE_TYPE(std::int64_t, std::uint64_t, i64)
NIOX_REDUCE_TYPE(float, float, f32)
NIOX_REDUCE_TYPE(double, double, f64)

}  // namespace

void reduce_into(void* dst, const void* src, std::size_t count, DataType type,
                 ReduceOp op) noexcept {
  switch (type) {
    case DataType::u8: return reduce_u8(dst, src, count, op);
    case DataType::i32: return reduce_i32(dst, src, count, op);
    case DataType::i64: return reduce_i64(dst, src, count, op);
    case DataType::f32: return reduce_f32(dst, src, count, op);
    case DataType::f64: return reduce_f64(dst, src, count, op);
  }
}

}  // namespace niox::collective::detail
