/* collective_peer.h: what the C peers of bench/run's collective workload (mpi_collective_bench,
 * raw_tcp_collective) share, so that they measure and check alike: the command line, the
 * inputs, the reset before each iteration, the check, the timing and the result line.
 *
 *   collective_peer_run(&peer, &hooks) runs every size from --min to --max (doubling); per size:
 *   --warmup untimed calls, a barrier, then --iters calls, each after a reset and a barrier
 *   (both untimed, as in the OSU benchmarks), timed around the call alone; then every element
 *   is checked, and the slowest rank's time per call and any rank's failure are taken with
 *   hooks.max2. Rank 0 prints one line per size on stdout:
 *     bytes=N us=T algbw_GBps=A busbw_GBps=B ok=1
 *   Bytes are those of the full buffer, as nccl-tests count them (all_gather: the gathered
 *   buffer, each rank giving bytes / N rounded down to whole floats; a size where that is
 *   nothing is skipped); busbw is nccl-tests' bus bandwidth.
 *
 * Inputs are small whole numbers, so float sums over a few ranks are exact. What a collective
 * writes is reset before every call (all_reduce's in-place inputs copied back; the receiving
 * buffers of broadcast and all_gather overwritten with a value no rank sends), so the check
 * sees only the last call's bytes.
 */
#ifndef NIOX_BENCH_COLLECTIVE_PEER_H
#define NIOX_BENCH_COLLECTIVE_PEER_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum collective_op { ALL_REDUCE, ALL_GATHER, BROADCAST };

struct collective_args {
  enum collective_op op;
  size_t min, max;
  int iters, warmup;
  int n; /* -n N: ranks, for a program that starts them itself; 0 where not taken */
};

struct collective_peer {
  const char* program;
  struct collective_args a;
  int rank, nranks;
  float* buf; /* all_reduce, broadcast: the buffer; all_gather: the output */
  float* in;  /* all_gather: this rank's contribution; all_reduce: what each call starts from */
};

struct collective_hooks {
  void (*collective)(size_t count); /* count: floats of the buffer, or per rank (all_gather) */
  void (*barrier)(void);
  void (*max2)(double v[2]); /* every rank leaves with the maximum of each over all ranks */
};

static inline double collective_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int collective_parse_size(const char* s, size_t* out) {
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-') return 0;
  *out = (size_t)v;
  return 1;
}

/* Defaults: 8 B to 256 MiB, 20 iterations after 5. With takes_n, -n N (1-64) is required. */
static inline int collective_parse_args(int argc, char** argv, int takes_n,
                                        struct collective_args* a) {
  int have_op = 0;
  *a = (struct collective_args){ALL_REDUCE, 8, (size_t)256 << 20, 20, 5, 0};
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    size_t n = 0;
    if (i + 1 >= argc) return 0;
    const char* v = argv[++i];
    if (strcmp(arg, "--op") == 0) {
      if (strcmp(v, "all_reduce") == 0)
        a->op = ALL_REDUCE;
      else if (strcmp(v, "all_gather") == 0)
        a->op = ALL_GATHER;
      else if (strcmp(v, "broadcast") == 0)
        a->op = BROADCAST;
      else
        return 0;
      have_op = 1;
    } else if (takes_n && strcmp(arg, "-n") == 0 && collective_parse_size(v, &n) && n > 0 &&
               n <= 64) {
      a->n = (int)n;
    } else if (strcmp(arg, "--min") == 0 && collective_parse_size(v, &n)) {
      a->min = n;
    } else if (strcmp(arg, "--max") == 0 && collective_parse_size(v, &n)) {
      a->max = n;
    } else if (strcmp(arg, "--iters") == 0 && collective_parse_size(v, &n) && n > 0 &&
               n < 1000000000) {
      a->iters = (int)n;
    } else if (strcmp(arg, "--warmup") == 0 && collective_parse_size(v, &n) && n < 1000000000) {
      a->warmup = (int)n;
    } else {
      return 0;
    }
  }
  return have_op && (!takes_n || a->n > 0) && a->min > 0 && a->min <= a->max;
}

static inline void collective_usage(const char* program, int takes_n) {
  fprintf(stderr,
          "usage: %s %s--op all_reduce|all_gather|broadcast [--min BYTES]\n"
          "           [--max BYTES] [--iters K] [--warmup W]\n",
          program, takes_n ? "-n N " : "");
}

/* Floats of buf and of in for sizes up to --max; 0 when either allocation failed. */
static inline int collective_allocate(struct collective_peer* p) {
  size_t max_floats = p->a.max / sizeof(float);
  size_t in_floats = p->a.op == ALL_REDUCE ? max_floats : max_floats / (size_t)p->nranks;
  p->buf = (float*)malloc((max_floats + 1) * sizeof(float));
  p->in = (float*)malloc((in_floats + 1) * sizeof(float));
  return p->buf != NULL && p->in != NULL;
}

/* Small whole numbers, different for every rank and index. */
static inline float collective_value(int r, size_t i) {
  return (float)((i * 31 + (size_t)r * 17) % 251);
}
/* What no rank sends: the check fails wherever the collective did not write. */
#define COLLECTIVE_POISON (-1.0f)

/* Values that stay the same through a size's iterations. */
static inline void collective_setup(struct collective_peer* p, size_t count) {
  if (p->a.op == ALL_REDUCE || p->a.op == ALL_GATHER) {
    for (size_t i = 0; i < count; ++i) p->in[i] = collective_value(p->rank, i);
  } else if (p->rank == 0) {
    for (size_t i = 0; i < count; ++i) p->buf[i] = collective_value(0, i);
  }
}

static inline void collective_prepare(struct collective_peer* p, size_t count) {
  switch (p->a.op) {
    case ALL_REDUCE: memcpy(p->buf, p->in, count * sizeof(float)); break;
    case ALL_GATHER:
      for (size_t i = 0; i < count * (size_t)p->nranks; ++i) p->buf[i] = COLLECTIVE_POISON;
      break;
    case BROADCAST:
      if (p->rank != 0)
        for (size_t i = 0; i < count; ++i) p->buf[i] = COLLECTIVE_POISON;
      break;
  }
}

static inline int collective_check(const struct collective_peer* p, size_t count) {
  const int n = p->nranks;
  size_t bad = 0, first = 0, total = p->a.op == ALL_GATHER ? count * (size_t)n : count;
  float got = 0, want = 0;
  for (size_t i = 0; i < total; ++i) {
    float w;
    if (p->a.op == ALL_REDUCE) {
      w = 0;
      for (int r = 0; r < n; ++r) w += collective_value(r, i);
    } else if (p->a.op == ALL_GATHER) {
      w = collective_value((int)(i / count), i % count);
    } else {
      w = collective_value(0, i);
    }
    if (p->buf[i] != w && bad++ == 0) first = i, got = p->buf[i], want = w;
  }
  if (bad != 0)
    fprintf(stderr, "%s: rank %d: %zu of %zu elements wrong, first at %zu: %g instead of %g\n",
            p->program, p->rank, bad, total, first, (double)got, (double)want);
  return bad == 0;
}

/* One size: 0 when a check failed on any rank. */
static inline int collective_run_size(struct collective_peer* p, const struct collective_hooks* h,
                                      size_t bytes) {
  const int n = p->nranks;
  size_t count = bytes / sizeof(float);
  if (p->a.op == ALL_GATHER) count = bytes / (size_t)n / sizeof(float);
  if (count == 0) return 1; /* nothing to move at this size */
  size_t real_bytes = (p->a.op == ALL_GATHER ? count * (size_t)n : count) * sizeof(float);
  collective_setup(p, count);
  for (int w = 0; w < p->a.warmup; ++w) {
    collective_prepare(p, count);
    h->collective(count);
  }
  h->barrier();
  double seconds = 0;
  for (int k = 0; k < p->a.iters; ++k) {
    collective_prepare(p, count);
    h->barrier();
    double t0 = collective_now();
    h->collective(count);
    seconds += collective_now() - t0;
  }
  int ok = collective_check(p, count);
  /* The slowest rank's time is the collective's time; any rank's failure fails the size. */
  double stats[2] = {seconds / p->a.iters, ok ? 0.0 : 1.0};
  h->max2(stats);
  ok = stats[1] == 0.0;
  if (p->rank == 0) {
    double t = stats[0], algbw = (double)real_bytes / t / 1e9, factor = 1.0;
    if (p->a.op == ALL_REDUCE) factor = 2.0 * (n - 1) / n;
    if (p->a.op == ALL_GATHER) factor = (double)(n - 1) / n;
    printf("bytes=%zu us=%.2f algbw_GBps=%.3f busbw_GBps=%.3f ok=%d\n", real_bytes, t * 1e6, algbw,
           algbw * factor, ok);
    fflush(stdout);
  }
  return ok;
}

/* Every size: 1 when every check passed. */
static inline int collective_run(struct collective_peer* p, const struct collective_hooks* h) {
  int all_ok = 1;
  for (size_t bytes = p->a.min; bytes <= p->a.max; bytes *= 2) {
    if (!collective_run_size(p, h, bytes)) all_ok = 0;
    if (bytes > p->a.max / 2) break; /* doubling would overflow or pass max */
  }
  return all_ok;
}

#endif
