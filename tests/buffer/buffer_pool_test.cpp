#include <niox/buffer/buffer_pool.hpp>

#include <gtest/gtest.h>

#include <thread>
#include <vector>

using namespace niox;

TEST(BufferPool, SizeClassesArePowersOfTwoFromSixtyFourToSixtyFourKibibytes) {
  EXPECT_EQ(BufferPool::class_size(0), 64u);
  EXPECT_EQ(BufferPool::class_size(1), 64u);
  EXPECT_EQ(BufferPool::class_size(64), 64u);
  EXPECT_EQ(BufferPool::class_size(65), 128u);
  EXPECT_EQ(BufferPool::class_size(2048), 2048u);
  EXPECT_EQ(BufferPool::class_size(2049), 4096u);
  EXPECT_EQ(BufferPool::class_size(65536), 65536u);
  EXPECT_EQ(BufferPool::class_size(65537), 0u);
}

TEST(BufferPool, ReleasedBlocksAreReusedAndTheCapacityIsWhatWasAsked) {
  BufferPool pool;
  const std::byte* first;
  {
    ByteBuffer b = pool.allocate(1000);
    EXPECT_EQ(b.capacity(), 1000u);
    EXPECT_EQ(b.position(), 0u);
    EXPECT_EQ(b.limit(), 1000u);
    EXPECT_FALSE(b.is_read_only());
    b.put_int(42);
    first = b.bytes().data() - 4;
    EXPECT_EQ(pool.stats().outstanding_bytes, 1024u);
    // A view keeps the block out of the pool.
    ByteBuffer view = b.duplicate();
    b = ByteBuffer();
    EXPECT_EQ(pool.stats().cached_bytes, 0u);
  }
  auto s = pool.stats();
  EXPECT_EQ(s.cached_bytes, 1024u);
  EXPECT_EQ(s.outstanding_bytes, 0u);
  ByteBuffer again = pool.allocate(900);  // same class
  EXPECT_EQ(static_cast<const std::byte*>(again.bytes().data()), first);
  s = pool.stats();
  EXPECT_EQ(s.allocations, 2u);
  EXPECT_EQ(s.reused, 1u);
  EXPECT_EQ(s.cached_bytes, 0u);
}

TEST(BufferPool, TheCacheOfAClassIsBoundedAndLargeRequestsAreNotPooled) {
  BufferPool pool(64 * 1024);  // at most 64 KiB of free blocks per class
  {
    std::vector<ByteBuffer> bufs;
    for (int i = 0; i < 100; ++i) bufs.push_back(pool.allocate(4096));
    EXPECT_EQ(pool.stats().outstanding_bytes, 100u * 4096);
  }
  EXPECT_EQ(pool.stats().cached_bytes, 64u * 1024);
  ByteBuffer big = pool.allocate(1 << 20);
  EXPECT_EQ(big.capacity(), 1u << 20);
  EXPECT_EQ(pool.stats().unpooled, 1u);
  pool.trim();
  EXPECT_EQ(pool.stats().cached_bytes, 0u);
}

TEST(BufferPool, BuffersMayBeReleasedOnAnotherThreadAndOutliveThePool) {
  std::vector<ByteBuffer> bufs;
  {
    BufferPool pool;
    for (int i = 0; i < 64; ++i) bufs.push_back(pool.allocate(static_cast<std::size_t>(64 << (i % 8))));
    std::thread t([moved = std::move(bufs)]() mutable {
      for (auto& b : moved) b.put(std::uint8_t{1});
      moved.clear();
    });
    t.join();
    EXPECT_EQ(pool.stats().outstanding_bytes, 0u);
    EXPECT_GT(pool.stats().cached_bytes, 0u);
    bufs.push_back(pool.allocate(100));
  }
  // The pool object is gone; the buffer still owns its block (ASan checks the rest).
  bufs.back().put_long(7);
  bufs.clear();
}

TEST(BufferPool, EachThreadHasItsOwnPool) {
  BufferPool* mine = &BufferPool::for_this_thread();
  BufferPool* other = nullptr;
  std::thread t([&] { other = &BufferPool::for_this_thread(); });
  t.join();
  EXPECT_NE(mine, other);
  EXPECT_EQ(mine, &BufferPool::for_this_thread());
}
