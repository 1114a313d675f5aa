/* mpi_collective_bench: the Open MPI peer of bench/run's collective workload. It measures
 * MPI_Allreduce (float, MPI_SUM, in place), MPI_Allgather and MPI_Bcast (root 0), with the
 * algorithms Open MPI chooses by itself, over its TCP transport:
 *
 *   mpirun --oversubscribe --mca pml ob1 --mca btl tcp,self -np N \
 *       mpi_collective_bench --op all_reduce
 *
 * (plus --allow-run-as-root as root). `--mca btl tcp,self` keeps ranks off shared memory, so
 * MPI moves its bytes through the kernel's TCP stack as Gloo and niox do; `--mca pml ob1` makes
 * sure the btl list applies: an Open MPI built with UCX may otherwise pick the UCX pml, which
 * brings its own shared-memory transports (Debian's configuration excludes it already).
 *
 * usage: mpi_collective_bench --op all_reduce|all_gather|broadcast [--min BYTES] [--max BYTES]
 *            [--iters K] [--warmup W]
 *
 * The same command line, output and checks as gloo_collective_bench: sizes double from --min (8)
 * to --max (256 MiB); bytes are those of the full buffer, as nccl-tests count them (all_gather:
 * the gathered buffer, each rank giving bytes / N rounded down to whole floats). Rank 0 prints
 * one line per size on stdout and nothing else:
 *   bytes=N us=T algbw_GBps=A busbw_GBps=B ok=1
 * us is the time per iteration of the slowest rank; busbw is nccl-tests' bus bandwidth. Every
 * element of the last iteration's result is checked on every rank (ok=0 on any mismatch, and the
 * exit status is 1). Inputs are small whole numbers, so float sums are exact.
 *
 * What a collective writes is reset before every iteration: all_reduce's in-place inputs are
 * copied back from a saved copy, and the receiving buffers of broadcast and all_gather are
 * overwritten with a value no rank sends, so the check sees only the last iteration's data. The
 * reset is outside the timed part, and a barrier follows it (as in the OSU benchmarks): each
 * iteration is timed around the collective call alone, and no rank's reset falls inside
 * another rank's timed call, where it would count (a rank still resetting keeps the others
 * waiting, and with more ranks than cores it takes a core from them).
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum op { ALL_REDUCE, ALL_GATHER, BROADCAST };

struct args {
  enum op op;
  int have_op;
  size_t min, max;
  int iters, warmup;
};

static int rank, nranks;
static struct args a = {ALL_REDUCE, 0, 8, (size_t)256 << 20, 20, 5};
static float* buf; /* all_reduce, broadcast: the buffer; all_gather: the output */
static float* in; /* all_gather: this rank's contribution; all_reduce: what each call starts from */

static void usage(void) {
  fprintf(stderr,
          "usage: mpi_collective_bench --op all_reduce|all_gather|broadcast [--min BYTES]\n"
          "           [--max BYTES] [--iters K] [--warmup W]\n");
}

static int parse_size(const char* s, size_t* out) {
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-') return 0;
  *out = (size_t)v;
  return 1;
}

static int parse_args(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    size_t n = 0;
    if (i + 1 >= argc) return 0;
    const char* v = argv[++i];
    if (strcmp(arg, "--op") == 0) {
      if (strcmp(v, "all_reduce") == 0)
        a.op = ALL_REDUCE;
      else if (strcmp(v, "all_gather") == 0)
        a.op = ALL_GATHER;
      else if (strcmp(v, "broadcast") == 0)
        a.op = BROADCAST;
      else
        return 0;
      a.have_op = 1;
    } else if (strcmp(arg, "--min") == 0 && parse_size(v, &n)) {
      a.min = n;
    } else if (strcmp(arg, "--max") == 0 && parse_size(v, &n)) {
      a.max = n;
    } else if (strcmp(arg, "--iters") == 0 && parse_size(v, &n) && n > 0 && n < 1000000000) {
      a.iters = (int)n;
    } else if (strcmp(arg, "--warmup") == 0 && parse_size(v, &n) && n < 1000000000) {
      a.warmup = (int)n;
    } else {
      return 0;
    }
  }
  return a.have_op && a.min > 0 && a.min <= a.max;
}

/* Small whole numbers, different for every rank and index: sums over a few ranks stay exact. */
static float value(int r, size_t i) { return (float)((i * 31 + (size_t)r * 17) % 251); }
/* What no rank sends: the check fails wherever the collective did not write. */
#define POISON (-1.0f)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Values that stay the same through a size's iterations. */
static void setup(size_t count) {
  if (a.op == ALL_REDUCE) {
    for (size_t i = 0; i < count; ++i) in[i] = value(rank, i);
  } else if (a.op == ALL_GATHER) {
    for (size_t j = 0; j < count; ++j) in[j] = value(rank, j);
  } else if (a.op == BROADCAST && rank == 0) {
    for (size_t i = 0; i < count; ++i) buf[i] = value(0, i);
  }
}

static void prepare(size_t count) {
  switch (a.op) {
    case ALL_REDUCE: memcpy(buf, in, count * sizeof(float)); break;
    case ALL_GATHER:
      for (size_t i = 0; i < count * (size_t)nranks; ++i) buf[i] = POISON;
      break;
    case BROADCAST:
      if (rank != 0)
        for (size_t i = 0; i < count; ++i) buf[i] = POISON;
      break;
  }
}

static void collective(size_t count) {
  int c = (int)count;
  switch (a.op) {
    case ALL_REDUCE: MPI_Allreduce(MPI_IN_PLACE, buf, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case ALL_GATHER: MPI_Allgather(in, c, MPI_FLOAT, buf, c, MPI_FLOAT, MPI_COMM_WORLD); break;
    case BROADCAST: MPI_Bcast(buf, c, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
  }
}

static int check(size_t count) {
  size_t bad = 0, first = 0, total = a.op == ALL_GATHER ? count * (size_t)nranks : count;
  float got = 0, want = 0;
  for (size_t i = 0; i < total; ++i) {
    float w;
    if (a.op == ALL_REDUCE) {
      w = 0;
      for (int r = 0; r < nranks; ++r) w += value(r, i);
    } else if (a.op == ALL_GATHER) {
      w = value((int)(i / count), i % count);
    } else {
      w = value(0, i);
    }
    if (buf[i] != w && bad++ == 0) first = i, got = buf[i], want = w;
  }
  if (bad != 0)
    fprintf(stderr,
            "mpi_collective_bench: rank %d: %zu of %zu elements wrong, first at %zu: %g instead "
            "of %g\n",
            rank, bad, total, first, (double)got, (double)want);
  return bad == 0;
}

/* One size: 0 when a check failed on any rank. */
static int run_size(size_t bytes) {
  /* count: floats per rank's contribution (all_gather) or of the whole buffer */
  size_t count = bytes / sizeof(float);
  if (a.op == ALL_GATHER) count = bytes / (size_t)nranks / sizeof(float);
  if (count == 0) return 1; /* nothing to move at this size */
  size_t total = a.op == ALL_GATHER ? count * (size_t)nranks : count;
  size_t real_bytes = total * sizeof(float);
  setup(count);

  for (int w = 0; w < a.warmup; ++w) {
    prepare(count);
    collective(count);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  double seconds = 0;
  for (int k = 0; k < a.iters; ++k) {
    prepare(count);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    collective(count);
    seconds += now() - t0;
  }
  int ok = check(count);

  /* The slowest rank's time is the collective's time; any rank's failure fails the size. */
  double stats[2] = {seconds / a.iters, ok ? 0.0 : 1.0};
  MPI_Allreduce(MPI_IN_PLACE, stats, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  double t = stats[0];
  ok = stats[1] == 0.0;

  if (rank == 0) {
    double algbw = (double)real_bytes / t / 1e9;
    double factor = 1.0;
    if (a.op == ALL_REDUCE) factor = 2.0 * (nranks - 1) / nranks;
    if (a.op == ALL_GATHER) factor = (double)(nranks - 1) / nranks;
    printf("bytes=%zu us=%.2f algbw_GBps=%.3f busbw_GBps=%.3f ok=%d\n", real_bytes, t * 1e6, algbw,
           algbw * factor, ok);
    fflush(stdout);
  }
  return ok;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (!parse_args(argc, argv)) {
    if (rank == 0) usage();
    MPI_Finalize();
    return 2;
  }
  size_t max_floats = a.max / sizeof(float);
  if (max_floats > INT_MAX) {
    if (rank == 0) fprintf(stderr, "mpi_collective_bench: --max is beyond MPI's int counts\n");
    MPI_Finalize();
    return 2;
  }
  buf = malloc((max_floats + 1) * sizeof(float));
  in =
      malloc(((a.op == ALL_REDUCE ? max_floats : max_floats / (size_t)nranks) + 1) * sizeof(float));
  if (buf == NULL || in == NULL) {
    fprintf(stderr, "mpi_collective_bench: rank %d: out of memory for %zu bytes\n", rank, a.max);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  int all_ok = 1;
  for (size_t bytes = a.min; bytes <= a.max; bytes *= 2) {
    if (!run_size(bytes)) all_ok = 0;
    if (bytes > a.max / 2) break; /* doubling would overflow or pass max */
  }
  free(buf);
  free(in);
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
