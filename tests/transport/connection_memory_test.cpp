// What a connection's transport state costs while idle. An OutboundBuffer between writes holds
// nothing of its own: its entry ring comes from the thread's block cache and goes back when
// drained, and the gathering iovecs are the thread's, so a new connection's first write, once
// the thread is warm, makes no heap allocation. A promise's state (every channel keeps one for
// its close future) takes the cache's 128-byte class.
#define NIOX_TEST_DEFINE_COUNTING_NEW

#include <niox/buffer/buffer_pool.hpp>
#include <niox/transport/channel_future.hpp>
#include <niox/transport/outbound_buffer.hpp>

#include "support/counting_new.hpp"

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

TEST(OutboundBufferMemory, ADrainedBufferKeepsNothingSoTheNextConnectionAllocatesNothing) {
  {
    OutboundBuffer warm;  // the thread's first connection fills its caches
    write_through(warm, ByteBuffer::wrap(std::string_view("first")));
  }
  OutboundBuffer next;
  auto one = ByteBuffer::wrap(std::string_view("second"));
  auto two = ByteBuffer::wrap(std::string_view("third"));
  test::allocations = 0;
  test::counting = true;
  write_through(next, one);
  write_through(next, two);
  test::counting = false;
  EXPECT_EQ(test::allocations, 0u);
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
