#include <niox/buffer/gather.hpp>

#include <gtest/gtest.h>

#include <random>
#include <vector>

using niox::ByteBuffer;

TEST(Gather, SkipsEmptyTrimsToBudgetAndAdvancesExactly) {
  std::vector<ByteBuffer> bufs;
  bufs.push_back(ByteBuffer::allocate(10));
  bufs.push_back(ByteBuffer::allocate(0));
  bufs.push_back(ByteBuffer::allocate(5));
  bufs.push_back(ByteBuffer::allocate(7).position(7));
  bufs.push_back(ByteBuffer::allocate(8).position(2));
  iovec iov[8];
  auto n = niox::gather_iovecs(bufs, iov, 18);
  ASSERT_EQ(n, 3u);
  EXPECT_EQ(iov[0].iov_len, 10u);
  EXPECT_EQ(iov[1].iov_len, 5u);
  EXPECT_EQ(iov[2].iov_len, 3u);
  EXPECT_EQ(iov[2].iov_base, bufs[4].bytes().data());
  EXPECT_EQ(niox::total_remaining(bufs), 21u);

  EXPECT_EQ(niox::advance(bufs, 12), 2u);  // first fully, empty skipped, 2 into the third
  EXPECT_EQ(bufs[0].remaining(), 0u);
  EXPECT_EQ(bufs[2].position(), 2u);
  EXPECT_EQ(niox::advance(bufs, 9), bufs.size());
  EXPECT_EQ(bufs[4].position(), 8u);
}

TEST(Gather, StopsAtIovecCount) {
  std::vector<ByteBuffer> bufs(5, ByteBuffer::allocate(3));
  iovec iov[2];
  EXPECT_EQ(niox::gather_iovecs(bufs, iov), 2u);
}

TEST(Gather, ScatterRefusesReadOnlyWithRoom) {
  std::vector<ByteBuffer> bufs{ByteBuffer::allocate(4), ByteBuffer::allocate(4).as_read_only_buffer()};
  iovec iov[2];
  EXPECT_THROW(niox::scatter_iovecs(bufs, iov), niox::ReadOnlyBufferException);
  bufs[1] = ByteBuffer::allocate(4).as_read_only_buffer().flip();  // read-only but full: fine
  EXPECT_EQ(niox::scatter_iovecs(bufs, iov), 1u);
}

TEST(Gather, RandomAdvanceMatchesConcatenation) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<ByteBuffer> bufs;
    std::size_t total = 0;
    for (int i = 0, k = static_cast<int>(rng() % 20); i < k; ++i) {
      bufs.push_back(ByteBuffer::allocate(rng() % 9));
      total += bufs.back().remaining();
    }
    std::size_t moved = 0;
    while (moved < total) {
      std::size_t step = rng() % (total - moved + 1);
      niox::advance(bufs, step);
      moved += step;
      ASSERT_EQ(niox::total_remaining(bufs), total - moved);
    }
  }
}
