// The load generator's verdicts: the payload stream catches any lost, repeated, moved or flipped
// byte; the histogram never under-reports a percentile; CPU time is read from the right fields.
#include "../../bench/loadgen_core.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace nb = niox::bench;

namespace {

std::vector<unsigned char> stream(std::uint64_t key, std::uint64_t offset, std::size_t len) {
  std::vector<unsigned char> v(len);
  nb::fill_stream(key, offset, v.data(), len);
  return v;
}

TEST(LoadgenStream, AnyPieceMatchesTheWholeStream) {
  const auto whole = stream(42, 0, 4096);
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::size_t off = rng() % 4000;
    std::size_t len = 1 + rng() % (4096 - off - 1);
    auto piece = stream(42, off, len);
    ASSERT_TRUE(std::equal(piece.begin(), piece.end(), whole.begin() + static_cast<long>(off)))
        << "offset " << off << " length " << len;
  }
}

TEST(LoadgenStream, KeysAndOffsetsGiveDifferentBytes) {
  EXPECT_NE(stream(1, 0, 256), stream(2, 0, 256));
  // A whole message lost or repeated shifts the stream by its size: that must not compare equal.
  for (std::size_t shift : {1u, 8u, 64u, 128u, 16384u}) {
    EXPECT_NE(stream(1, 0, 256), stream(1, shift, 256)) << "shift " << shift;
  }
}

TEST(LoadgenStream, FirstMismatchFindsTheExactByte) {
  std::vector<unsigned char> scratch(1024);
  auto data = stream(9, 300, 1024);
  EXPECT_FALSE(nb::first_mismatch(9, 300, data.data(), data.size(), scratch.data()));

  auto flipped = data;
  flipped[517] ^= 0x01;
  auto at = nb::first_mismatch(9, 300, flipped.data(), flipped.size(), scratch.data());
  ASSERT_TRUE(at);
  EXPECT_EQ(*at, 517u);

  // A dropped byte: everything from there on is shifted by one.
  auto dropped = data;
  dropped.erase(dropped.begin() + 100);
  at = nb::first_mismatch(9, 300, dropped.data(), dropped.size(), scratch.data());
  ASSERT_TRUE(at);
  EXPECT_LE(*at, 101u);  // equal neighbours may hide the exact spot by a byte, never more

  // Data from the right stream at the wrong offset (a repeated message).
  auto repeated = stream(9, 300 - 128, 1024);
  EXPECT_TRUE(nb::first_mismatch(9, 300, repeated.data(), repeated.size(), scratch.data()));
}

TEST(LoadgenHistogram, EmptyIsZero) {
  nb::Histogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.quantile(0.5), 0u);
  EXPECT_EQ(h.quantile(0.999), 0u);
}

TEST(LoadgenHistogram, SmallValuesAreExact) {
  nb::Histogram h;
  for (std::uint64_t v = 1; v <= 200; ++v) h.record(v);
  EXPECT_EQ(h.count(), 200u);
  EXPECT_EQ(h.quantile(0.5), 100u);
  EXPECT_EQ(h.quantile(0.99), 198u);
  EXPECT_EQ(h.quantile(1.0), 200u);
  EXPECT_EQ(h.max(), 200u);
}

TEST(LoadgenHistogram, QuantilesNeverUnderReportAndStayWithinABucket) {
  // Latency-like data spanning five orders of magnitude; compare with exact nearest rank.
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> dist(10.0, 1.5);
  std::vector<std::uint64_t> samples(200000);
  nb::Histogram h;
  for (auto& s : samples) {
    s = 1 + static_cast<std::uint64_t>(dist(rng));
    h.record(s);
  }
  std::sort(samples.begin(), samples.end());
  for (double q : {0.5, 0.9, 0.99, 0.999, 0.9999}) {
    auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(samples.size())));
    std::uint64_t exact = samples[rank - 1];
    std::uint64_t got = h.quantile(q);
    EXPECT_GE(got, exact) << "q=" << q;
    EXPECT_LE(static_cast<double>(got), static_cast<double>(exact) * 1.008 + 1) << "q=" << q;
  }
  EXPECT_EQ(h.quantile(1.0), samples.back());
}

TEST(LoadgenHistogram, HugeValuesAndReset) {
  nb::Histogram h;
  h.record(UINT64_MAX);
  h.record(1ULL << 40);
  EXPECT_EQ(h.quantile(1.0), UINT64_MAX);
  EXPECT_GE(h.quantile(0.5), 1ULL << 40);
  h.reset();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.max(), 0u);
  EXPECT_EQ(h.quantile(0.5), 0u);
}

TEST(LoadgenCpu, ParsesUtimeAndStimeAfterTheCommandName) {
  // Fields 14 and 15 are utime and stime; the name holds spaces and a ')'.
  const char* stat =
      "1234 (my server) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 1 0 0";
  auto ticks = nb::stat_cpu_ticks(stat);
  ASSERT_TRUE(ticks);
  EXPECT_EQ(ticks->user, 250u);
  EXPECT_EQ(ticks->system, 75u);
  EXPECT_EQ(ticks->total(), 325u);
  EXPECT_FALSE(nb::stat_cpu_ticks("garbage"));
  EXPECT_FALSE(nb::stat_cpu_ticks("1 (short) S 1 2"));
}

TEST(LoadgenCpu, ReadsThisProcess) {
  auto before = nb::process_cpu_us(static_cast<int>(getpid()));
  ASSERT_TRUE(before);
  EXPECT_FALSE(nb::process_cpu_us(-1));
}

}  // namespace
