// gloo_collective_bench: the Gloo peer of bench/run's collective workload. It measures
// all_reduce (the ring algorithm, float sum: what PyTorch's Gloo backend runs for CPU tensors),
// all_gather and broadcast (root 0) over Gloo's TCP transport, as a user of Gloo would call them.
//
// One process per rank, rendezvous through a gloo::rendezvous::FileStore in a directory that
// every rank sees (it must be fresh for each run: the store keeps its keys). The rank and the
// world size come from RANK and WORLD_SIZE (or Open MPI's OMPI_COMM_WORLD_RANK / _SIZE); the
// transport listens on MASTER_ADDR (default 127.0.0.1). MASTER_PORT is accepted and unused: the
// file store needs no port. bench/run's gloo_launch starts the ranks; by hand:
//
//   for r in 0 1; do RANK=$r WORLD_SIZE=2 gloo_collective_bench --store DIR --op all_reduce & done
//
// usage: gloo_collective_bench --op all_reduce|all_gather|broadcast [--min BYTES] [--max BYTES]
//            [--iters K] [--warmup W] [--store DIR (default: $NIOX_GLOO_STORE)]
//
// Sizes double from --min (8) to --max (256 MiB); bytes are those of the full buffer, as
// nccl-tests count them (all_gather: the gathered buffer, each rank giving bytes / N rounded down
// to whole floats). Rank 0 prints one line per size on stdout and nothing else:
//   bytes=N us=T algbw_GBps=A busbw_GBps=B ok=1
// us is the time per iteration of the slowest rank; busbw is nccl-tests' bus bandwidth. Every
// element of the last iteration's result is checked on every rank (ok=0 on any mismatch, and the
// exit status is 1). Inputs are small whole numbers, so float sums are exact.
//
// What a collective writes is reset before every iteration: all_reduce's in-place inputs are
// copied back from a saved copy, and the receiving buffers of broadcast and all_gather are
// overwritten with a value no rank sends, so the check sees only the last iteration's data. The
// reset is outside the timed part, and a barrier follows it (as in the OSU benchmarks): each
// iteration is timed around the collective call alone, and no rank's reset falls inside
// another rank's timed call, where it would count (a rank still resetting keeps the others
// waiting, and with more ranks than cores it takes a core from them).

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

enum class Op { all_reduce, all_gather, broadcast };

struct Args {
  Op op = Op::all_reduce;
  bool have_op = false;
  size_t min = 8;
  size_t max = size_t{256} << 20;
  int iters = 20;
  int warmup = 5;
  std::string store;
};

void usage() {
  std::fprintf(stderr,
               "usage: gloo_collective_bench --op all_reduce|all_gather|broadcast [--min BYTES]\n"
               "           [--max BYTES] [--iters K] [--warmup W] [--store DIR]\n"
               "  env: RANK, WORLD_SIZE (or OMPI_COMM_WORLD_RANK/SIZE), MASTER_ADDR,\n"
               "       NIOX_GLOO_STORE (the store directory when --store is not given)\n");
}

bool parse_size(const char* s, size_t& out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-') return false;
  out = static_cast<size_t>(v);
  return true;
}

bool parse_args(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    size_t n = 0;
    if (arg == "--op") {
      std::string_view op = v;
      if (op == "all_reduce")
        a.op = Op::all_reduce;
      else if (op == "all_gather")
        a.op = Op::all_gather;
      else if (op == "broadcast")
        a.op = Op::broadcast;
      else
        return false;
      a.have_op = true;
    } else if (arg == "--min" && parse_size(v, n)) {
      a.min = n;
    } else if (arg == "--max" && parse_size(v, n)) {
      a.max = n;
    } else if (arg == "--iters" && parse_size(v, n) && n > 0 && n < 1000000000) {
      a.iters = static_cast<int>(n);
    } else if (arg == "--warmup" && parse_size(v, n) && n < 1000000000) {
      a.warmup = static_cast<int>(n);
    } else if (arg == "--store") {
      a.store = v;
    } else {
      return false;
    }
  }
  return a.have_op && a.min > 0 && a.min <= a.max;
}

int env_int(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr) v = std::getenv(fallback);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return (*end == '\0' && n >= 0 && n < 65536) ? static_cast<int>(n) : -1;
}

// Small whole numbers, different for every rank and index: sums over a few ranks stay exact.
float value(int rank, size_t i) {
  return static_cast<float>((i * 31 + static_cast<size_t>(rank) * 17) % 251);
}
// What no rank sends: the check fails wherever the collective did not write.
constexpr float kPoison = -1.0f;

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

class Bench {
 public:
  Bench(std::shared_ptr<gloo::Context> ctx, const Args& a)
      : ctx_(std::move(ctx)), a_(a), rank_(ctx_->rank), n_(ctx_->size) {
    size_t max_floats = a_.max / sizeof(float);
    buf_.resize(max_floats);
    if (a_.op == Op::all_gather) in_.resize(max_floats / static_cast<size_t>(n_) + 1);
    if (a_.op == Op::all_reduce) in_.resize(max_floats);
  }

  // One size: false when a check failed on any rank.
  bool run_size(size_t bytes) {
    // count: floats per rank's contribution (all_gather) or of the whole buffer.
    size_t count = bytes / sizeof(float);
    if (a_.op == Op::all_gather) count = bytes / static_cast<size_t>(n_) / sizeof(float);
    if (count == 0) return true;  // nothing to move at this size
    size_t total = a_.op == Op::all_gather ? count * static_cast<size_t>(n_) : count;
    size_t real_bytes = total * sizeof(float);
    setup(count);

    for (int w = 0; w < a_.warmup; ++w) {
      prepare(count);
      collective(count);
    }
    gloo::BarrierOptions bo(ctx_);
    gloo::barrier(bo);
    double seconds = 0;
    for (int k = 0; k < a_.iters; ++k) {
      prepare(count);
      gloo::barrier(bo);
      auto t0 = std::chrono::steady_clock::now();
      collective(count);
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    bool ok = check(count);

    // The slowest rank's time is the collective's time; any rank's failure fails the size.
    double stats[2] = {seconds / a_.iters, ok ? 0.0 : 1.0};
    gloo::AllreduceOptions ro(ctx_);
    ro.setOutput(stats, 2);
    ro.setReduceFunction(static_cast<ReduceFn>(&gloo::max<double>));
    gloo::allreduce(ro);
    double t = stats[0];
    ok = stats[1] == 0.0;

    if (rank_ == 0) {
      double algbw = static_cast<double>(real_bytes) / t / 1e9;
      double factor = 1.0;
      if (a_.op == Op::all_reduce) factor = 2.0 * (n_ - 1) / n_;
      if (a_.op == Op::all_gather) factor = static_cast<double>(n_ - 1) / n_;
      std::printf("bytes=%zu us=%.2f algbw_GBps=%.3f busbw_GBps=%.3f ok=%d\n", real_bytes, t * 1e6,
                  algbw, algbw * factor, ok ? 1 : 0);
      std::fflush(stdout);
    }
    return ok;
  }

 private:
  // Values that stay the same through a size's iterations.
  void setup(size_t count) {
    if (a_.op == Op::all_reduce) {
      for (size_t i = 0; i < count; ++i) in_[i] = value(rank_, i);
    } else if (a_.op == Op::all_gather) {
      for (size_t j = 0; j < count; ++j) in_[j] = value(rank_, j);
    } else if (a_.op == Op::broadcast && rank_ == 0) {
      for (size_t i = 0; i < count; ++i) buf_[i] = value(0, i);
    }
  }

  void prepare(size_t count) {
    switch (a_.op) {
      case Op::all_reduce: std::copy_n(in_.data(), count, buf_.data()); break;
      case Op::all_gather:
        std::fill_n(buf_.data(), count * static_cast<size_t>(n_), kPoison);
        break;
      case Op::broadcast:
        if (rank_ != 0) std::fill_n(buf_.data(), count, kPoison);
        break;
    }
  }

  // Each call builds its options afresh, as PyTorch's ProcessGroupGloo does per collective.
  void collective(size_t count) {
    switch (a_.op) {
      case Op::all_reduce: {
        gloo::AllreduceOptions o(ctx_);
        o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        o.setOutput(buf_.data(), count);
        o.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
        gloo::allreduce(o);
        break;
      }
      case Op::all_gather: {
        gloo::AllgatherOptions o(ctx_);
        o.setInput(in_.data(), count);
        o.setOutput(buf_.data(), count * static_cast<size_t>(n_));
        gloo::allgather(o);
        break;
      }
      case Op::broadcast: {
        gloo::BroadcastOptions o(ctx_);
        o.setRoot(0);
        o.setOutput(buf_.data(), count);
        gloo::broadcast(o);
        break;
      }
    }
  }

  bool check(size_t count) {
    size_t bad = 0, first = 0;
    float got = 0, want = 0;
    auto expect = [&](size_t i, float v, float w) {
      if (v != w) {
        if (bad++ == 0) first = i, got = v, want = w;
      }
    };
    switch (a_.op) {
      case Op::all_reduce:
        for (size_t i = 0; i < count; ++i) {
          float sum = 0;
          for (int r = 0; r < n_; ++r) sum += value(r, i);
          expect(i, buf_[i], sum);
        }
        break;
      case Op::all_gather:
        for (int r = 0; r < n_; ++r) {
          for (size_t j = 0; j < count; ++j) {
            size_t i = static_cast<size_t>(r) * count + j;
            expect(i, buf_[i], value(r, j));
          }
        }
        break;
      case Op::broadcast:
        for (size_t i = 0; i < count; ++i) expect(i, buf_[i], value(0, i));
        break;
    }
    if (bad != 0) {
      std::fprintf(stderr,
                   "gloo_collective_bench: rank %d: %zu of %zu elements wrong, first at %zu: "
                   "%g instead of %g\n",
                   rank_, bad, a_.op == Op::all_gather ? count * static_cast<size_t>(n_) : count,
                   first, static_cast<double>(got), static_cast<double>(want));
    }
    return bad == 0;
  }

  std::shared_ptr<gloo::Context> ctx_;
  const Args& a_;
  int rank_;
  int n_;
  std::vector<float> buf_;  // all_reduce, broadcast: the buffer; all_gather: the output
  std::vector<float> in_;   // all_gather: this rank's contribution; all_reduce: each call's start
};

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse_args(argc, argv, a)) {
    usage();
    return 2;
  }
  if (a.store.empty()) {
    const char* s = std::getenv("NIOX_GLOO_STORE");
    if (s == nullptr || *s == '\0') {
      std::fprintf(stderr,
                   "gloo_collective_bench: no rendezvous store: give --store DIR or set "
                   "NIOX_GLOO_STORE (a fresh directory all ranks share)\n");
      return 2;
    }
    a.store = s;
  }
  int rank = env_int("RANK", "OMPI_COMM_WORLD_RANK");
  int size = env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE");
  if (rank < 0 || size < 1 || rank >= size) {
    std::fprintf(stderr,
                 "gloo_collective_bench: set RANK and WORLD_SIZE (0 <= RANK < WORLD_SIZE), or run "
                 "under mpirun\n");
    return 2;
  }
  // Every rank may be first: whichever creates the directory, the others find it.
  if (::mkdir(a.store.c_str(), 0700) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "gloo_collective_bench: cannot create %s: %s\n", a.store.c_str(),
                 std::strerror(errno));
    return 2;
  }
  const char* host = std::getenv("MASTER_ADDR");

  bool all_ok = true;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = host != nullptr && *host != '\0' ? host : "127.0.0.1";
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(a.store);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    // The largest sizes on an oversubscribed machine take seconds per call; Gloo's default
    // (30 s) would turn a slow run into a failed one.
    ctx->setTimeout(std::chrono::seconds(300));
    ctx->connectFullMesh(store, dev);

    Bench bench(ctx, a);
    for (size_t bytes = a.min; bytes <= a.max; bytes *= 2) {
      if (!bench.run_size(bytes)) all_ok = false;
      if (bytes > a.max / 2) break;  // doubling would overflow or pass max
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_collective_bench: rank %d: %s\n", rank, e.what());
    return 2;
  }
  return all_ok ? 0 : 1;
}
