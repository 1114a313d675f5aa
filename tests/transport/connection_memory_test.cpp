// What a connection's transport state costs while idle. An OutboundBuffer between writes holds
// nothing of its own: its entry ring goes back to the thread's block cache when drained (that a
// new connection's first write then allocates nothing is in allocation_test.cpp, which counts
// this binary's allocations). A promise's state (every channel keeps one for its close future)
// takes the cache's 128-byte class.

#include <niox/buffer/buffer_pool.hpp>
#include <niox/transport/channel_future.hpp>
#include <niox/transport/outbound_buffer.hpp>

#include <gtest/gtest.h>

#include <string_view>

namespace niox {
namespace {

// One flushed write of `b`, gathered and taken whole by the pretend kernel.
void write_through(OutboundBuffer& out, ByteBuffer b) {
  const std::size_t n = b.remaining();
  out.add_message(std::move(b), {});
  out.add_flush();
  GatherWrite g = out.gather();
  ASSERT_EQ(g.bytes, n);
  out.remove_bytes(n);
  ASSERT_TRUE(out.is_empty());
}

// The ring's block goes back to the thread's cache when the last entry completes, not when the
// buffer is destroyed: an idle connection keeps none.
TEST(OutboundBufferMemory, TheLastCompletedEntryGivesTheEntryRingBack) {
  auto cached = [] { return BufferPool::for_this_thread().stats().cached_bytes; };
  {
    OutboundBuffer warm;
    write_through(warm, ByteBuffer::wrap(std::string_view("first")));
  }
  OutboundBuffer out;
  out.add_message(ByteBuffer::wrap(std::string_view("queued")), {});
  out.add_flush();
  const std::size_t while_queued = cached();
  GatherWrite g = out.gather();
  out.remove_bytes(g.bytes);
  ASSERT_TRUE(out.is_empty());
  EXPECT_GT(cached(), while_queued);
}

TEST(ConnectionMemory, APromiseStateTakesTheSmallClassOfTheBlockCache) {
  EXPECT_LE(BufferPool::class_size(sizeof(detail::PromiseState)), 128u);
}

}  // namespace
}  // namespace niox
