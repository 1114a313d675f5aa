// A counting replacement of operator new, for the steady-state allocation tests: while
// `counting` is set on a thread, every operator new on that thread adds one to `allocations`
// and its size to `allocated_bytes`.
// The replacement forwards to malloc/free. The replaceable global functions are defined by the
// one source file of a test binary that includes this with NIOX_TEST_DEFINE_COUNTING_NEW set;
// the others see only the counters.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace niox::test {
inline thread_local bool counting = false;
inline thread_local std::size_t allocations = 0;
inline thread_local std::size_t allocated_bytes = 0;
}  // namespace niox::test

#ifdef NIOX_TEST_DEFINE_COUNTING_NEW
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  if (niox::test::counting) {
    ++niox::test::allocations;
    niox::test::allocated_bytes += n;
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif
