// What a connection's transport state costs while idle: a promise's state (every channel keeps
// one for its close future) takes the cache's 128-byte class. The outbound buffer's share (none
// once drained) is tested in allocation_test.cpp, beside its allocation count.
#include <niox/buffer/buffer_pool.hpp>
#include <niox/transport/channel_future.hpp>

#include <gtest/gtest.h>

namespace niox {
namespace {

TEST(ConnectionMemory, APromiseStateTakesTheSmallClassOfTheBlockCache) {
  EXPECT_LE(BufferPool::class_size(sizeof(detail::PromiseState)), 128u);
}

}  // namespace
}  // namespace niox
