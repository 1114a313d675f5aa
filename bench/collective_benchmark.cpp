// niox-collective-bench: niox::collective's operations by size, shaped like nccl-tests and
// measured exactly as bench/peers' Gloo and Open MPI programs measure theirs (bench/run's
// collective workload compares them in one run):
//
//   niox-collective-run -n 2 niox-collective-bench --op all_reduce --min 8 --max 268435456
//
// For each size from --min to --max (doubling), after --warmup untimed calls, every rank times
// --iters calls one by one (what a collective writes is reset before each call by a plain copy
// or fill, then a barrier, both outside the timed part, as in the peers), the slowest rank's
// mean time is the figure, and rank 0 prints
//   bytes=N us=T algbw_GBps=A busbw_GBps=B ok=1
// bytes is the full buffer (all_gather, gather: the gathered one; reduce_scatter, scatter: the
// one split up), algbw = bytes / time, busbw is nccl-tests' bus bandwidth (algbw times 2(n-1)/n
// for all_reduce, (n-1)/n for all_gather, reduce_scatter, all_to_all, scatter and gather, 1 for
// broadcast and reduce). Every element of the last call's result is checked on every rank
// (ok=0 and exit status 1 on a mismatch). Elements are float32 with small whole values, so
// sums are exact. The loop backend follows NIOX_BACKEND.
#include <niox/collective/communicator.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using niox::collective::Communicator;
using niox::collective::ReduceOp;

enum class Op {
  all_reduce,
  all_gather,
  broadcast,
  reduce,
  reduce_scatter,
  all_to_all,
  scatter,
  gather
};
constexpr std::pair<std::string_view, Op> kOps[] = {{"all_reduce", Op::all_reduce},
                                                    {"all_gather", Op::all_gather},
                                                    {"broadcast", Op::broadcast},
                                                    {"reduce", Op::reduce},
                                                    {"reduce_scatter", Op::reduce_scatter},
                                                    {"all_to_all", Op::all_to_all},
                                                    {"scatter", Op::scatter},
                                                    {"gather", Op::gather}};

constexpr const char* kUsage =
    "usage: niox-collective-bench --op OP [--min BYTES] [--max BYTES] [--iters K] [--warmup W]\n"
    "                             [--chunk-bytes B] [--ring-threshold B] [--busy-poll US]\n"
    "                             [--progress-thread]\n"
    "  OP: all_reduce all_gather broadcast reduce reduce_scatter all_to_all scatter gather\n"
    "  --chunk-bytes, --ring-threshold, --busy-poll and --progress-thread set the\n"
    "  CommunicatorOptions fields of those names (every rank must get the same).\n"
    "  Run it under a launcher: niox-collective-run -n N niox-collective-bench --op all_reduce\n";

float value(int r, std::size_t i) {
  return static_cast<float>((i * 31 + static_cast<std::size_t>(r) * 17) % 251);
}
constexpr float kPoison = -1.0f;

bool parse(std::string_view s, std::size_t& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && end == s.data() + s.size();
}

struct Bench {
  Communicator& comm;
  Op op;
  int p;
  int r;
  std::vector<float> in;   // what this rank gives
  std::vector<float> out;  // what it gets
  std::size_t total = 0;   // elements of the full buffer

  // Sets the sizes for a buffer of `bytes`; false when the size holds no element to move.
  bool size(std::size_t bytes) {
    total = bytes / sizeof(float);
    if (op == Op::all_to_all) total -= total % static_cast<std::size_t>(p);
    if (total == 0) return false;
    auto [first, count] = Communicator::block(total, p, r);
    switch (op) {
      case Op::all_reduce:
        in.resize(total);
        for (std::size_t i = 0; i < total; ++i) in[i] = value(r, i);
        out.assign(total, 0);
        break;
      case Op::broadcast:
        in.clear();
        out.resize(total);
        for (std::size_t i = 0; i < total; ++i) out[i] = r == 0 ? value(0, i) : kPoison;
        break;
      case Op::reduce:
      case Op::all_to_all:
        in.resize(total);
        for (std::size_t i = 0; i < total; ++i) in[i] = value(r, i);
        out.assign(total, 0);
        break;
      case Op::all_gather:
      case Op::gather:
        in.resize(count);
        for (std::size_t i = 0; i < count; ++i) in[i] = value(r, first + i);
        out.assign(op == Op::gather && r != 0 ? 0 : total, 0);
        break;
      case Op::reduce_scatter:
        in.resize(total);
        for (std::size_t i = 0; i < total; ++i) in[i] = value(r, i);
        out.assign(count, 0);
        break;
      case Op::scatter:
        in.assign(r == 0 ? total : 0, 0);
        for (std::size_t i = 0; i < in.size(); ++i) in[i] = value(0, i);
        out.assign(count, 0);
        break;
    }
    return true;
  }

  void prepare() {
    if (op == Op::all_reduce) {
      std::copy(in.begin(), in.end(), out.begin());
    } else if (op == Op::broadcast) {
      if (r != 0) std::fill(out.begin(), out.end(), kPoison);
    } else {
      std::fill(out.begin(), out.end(), kPoison);
    }
  }

  void call() {
    std::span<const float> cin(in);
    std::span<float> o(out);
    switch (op) {
      case Op::all_reduce: comm.all_reduce(o, ReduceOp::sum); break;
      case Op::broadcast: comm.broadcast(o, 0); break;
      case Op::reduce: comm.reduce(cin, o, ReduceOp::sum, 0); break;
      case Op::all_gather: comm.all_gather(cin, o); break;
      case Op::gather: comm.gather(cin, o, 0); break;
      case Op::reduce_scatter: comm.reduce_scatter(cin, o, ReduceOp::sum); break;
      case Op::all_to_all: comm.all_to_all(cin, o); break;
      case Op::scatter: comm.scatter(cin, o, 0); break;
    }
  }

  float sum(std::size_t i) const {
    float w = 0;
    for (int k = 0; k < p; ++k) w += value(k, i);
    return w;
  }

  std::size_t wrong() const {
    auto [first, count] = Communicator::block(total, p, r);
    const std::size_t part = total / static_cast<std::size_t>(p);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      float w = 0;
      switch (op) {
        case Op::all_reduce: w = sum(i); break;
        case Op::reduce: w = r == 0 ? sum(i) : out[i]; break;
        case Op::broadcast: w = value(0, i); break;
        case Op::all_gather:
        case Op::gather: {
          int owner = 0;
          while (Communicator::block(total, p, owner).first +
                     Communicator::block(total, p, owner).second <=
                 i)
            ++owner;
          w = value(owner, i);
          break;
        }
        case Op::reduce_scatter: w = sum(first + i); break;
        case Op::scatter: w = value(0, first + i); break;
        case Op::all_to_all: w = value(static_cast<int>(i / part), r * part + i % part); break;
      }
      if (out[i] != w) ++bad;
    }
    (void)count;
    return bad;
  }

  double bus_factor() const {
    const double n = p;
    switch (op) {
      case Op::all_reduce: return 2 * (n - 1) / n;
      case Op::broadcast:
      case Op::reduce: return 1;
      default: return (n - 1) / n;
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::optional<Op> op;
  std::size_t min = 8;
  std::size_t max = std::size_t{256} << 20;
  std::size_t iters = 20;
  std::size_t warmup = 5;
  niox::collective::CommunicatorOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--progress-thread") {
      options.progress_thread = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "niox-collective-bench: %s needs a value\n%s", argv[i], kUsage);
      return 2;
    }
    std::string_view v = argv[++i];
    bool ok = true;
    if (a == "--op") {
      ok = false;
      for (auto& [name, o] : kOps)
        if (name == v) op = o, ok = true;
    } else if (a == "--min") {
      ok = parse(v, min) && min > 0;
    } else if (a == "--max") {
      ok = parse(v, max) && max > 0;
    } else if (a == "--iters") {
      ok = parse(v, iters) && iters > 0;
    } else if (a == "--warmup") {
      ok = parse(v, warmup);
    } else if (a == "--chunk-bytes") {
      ok = parse(v, options.chunk_bytes);
    } else if (a == "--ring-threshold") {
      ok = parse(v, options.ring_threshold_bytes);
    } else if (a == "--busy-poll") {
      std::size_t us = 0;
      ok = parse(v, us);
      options.busy_poll = std::chrono::microseconds(us);
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "niox-collective-bench: invalid %s '%s'\n%s", argv[i - 1], argv[i],
                   kUsage);
      return 2;
    }
  }
  if (!op) {
    std::fprintf(stderr, "niox-collective-bench: --op is required\n%s", kUsage);
    return 2;
  }
  try {
    Communicator comm = Communicator::from_environment(options);
    Bench b{comm, *op, comm.size(), comm.rank(), {}, {}};
    if (b.r == 0) {
      // Which backend ran, for bench/run's notes (stdout holds only the figures).
      std::fprintf(stderr, "niox-collective-bench: %d ranks, backend %s\n", b.p,
                   std::string(niox::to_string(comm.loop().backend())).c_str());
    }
    bool all_ok = true;
    for (std::size_t bytes = min; bytes <= max; bytes *= 2) {
      if (!b.size(bytes)) continue;
      for (std::size_t w = 0; w < warmup; ++w) {
        b.prepare();
        b.call();
      }
      comm.barrier();
      double seconds = 0;
      for (std::size_t k = 0; k < iters; ++k) {
        b.prepare();
        comm.barrier();
        auto t0 = std::chrono::steady_clock::now();
        b.call();
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      std::size_t bad = b.wrong();
      if (bad)
        std::fprintf(stderr, "niox-collective-bench: rank %d: %zu of %zu elements wrong\n", b.r,
                     bad, b.out.size());
      // The slowest rank's time is the collective's; any rank's failure fails the size.
      std::vector<double> stats = {seconds / static_cast<double>(iters), bad ? 1.0 : 0.0};
      comm.all_reduce(std::span(stats), ReduceOp::max);
      const bool ok = stats[1] == 0.0;
      all_ok = all_ok && ok;
      if (b.r == 0) {
        const double real = static_cast<double>(b.total * sizeof(float));
        const double algbw = real / stats[0] / 1e9;
        std::printf("bytes=%zu us=%.2f algbw_GBps=%.3f busbw_GBps=%.3f ok=%d\n",
                    b.total * sizeof(float), stats[0] * 1e6, algbw, algbw * b.bus_factor(), ok);
        std::fflush(stdout);
      }
    }
    return all_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "niox-collective-bench: %s\n", e.what());
    return 1;
  }
}
