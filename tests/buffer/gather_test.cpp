#include <niox/buffer/gather.hpp>

#include <gtest/gtest.h>

#include <algorithm>
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
  std::vector<ByteBuffer> bufs{ByteBuffer::allocate(4),
                               ByteBuffer::allocate(4).as_read_only_buffer()};
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

namespace {
std::vector<std::byte> concat(std::span<const iovec> iov) {
  std::vector<std::byte> out;
  for (const auto& v : iov) {
    auto* p = static_cast<const std::byte*>(v.iov_base);
    out.insert(out.end(), p, p + v.iov_len);
  }
  return out;
}

bool points_into(const iovec& v, std::span<const std::byte> mem) {
  auto* p = static_cast<const std::byte*>(v.iov_base);
  return p >= mem.data() && p + v.iov_len <= mem.data() + mem.size();
}
}  // namespace

TEST(GatherBuilder, CoalescesRunsAndLeavesLoneAndLargePiecesInPlace) {
  std::vector<std::byte> a(10, std::byte{1}), b(7, std::byte{2}), c(30, std::byte{3});
  std::vector<std::byte> big(5000, std::byte{4}), d(5, std::byte{5});
  std::vector<std::byte> scratch(1024);
  iovec iov[8];
  niox::GatherBuilder g(iov, niox::max_bytes_per_call, scratch, 64);
  for (auto* p : {&a, &b, &c, &big, &d}) {
    ASSERT_TRUE(g.add(*p));
  }
  ASSERT_EQ(g.iovec_count(), 3u);
  EXPECT_EQ(g.bytes(), 5052u);
  EXPECT_TRUE(points_into(iov[0], scratch));
  EXPECT_EQ(iov[0].iov_len, 47u);
  EXPECT_EQ(iov[1].iov_base, big.data());
  EXPECT_EQ(iov[2].iov_base, d.data());  // a lone small piece is not copied
  std::vector<std::byte> want;
  for (auto* p : {&a, &b, &c, &big, &d}) want.insert(want.end(), p->begin(), p->end());
  EXPECT_EQ(concat(g.iovecs()), want);
}

TEST(GatherBuilder, FullScratchEndsTheWriteAndBudgetTrims) {
  std::vector<std::byte> piece(40, std::byte{9});
  std::vector<std::byte> scratch(100);
  iovec iov[8];
  niox::GatherBuilder g(iov, 1000, scratch, 64);
  EXPECT_TRUE(g.add(piece));
  EXPECT_TRUE(g.add(piece));   // copied: 80 of 100
  EXPECT_FALSE(g.add(piece));  // would not fit: refused, not added
  EXPECT_EQ(g.bytes(), 80u);
  EXPECT_EQ(g.iovec_count(), 1u);

  niox::GatherBuilder t(iov, 50, scratch, 64);
  EXPECT_TRUE(t.add(piece));
  EXPECT_TRUE(t.add(piece));  // trimmed to the 10 bytes left
  EXPECT_FALSE(t.add(piece));
  EXPECT_EQ(t.bytes(), 50u);

  niox::GatherBuilder none(iov, 1000);  // no scratch: one iovec per piece, never copies
  EXPECT_TRUE(none.add(piece));
  EXPECT_TRUE(none.add(piece));
  EXPECT_EQ(none.iovec_count(), 2u);
  EXPECT_EQ(iov[1].iov_base, piece.data());
}

// Any mix of piece sizes, budgets, iovec counts and scratch sizes: the iovecs always carry a
// non-empty prefix of the concatenation, and advancing by any part of it (a short write) leaves
// the buffers exactly at the next byte; repeating until done reproduces the whole stream.
TEST(GatherBuilder, RandomShortWritesReproduceTheStream) {
  std::mt19937 rng(42);
  for (int round = 0; round < 500; ++round) {
    std::vector<std::vector<std::byte>> storage(1 + rng() % 40);
    std::vector<ByteBuffer> bufs;
    std::vector<std::byte> want;
    for (auto& s : storage) {
      std::size_t len = rng() % 4 == 0 ? rng() % 300 : rng() % 12;
      s.resize(len);
      for (auto& x : s) x = static_cast<std::byte>(rng());
      bufs.push_back(ByteBuffer::wrap(std::span<std::byte>(s)));
      want.insert(want.end(), s.begin(), s.end());
    }
    std::vector<std::byte> scratch(rng() % 200);
    std::size_t coalesce_max = rng() % 64;
    std::vector<iovec> iov(1 + rng() % 6);
    std::vector<std::byte> got;
    std::size_t first = 0;
    while (first < bufs.size() && got.size() < want.size()) {
      std::size_t bytes = 0;
      std::size_t budget = 1 + rng() % 500;
      auto n = niox::gather_iovecs(std::span<const ByteBuffer>(bufs).subspan(first), iov, budget,
                                   scratch, coalesce_max, bytes);
      ASSERT_GT(n, 0u);
      ASSERT_GT(bytes, 0u);
      ASSERT_LE(bytes, budget);
      auto offered = concat(std::span<const iovec>(iov.data(), n));
      ASSERT_EQ(offered.size(), bytes);
      ASSERT_TRUE(std::equal(offered.begin(), offered.end(), want.begin() + got.size()));
      std::size_t took = 1 + rng() % bytes;  // the kernel takes a prefix
      got.insert(got.end(), offered.begin(), offered.begin() + took);
      first += niox::advance(std::span<ByteBuffer>(bufs).subspan(first), took);
      ASSERT_EQ(niox::total_remaining(bufs), want.size() - got.size());
    }
    EXPECT_EQ(got, want);
  }
}
