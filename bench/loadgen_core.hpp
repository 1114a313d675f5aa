// The parts of niox-loadgen that decide whether a figure is true: the payload every connection
// sends and checks, the latency histogram, and reading a process's CPU time. Header-only and
// free of niox so the load generator stays neutral; unit-tested in tests/bench/.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace niox::bench {

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Writes bytes [offset, offset+len) of the pseudo-random stream named by key. Random access
// (no generator state), so sender and verifier only have to agree on the offset, and a byte
// lost, repeated or moved anywhere in the stream changes what is compared after it.
inline void fill_stream(std::uint64_t key, std::uint64_t offset, unsigned char* dst,
                        std::size_t len) {
  std::uint64_t word = offset / 8;
  std::size_t skip = offset % 8;
  while (len > 0) {
    std::uint64_t v = splitmix64(key ^ (word * 0xd6e8feb86659fd93ULL));
    unsigned char bytes[8];
    std::memcpy(bytes, &v, 8);
    std::size_t n = std::min<std::size_t>(8 - skip, len);
    std::memcpy(dst, bytes + skip, n);
    dst += n;
    len -= n;
    skip = 0;
    ++word;
  }
}

// Compares data with bytes [offset, offset+len) of the stream; returns the index of the first
// differing byte, or nothing when all match. scratch must hold len bytes.
inline std::optional<std::size_t> first_mismatch(std::uint64_t key, std::uint64_t offset,
                                                 const unsigned char* data, std::size_t len,
                                                 unsigned char* scratch) {
  fill_stream(key, offset, scratch, len);
  if (std::memcmp(data, scratch, len) == 0) return std::nullopt;
  std::size_t at = 0;
  while (data[at] == scratch[at]) ++at;
  return at;
}

// Latency histogram: log-linear buckets, exact below 256 and under 0.8% wide above (128 per
// power of two), so millions of samples cost a fixed 58 KiB and no sorting.
class Histogram {
 public:
  static constexpr int kSubBits = 7;
  static constexpr std::uint64_t kSub = 1u << kSubBits;
  static constexpr std::size_t kBuckets = (64 - kSubBits + 1) * kSub;

  Histogram() : counts_(kBuckets, 0) {}

  void record(std::uint64_t v) {
    ++counts_[index(v)];
    ++total_;
    max_ = std::max(max_, v);
  }
  void reset() {
    std::fill(counts_.begin(), counts_.end(), 0);
    total_ = 0;
    max_ = 0;
  }
  std::uint64_t count() const { return total_; }
  std::uint64_t max() const { return max_; }

  // The upper edge of the bucket holding the q-quantile (nearest rank), capped at the maximum:
  // never below the true value, at most one bucket width above it.
  std::uint64_t quantile(double q) const {
    if (total_ == 0) return 0;
    auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(total_)));
    rank = std::clamp<std::uint64_t>(rank, 1, total_);
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen >= rank) return std::min(upper(i), max_);
    }
    return max_;
  }

 private:
  // Bucket (shift, sub) holds [(kSub + sub) << shift, (kSub + sub + 1) << shift).
  static std::size_t index(std::uint64_t v) {
    if (v < kSub) return static_cast<std::size_t>(v);
    int shift = (63 - __builtin_clzll(v)) - kSubBits;
    std::uint64_t sub = (v >> shift) - kSub;
    return static_cast<std::size_t>(shift + 1) * kSub + static_cast<std::size_t>(sub);
  }
  static std::uint64_t upper(std::size_t i) {
    if (i < kSub) return i;
    std::size_t shift = i / kSub - 1;
    std::uint64_t sub = i % kSub;
    return ((kSub + sub + 1) << shift) - 1;
  }

  std::vector<std::uint64_t> counts_;
  std::uint64_t total_ = 0;
  std::uint64_t max_ = 0;
};

// A process's CPU time, split as the kernel accounts it: in its own code (utime) and in the
// kernel on its behalf (stime, the system calls and the work they do).
struct CpuTime {
  std::uint64_t user = 0;
  std::uint64_t system = 0;
  std::uint64_t total() const noexcept { return user + system; }
};

// utime and stime (clock ticks) from the text of /proc/PID/stat. The command name may hold
// spaces and parentheses, so fields are counted from the last ')'.
inline std::optional<CpuTime> stat_cpu_ticks(std::string_view stat) {
  auto close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string rest(stat.substr(close + 1));
  // Fields after ')' start at 3 (state); utime is 14, stime 15.
  int field = 2;
  CpuTime t;
  const char* p = rest.c_str();
  while (*p) {
    while (*p == ' ') ++p;
    if (!*p) break;
    ++field;
    char* end = nullptr;
    if (field == 14) {
      t.user = std::strtoull(p, &end, 10);
    } else if (field == 15) {
      t.system = std::strtoull(p, &end, 10);
      return t;
    }
    while (*p && *p != ' ') ++p;
  }
  return std::nullopt;
}

// Process-wide (all threads) utime and stime of pid in microseconds.
inline std::optional<CpuTime> process_cpu_us(int pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "re");
  if (!f) return std::nullopt;
  char buf[4096];
  std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  auto ticks = stat_cpu_ticks(std::string_view(buf, n));
  if (!ticks) return std::nullopt;
  const auto hz = static_cast<std::uint64_t>(sysconf(_SC_CLK_TCK));
  return CpuTime{ticks->user * 1000000ULL / hz, ticks->system * 1000000ULL / hz};
}

}  // namespace niox::bench
