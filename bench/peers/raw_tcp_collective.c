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
 * fast the kernel's TCP moves these bytes here. Each byte is copied into the kernel once and
 * out once; all_reduce adds one pass over the received chunk. At small sizes it is no floor:
 * it runs the ring at every size, where a library sends fewer, whole-buffer messages.
 *
 * usage: raw_tcp_collective -n N --op all_reduce|all_gather|broadcast [--min BYTES]
 *            [--max BYTES] [--iters K] [--warmup W]
 *
 * The same sizes, output, inputs, checks and timing as the Gloo and Open MPI peers
 * (collective_peer.h): rank 0 prints one line per size, `bytes=N us=T algbw_GBps=A
 * busbw_GBps=B ok=1`, with the slowest rank's time per call. The exit status is 1 when a check
 * failed on any rank, 2 on a usage error.
 */
#define _GNU_SOURCE
#include "collective_peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static struct collective_peer peer = {.program = "raw_tcp_collective"};
static int rank, nranks;               /* peer's, for short */
static int next_fd = -1, prev_fd = -1; /* to rank+1, from rank-1 (mod N) */
static float* tmp;                     /* all_reduce: where a chunk arrives before it is added */

static void die(const char* what) {
  fprintf(stderr, "raw_tcp_collective: rank %d: %s: %s\n", rank, what, strerror(errno));
  exit(1);
}

/* ---- moving bytes ------------------------------------------------------------------------- */

/* Nothing moved: keep trying (yielding the CPU between tries) for 50 µs after the last bytes
 * moved, then sleep in poll(). Open MPI polls the same way, and so does niox by default
 * (Options::busy_poll): a wake-up costs microseconds, and each step of a ring would pay one. */
#define BUSY_POLL_S 50e-6
static void wait_io(struct pollfd* p, int np, double last_progress) {
  if (collective_now() - last_progress < BUSY_POLL_S) {
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
  int sk = 0, rk = 0;                           /* current segments */
  size_t so = 0, ro = 0;                        /* bytes done in them */
  size_t rdone = 0;                             /* of receive segment rk: bytes arrived and added */
  size_t forwardable = nseg > 0 ? out[0].n : 0; /* send-stream bytes that are ready */
  size_t sent_total = 0;
  double last = collective_now();
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
      last = collective_now();
      continue;
    }
    struct pollfd p[2];
    int np = 0;
    if (sk < nseg && sent_total < forwardable) p[np++] = (struct pollfd){next_fd, POLLOUT, 0};
    if (rk < nseg) p[np++] = (struct pollfd){prev_fd, POLLIN, 0};
    wait_io(p, np, last);
  }
}

static int mod_n(int c) { return (c % nranks + nranks) % nranks; }

/* all_reduce's chunk c: `count` floats split N ways, the first count % N chunks one longer. */
static size_t reduce_chunk_at(size_t count, int c) {
  size_t q = count / (size_t)nranks, r = count % (size_t)nranks;
  return ((size_t)c * q + ((size_t)c < r ? (size_t)c : r)) * sizeof(float);
}
static struct seg reduce_chunk(size_t count, int c) {
  c = mod_n(c);
  size_t b = reduce_chunk_at(count, c);
  return (struct seg){(char*)peer.buf + b, reduce_chunk_at(count, c + 1) - b};
}
/* all_gather's chunk c: rank c's `count` floats. */
static struct seg gather_chunk(size_t count, int c) {
  return (struct seg){(char*)(peer.buf + (size_t)mod_n(c) * count), count * sizeof(float)};
}

/* N-1 steps: send chunk own-k, receive chunk own-k-1 (added into place with reduce_from). */
static void ring(struct seg (*chunk)(size_t, int), size_t count, int own, float* reduce_from) {
  struct seg s[nranks], r[nranks];
  for (int k = 0; k < nranks - 1; ++k) {
    s[k] = chunk(count, own - k);
    r[k] = chunk(count, own - k - 1);
  }
  ring_stream(nranks - 1, s, r, (char*)peer.buf, reduce_from);
}

static void all_reduce(size_t count) {
  ring(reduce_chunk, count, rank, tmp);
  ring(reduce_chunk, count, rank + 1, NULL); /* rank + 1: the chunk this rank finished */
}

static void all_gather(size_t count) {
  memcpy(peer.buf + (size_t)rank * count, peer.in, count * sizeof(float));
  ring(gather_chunk, count, rank, NULL);
}

/* Chain 0 -> 1 -> ... -> N-1: rank 0 only sends, the last rank only receives, the others
 * forward what arrives (an empty first send segment, then the received one). */
static void broadcast(size_t count) {
  struct seg all = {(char*)peer.buf, count * sizeof(float)}, none = {(char*)peer.buf, 0};
  struct seg out[2] = {none, all}, into[2] = {all, none};
  if (nranks == 1) return;
  if (rank == 0)
    ring_stream(1, &all, &none, NULL, NULL);
  else if (rank == nranks - 1)
    ring_stream(1, &none, &all, NULL, NULL);
  else
    ring_stream(2, out, into, NULL, NULL);
}

static void collective(size_t count) {
  switch (peer.a.op) {
    case ALL_REDUCE: all_reduce(count); break;
    case ALL_GATHER: all_gather(count); break;
    case BROADCAST: broadcast(count); break;
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

static void max2(double v[2]) { ring_max(v, 2); }

/* ---- set-up ------------------------------------------------------------------------------- */

static void nonblocking_nodelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) die("TCP_NODELAY");
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) die("O_NONBLOCK");
}

int main(int argc, char** argv) {
  if (!collective_parse_args(argc, argv, 1, &peer.a)) {
    collective_usage(peer.program, 1);
    return 2;
  }
  nranks = peer.nranks = peer.a.n;
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
      rank = peer.rank = r;
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

  if (!collective_allocate(&peer)) die("malloc");
  if (peer.a.op == ALL_REDUCE && (tmp = malloc(peer.a.max + sizeof(float))) == NULL) die("malloc");
  const struct collective_hooks hooks = {collective, barrier, max2};
  int all_ok = collective_run(&peer, &hooks);
  if (rank != 0) return all_ok ? 0 : 1;
  for (int r = 1; r < nranks; ++r) {
    int st = 0;
    if (waitpid(child[r], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) all_ok = 0;
  }
  return all_ok ? 0 : 1;
}
