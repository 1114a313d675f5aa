/* raw_tcp_collective: the floor of bench/run's collective workload, written by hand: the same
 * algorithms as the fastest library could use over loopback TCP, with nothing else. N processes
 * (forked by this program) in a ring of TCP connections, each rank connected to the next; every
 * operation is one stream of bytes around the ring, moved by non-blocking send and recv in a
 * poll() loop:
 *
 *   all_gather   ring: a rank sends its own chunk, then forwards each chunk as its bytes arrive
 *                (N-1 chunks in, N-1 out); received bytes land in place in the output
 *   all_reduce   ring reduce-scatter (each arriving float is added at once into the rank's
 *                buffer, and forwarded from there) then the same ring all-gather
 *   broadcast    a chain from rank 0: each rank forwards bytes as they arrive
 *
 * A rank with nothing to do polls its sockets for 50 µs before it sleeps in poll(), as Open MPI
 * and niox do. No framing, no headers, no checks of the peers: this is not a library, only how
 * fast the kernel's TCP moves these bytes here. Each byte is copied into the kernel once and out once;
 * all_reduce adds one pass over the received chunk.
 *
 * usage: raw_tcp_collective -n N --op all_reduce|all_gather|broadcast [--min BYTES]
 *            [--max BYTES] [--iters K] [--warmup W]
 *
 * The same sizes, output, inputs, checks and timing as mpi_collective_bench and
 * gloo_collective_bench (see there): rank 0 prints one line per size,
 *   bytes=N us=T algbw_GBps=A busbw_GBps=B ok=1
 * with the slowest rank's time per iteration, each iteration timed alone after a reset and a
 * barrier. The exit status is 1 when a check failed on any rank, 2 on a usage error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum op { ALL_REDUCE, ALL_GATHER, BROADCAST };

static struct {
  enum op op;
  int have_op, n;
  size_t min, max;
  int iters, warmup;
} a = {ALL_REDUCE, 0, 0, 8, (size_t)256 << 20, 20, 5};

static int rank, nranks;
static int next_fd = -1, prev_fd = -1; /* to rank+1, from rank-1 (mod N) */
static float* buf; /* all_reduce, broadcast: the buffer; all_gather: the output */
static float* in; /* all_gather: this rank's contribution; all_reduce: what each call starts from */
static float* tmp; /* all_reduce: where a chunk arrives before it is added */

static void die(const char* what) {
  fprintf(stderr, "raw_tcp_collective: rank %d: %s: %s\n", rank, what, strerror(errno));
  exit(1);
}

/* ---- moving bytes ------------------------------------------------------------------------- */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Nothing moved: keep trying (yielding the CPU between tries) for 50 µs after the last bytes
 * moved, then sleep in poll(). Open MPI polls the same way, and so does niox by default
 * (Options::busy_poll): a wake-up costs microseconds, and each step of a ring would pay one. */
#define BUSY_POLL_S 50e-6
static void wait_io(struct pollfd* p, int np, double last_progress) {
  if (now() - last_progress < BUSY_POLL_S) {
    sched_yield();
    return;
  }
  if (poll(p, (nfds_t)np, -1) < 0 && errno != EINTR) die("poll");
}

/* One leg of a ring step: n bytes at p. */
struct seg {
  char* p;
  size_t n;
};

/* The ring stream: send segment k (k >= 1) is the memory that receive segment k-1 filled, so a
 * byte is forwarded as soon as it arrived (and, with `reduce_from`, was added). Receives of a
 * reducing stream land in reduce_from at the segment's offset from `base` and are added into
 * the segment. Both sides of each segment have the same length. */
static void ring_stream(int nseg, const struct seg* out, const struct seg* into, const char* base,
                        float* reduce_from) {
  int sk = 0, rk = 0;            /* current segments */
  size_t so = 0, ro = 0;         /* bytes done in them */
  size_t rdone = 0;              /* of receive segment rk: bytes arrived and added */
  size_t forwardable = out[0].n; /* send-stream bytes that are ready */
  size_t sent_total = 0;
  double last = now();
  for (;;) {
    /* Chunks of a count smaller than N are empty. */
    while (sk < nseg && so == out[sk].n) ++sk, so = 0;
    while (rk < nseg && ro == into[rk].n) ++rk, ro = 0, rdone = 0;
    if (sk == nseg && rk == nseg) break;
    int progressed = 0;
    if (sk < nseg && sent_total < forwardable) {
      size_t want = out[sk].n - so;
      if (want > forwardable - sent_total) want = forwardable - sent_total;
      ssize_t w = send(next_fd, out[sk].p + so, want, MSG_NOSIGNAL);
      if (w > 0) {
        so += (size_t)w, sent_total += (size_t)w, progressed = 1;
      } else if (w < 0 && errno != EAGAIN) {
        die("send");
      }
    }
    if (rk < nseg) {
      char* dst = reduce_from ? (char*)reduce_from + (into[rk].p - base) : into[rk].p;
      ssize_t r = recv(prev_fd, dst + ro, into[rk].n - ro, 0);
      if (r > 0) {
        ro += (size_t)r, progressed = 1;
        size_t ready = ro;
        if (reduce_from) {
          ready = ro / sizeof(float) * sizeof(float);
          float* d = (float*)(into[rk].p + rdone);
          const float* s = (const float*)(dst + rdone);
          for (size_t i = 0, e = (ready - rdone) / sizeof(float); i < e; ++i) d[i] += s[i];
        }
        forwardable += ready - rdone;
        rdone = ready;
      } else if (r == 0) {
        errno = ECONNRESET;
        die("recv");
      } else if (errno != EAGAIN) {
        die("recv");
      }
    }
    if (progressed) {
      last = now();
      continue;
    }
    struct pollfd p[2];
    int np = 0;
    if (sk < nseg && sent_total < forwardable) p[np++] = (struct pollfd){next_fd, POLLOUT, 0};
    if (rk < nseg) p[np++] = (struct pollfd){prev_fd, POLLIN, 0};
    wait_io(p, np, last);
  }
}

/* Byte offsets of chunk c of `count` floats split N ways (the first count % N chunks one more). */
static size_t chunk_at(size_t count, int c) {
  size_t q = count / (size_t)nranks, r = count % (size_t)nranks;
  return ((size_t)c * q + ((size_t)c < r ? (size_t)c : r)) * sizeof(float);
}
static struct seg chunk(float* p, size_t count, int c) {
  c = ((c % nranks) + nranks) % nranks;
  size_t b = chunk_at(count, c);
  return (struct seg){(char*)p + b, chunk_at(count, c + 1) - b};
}

static void ring_all_gather_chunks(float* p, size_t count, int own) {
  struct seg s[nranks], r[nranks];
  for (int k = 0; k < nranks - 1; ++k) {
    s[k] = chunk(p, count, own - k);
    r[k] = chunk(p, count, own - k - 1);
  }
  ring_stream(nranks - 1, s, r, (char*)p, NULL);
}

static void all_reduce(size_t count) {
  if (nranks == 1) return;
  struct seg s[nranks], r[nranks];
  for (int k = 0; k < nranks - 1; ++k) {
    s[k] = chunk(buf, count, rank - k);
    r[k] = chunk(buf, count, rank - k - 1);
  }
  ring_stream(nranks - 1, s, r, (char*)buf, tmp);
  ring_all_gather_chunks(buf, count, rank + 1); /* the chunk this rank finished */
}

static void all_gather(size_t count) {
  memcpy((char*)buf + (size_t)rank * count * sizeof(float), in, count * sizeof(float));
  if (nranks == 1) return;
  /* Equal chunks: the output seen as N chunks of `count` floats each. */
  struct seg s[nranks], r[nranks];
  for (int k = 0; k < nranks - 1; ++k) {
    int sc = ((rank - k) % nranks + nranks) % nranks,
        rc = ((rank - k - 1) % nranks + nranks) % nranks;
    s[k] = (struct seg){(char*)(buf + (size_t)sc * count), count * sizeof(float)};
    r[k] = (struct seg){(char*)(buf + (size_t)rc * count), count * sizeof(float)};
  }
  ring_stream(nranks - 1, s, r, (char*)buf, NULL);
}

/* Chain 0 -> 1 -> ... -> N-1: rank 0 only sends, the last rank only receives. */
static void broadcast(size_t count) {
  size_t n = count * sizeof(float), got = rank == 0 ? n : 0, sent = 0;
  const int sends = rank != nranks - 1;
  double last = now();
  while (got < n || (sends && sent < n)) {
    int progressed = 0;
    if (sends && sent < got) {
      ssize_t w = send(next_fd, (char*)buf + sent, got - sent, MSG_NOSIGNAL);
      if (w > 0)
        sent += (size_t)w, progressed = 1;
      else if (w < 0 && errno != EAGAIN)
        die("send");
    }
    if (got < n) {
      ssize_t r = recv(prev_fd, (char*)buf + got, n - got, 0);
      if (r > 0)
        got += (size_t)r, progressed = 1;
      else if (r == 0)
        errno = ECONNRESET, die("recv");
      else if (errno != EAGAIN)
        die("recv");
    }
    if (progressed) {
      last = now();
      continue;
    }
    struct pollfd p[2];
    int np = 0;
    if (sends && sent < got) p[np++] = (struct pollfd){next_fd, POLLOUT, 0};
    if (got < n) p[np++] = (struct pollfd){prev_fd, POLLIN, 0};
    wait_io(p, np, last);
  }
}

/* A small message around the ring and back to rank 0, each rank folding its value in with max:
 * passed twice, every rank leaves with the maximum (and a barrier: nobody leaves before all
 * arrived). */
static void ring_max(double* v, int nv) {
  if (nranks == 1) return;
  size_t n = (size_t)nv * sizeof(double);
  double got[nv];
  for (int pass = 0; pass < 2; ++pass) {
    if (rank == 0) {
      struct seg s = {(char*)v, n}, r = {(char*)got, n};
      ring_stream(1, &s, &r, NULL, NULL); /* sends before it receives: no deadlock */
      memcpy(v, got, n);
    } else {
      struct seg none = {(char*)got, 0}, r = {(char*)got, n}, s = {(char*)v, n};
      ring_stream(1, &none, &r, NULL, NULL);
      for (int i = 0; i < nv; ++i) v[i] = pass == 0 && v[i] > got[i] ? v[i] : got[i];
      ring_stream(1, &s, &none, NULL, NULL);
    }
  }
}

static void barrier(void) {
  double none = 0;
  ring_max(&none, 1);
}

/* ---- the measurement, as in mpi_collective_bench ------------------------------------------ */

static float value(int r, size_t i) { return (float)((i * 31 + (size_t)r * 17) % 251); }
#define POISON (-1.0f)

static void setup(size_t count) {
  if (a.op == ALL_REDUCE || a.op == ALL_GATHER) {
    for (size_t i = 0; i < count; ++i) in[i] = value(rank, i);
  } else if (rank == 0) {
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
  switch (a.op) {
    case ALL_REDUCE: all_reduce(count); break;
    case ALL_GATHER: all_gather(count); break;
    case BROADCAST: broadcast(count); break;
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
            "raw_tcp_collective: rank %d: %zu of %zu elements wrong, first at %zu: %g instead of "
            "%g\n",
            rank, bad, total, first, (double)got, (double)want);
  return bad == 0;
}

static int run_size(size_t bytes) {
  size_t count = bytes / sizeof(float);
  if (a.op == ALL_GATHER) count = bytes / (size_t)nranks / sizeof(float);
  if (count == 0) return 1;
  size_t total = a.op == ALL_GATHER ? count * (size_t)nranks : count;
  size_t real_bytes = total * sizeof(float);
  setup(count);
  for (int w = 0; w < a.warmup; ++w) {
    prepare(count);
    collective(count);
  }
  barrier();
  double seconds = 0;
  for (int k = 0; k < a.iters; ++k) {
    prepare(count);
    barrier();
    double t0 = now();
    collective(count);
    seconds += now() - t0;
  }
  int ok = check(count);
  double stats[2] = {seconds / a.iters, ok ? 0.0 : 1.0};
  ring_max(stats, 2);
  ok = stats[1] == 0.0;
  if (rank == 0) {
    double t = stats[0], algbw = (double)real_bytes / t / 1e9, factor = 1.0;
    if (a.op == ALL_REDUCE) factor = 2.0 * (nranks - 1) / nranks;
    if (a.op == ALL_GATHER) factor = (double)(nranks - 1) / nranks;
    printf("bytes=%zu us=%.2f algbw_GBps=%.3f busbw_GBps=%.3f ok=%d\n", real_bytes, t * 1e6, algbw,
           algbw * factor, ok);
    fflush(stdout);
  }
  return ok;
}

/* ---- set-up ------------------------------------------------------------------------------- */

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
    } else if (strcmp(arg, "-n") == 0 && parse_size(v, &n) && n > 0 && n <= 64) {
      a.n = (int)n;
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
  return a.have_op && a.n > 0 && a.min > 0 && a.min <= a.max;
}

static void nonblocking_nodelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) die("TCP_NODELAY");
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) die("O_NONBLOCK");
}

int main(int argc, char** argv) {
  if (!parse_args(argc, argv)) {
    fprintf(stderr,
            "usage: raw_tcp_collective -n N --op all_reduce|all_gather|broadcast [--min BYTES]\n"
            "           [--max BYTES] [--iters K] [--warmup W]\n");
    return 2;
  }
  nranks = a.n;
  /* Every rank's listener first, so each child knows every port. */
  int lfd[64];
  struct sockaddr_in addr[64];
  for (int r = 0; r < nranks; ++r) {
    socklen_t len = sizeof addr[r];
    memset(&addr[r], 0, sizeof addr[r]);
    addr[r].sin_family = AF_INET;
    addr[r].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lfd[r] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd[r] < 0 || bind(lfd[r], (struct sockaddr*)&addr[r], sizeof addr[r]) < 0 ||
        listen(lfd[r], 4) < 0 || getsockname(lfd[r], (struct sockaddr*)&addr[r], &len) < 0)
      die("listen");
  }
  pid_t child[64];
  for (int r = 1; r < nranks; ++r) {
    child[r] = fork();
    if (child[r] < 0) die("fork");
    if (child[r] == 0) {
      rank = r;
      prctl(PR_SET_PDEATHSIG, SIGKILL); /* rank 0 gone: nobody would read this rank's end */
      break;
    }
  }
  if (nranks > 1) {
    int to = (rank + 1) % nranks;
    next_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (next_fd < 0 || connect(next_fd, (struct sockaddr*)&addr[to], sizeof addr[to]) < 0)
      die("connect");
    prev_fd = accept4(lfd[rank], NULL, NULL, SOCK_CLOEXEC);
    if (prev_fd < 0) die("accept");
    nonblocking_nodelay(next_fd);
    nonblocking_nodelay(prev_fd);
  }
  for (int r = 0; r < nranks; ++r) close(lfd[r]);

  size_t max_floats = a.max / sizeof(float);
  buf = malloc((max_floats + 1) * sizeof(float));
  in =
      malloc(((a.op == ALL_REDUCE ? max_floats : max_floats / (size_t)nranks) + 1) * sizeof(float));
  tmp = a.op == ALL_REDUCE ? malloc((max_floats + 1) * sizeof(float)) : NULL;
  if (buf == NULL || in == NULL || (a.op == ALL_REDUCE && tmp == NULL)) die("malloc");

  int all_ok = 1;
  for (size_t bytes = a.min; bytes <= a.max; bytes *= 2) {
    if (!run_size(bytes)) all_ok = 0;
    if (bytes > a.max / 2) break;
  }
  if (rank != 0) return all_ok ? 0 : 1;
  for (int r = 1; r < nranks; ++r) {
    int st = 0;
    if (waitpid(child[r], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) all_ok = 0;
  }
  return all_ok ? 0 : 1;
}
