#include <niox/loop/detail/unique_function.hpp>

#include <gtest/gtest.h>

#include <array>
#include <memory>

namespace niox::detail {
namespace {

TEST(UniqueFunction, HoldsMoveOnlyCallablesInline) {
  auto p = std::make_unique<int>(41);
  UniqueFunction<int(int)> f = [p = std::move(p)](int x) { return *p + x; };
  EXPECT_TRUE(f.is_inline());
  EXPECT_EQ(f(1), 42);
  UniqueFunction<int(int)> g = std::move(f);
  EXPECT_FALSE(static_cast<bool>(f));
  EXPECT_EQ(g(2), 43);
}

TEST(UniqueFunction, LargeCapturesGoToTheHeapAndAreDestroyedOnce) {
  auto counter = std::make_shared<int>(0);
  {
    std::array<char, 200> big{};
    UniqueFunction<int()> f = [big, counter] { return static_cast<int>(big.size()) + *counter; };
    EXPECT_FALSE(f.is_inline());
    EXPECT_EQ(counter.use_count(), 2);
    UniqueFunction<int()> g;
    g = std::move(f);
    EXPECT_EQ(g(), 200);
    EXPECT_EQ(counter.use_count(), 2);
  }
  EXPECT_EQ(counter.use_count(), 1);
}

TEST(UniqueFunction, EmptyCallThrowsAndResetDestroys) {
  UniqueFunction<void()> f;
  EXPECT_THROW(f(), std::bad_function_call);
  auto counter = std::make_shared<int>(0);
  f = [counter] {};
  EXPECT_EQ(counter.use_count(), 2);
  f = nullptr;
  EXPECT_EQ(counter.use_count(), 1);
}

}  // namespace
}  // namespace niox::detail
