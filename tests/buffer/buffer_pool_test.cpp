#include <niox/buffer/buffer_pool.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define NIOX_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NIOX_TEST_ASAN 1
#endif
#endif
#ifdef NIOX_TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

using namespace niox;

namespace {

const std::byte* base_of(const ByteBuffer& b) { return b.bytes().data() - b.position(); }

// Runs f on a fresh thread, whose pool starts empty.
template <class F>
void on_new_thread(F f) {
  std::thread t(std::move(f));
  t.join();
}

}  // namespace

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
  on_new_thread([] {
    BufferPool& pool = BufferPool::for_this_thread();
    const std::byte* first;
    {
      ByteBuffer b = pool.allocate(1000);
      EXPECT_EQ(b.capacity(), 1000u);
      EXPECT_EQ(b.position(), 0u);
      EXPECT_EQ(b.limit(), 1000u);
      EXPECT_FALSE(b.is_read_only());
      b.put_int(42);
      first = base_of(b);
      // A view keeps the block out of the pool.
      ByteBuffer view = b.duplicate();
      b = ByteBuffer();
      EXPECT_EQ(view.get_int(0), 42);
      ByteBuffer other = pool.allocate(900);  // same class, but the block is still in use
      EXPECT_NE(base_of(other), first);
    }
    auto s = pool.stats();
    EXPECT_EQ(s.allocations, 2u);
    EXPECT_EQ(s.reused, 0u);
    EXPECT_GE(s.cached_bytes, 2u * 1024);
    ByteBuffer again = pool.allocate(900);  // same class: a cached block
    EXPECT_EQ(again.capacity(), 900u);
    EXPECT_EQ(base_of(again), first);
    s = pool.stats();
    EXPECT_EQ(s.allocations, 3u);
    EXPECT_EQ(s.reused, 1u);
  });
}

TEST(BufferPool, PooledBytesAreNotZeroFilled) {
  on_new_thread([] {
    BufferPool& pool = BufferPool::for_this_thread();
    const std::byte* first;
    {
      ByteBuffer b = pool.allocate(256);
      std::memset(b.writable_bytes().data(), 0xab, b.capacity());
      first = base_of(b);
    }
    ByteBuffer again = pool.allocate(256);
    ASSERT_EQ(base_of(again), first);
    // What the earlier user left is still there (past the cache's own bookkeeping at the start).
    EXPECT_EQ(again.get(255), std::uint8_t{0xab});
  });
}

TEST(BufferPool, TheCacheOfAClassIsBoundedAndLargeRequestsAreNotPooled) {
  on_new_thread([] {
    BufferPool& pool = BufferPool::for_this_thread();
    constexpr std::size_t size = BufferPool::max_class_size;
    constexpr std::size_t kept = BufferPool::max_cached_bytes_per_class / size;  // 64
    {
      std::vector<ByteBuffer> bufs;
      for (std::size_t i = 0; i < 2 * kept; ++i) bufs.push_back(pool.allocate(size));
    }
    EXPECT_GE(pool.stats().cached_bytes, kept * size);
    auto before = pool.stats();
    {
      std::vector<ByteBuffer> bufs;
      for (std::size_t i = 0; i < 2 * kept; ++i) bufs.push_back(pool.allocate(size));
    }
    EXPECT_EQ(pool.stats().reused - before.reused, kept) << "only " << kept << " blocks were kept";

    ByteBuffer big = pool.allocate(size + 1);
    EXPECT_EQ(big.capacity(), size + 1);
    EXPECT_EQ(big.position(), 0u);
    EXPECT_EQ(pool.stats().unpooled, 1u);
    EXPECT_EQ(pool.stats().allocations, 4 * kept);
  });
}

TEST(BufferPool, ABufferReleasedOnAnotherThreadGoesToThatThreadsPool) {
  std::vector<ByteBuffer> bufs;
  for (int i = 0; i < 64; ++i) {
    bufs.push_back(BufferPool::for_this_thread().allocate(static_cast<std::size_t>(64 << (i % 8))));
  }
  // The last 2048-byte buffer released below: the one that thread's cache hands out first.
  const std::byte* moved_block = base_of(bufs[61]);
  on_new_thread([moved = std::move(bufs), moved_block]() mutable {
    for (auto& b : moved) b.put(std::uint8_t{1});
    for (auto& b : moved) b = ByteBuffer();  // released in order, on this thread
    BufferPool& pool = BufferPool::for_this_thread();
    ByteBuffer b = pool.allocate(2000);
    EXPECT_EQ(base_of(b), moved_block);
    EXPECT_EQ(pool.stats().reused, 1u);
  });
  // A buffer may also outlive the thread that allocated it.
  ByteBuffer survivor;
  on_new_thread([&survivor] { survivor = BufferPool::for_this_thread().allocate(100); });
  survivor.put_long(7);
  survivor.flip();
  EXPECT_EQ(survivor.get_long(), 7);
}

TEST(BufferPool, EachThreadHasItsOwnPool) {
  BufferPool* mine = &BufferPool::for_this_thread();
  BufferPool* other = nullptr;
  on_new_thread([&] { other = &BufferPool::for_this_thread(); });
  EXPECT_NE(mine, other);
  EXPECT_EQ(mine, &BufferPool::for_this_thread());
}

TEST(BufferPool, AReleasedBlockIsPoisonedUnderAddressSanitizer) {
#ifndef NIOX_TEST_ASAN
  GTEST_SKIP() << "built without AddressSanitizer";
#else
  on_new_thread([] {
    BufferPool& pool = BufferPool::for_this_thread();
    const std::byte* first;
    {
      ByteBuffer b = pool.allocate(1000);
      first = base_of(b);
      EXPECT_EQ(__asan_address_is_poisoned(first + 100), 0);
    }
    EXPECT_NE(__asan_address_is_poisoned(first + 100), 0);
    EXPECT_NE(__asan_address_is_poisoned(first + 1023), 0);
    ByteBuffer again = pool.allocate(1000);
    ASSERT_EQ(base_of(again), first);
    EXPECT_EQ(__asan_address_is_poisoned(first + 100), 0);
    EXPECT_EQ(__asan_address_is_poisoned(first + 999), 0);
  });
#endif
}

// outstanding counts the pool's buffers still held, wherever they are released: views do not
// count again, unpooled buffers not at all.
TEST(BufferPool, OutstandingCountsHeldBuffersReleasedOnAnyThread) {
  on_new_thread([] {
    BufferPool& pool = BufferPool::for_this_thread();
    EXPECT_EQ(pool.stats().outstanding, 0u);
    ByteBuffer a = pool.allocate(100);
    ByteBuffer b = pool.allocate(5000);
    ByteBuffer big = pool.allocate(BufferPool::max_class_size + 1);
    ByteBuffer view = a.slice();
    EXPECT_EQ(pool.stats().outstanding, 2u);
    a = ByteBuffer();
    EXPECT_EQ(pool.stats().outstanding, 2u) << "a view still holds the block";
    view = ByteBuffer();
    EXPECT_EQ(pool.stats().outstanding, 1u);
    std::thread([moved = std::move(b)]() mutable { moved = ByteBuffer(); }).join();
    EXPECT_EQ(pool.stats().outstanding, 0u);
  });
}

// A buffer may outlive the thread whose pool made it: its release afterwards is still counted
// against that pool's (orphaned) count and frees it (LeakSanitizer watches).
TEST(BufferPool, ABufferOutlivesItsPoolsThread) {
  ByteBuffer kept;
  std::thread([&kept] {
    kept = BufferPool::for_this_thread().allocate(300);
    kept.put_int(7);
  }).join();
  EXPECT_EQ(kept.get_int(0), 7);
  kept = ByteBuffer();
  EXPECT_EQ(BufferPool::for_this_thread().stats().outstanding, 0u);
}
