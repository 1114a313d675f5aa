/* raw_uring_echo: the floor for an io_uring echo server, written by hand with liburing.
 *
 * One thread, one ring (SINGLE_ISSUER|DEFER_TASKRUN, registered ring descriptor). Multishot
 * accept; per connection one multishot recv that picks its buffers from a provided-buffer ring,
 * so the kernel receives without a new SQE, a poll re-arm or a failed attempt per message; each
 * filled buffer is echoed with send (one send in flight per connection, the next buffers queued
 * behind it in order, short sends resumed) and handed back to the ring once sent. A recv that
 * finds the ring empty (ENOBUFS) is re-armed once buffers come back. Each loop turn is one
 * io_uring_submit_and_wait() that both submits what the previous turn queued and waits, then
 * every ready CQE is reaped. Needs Linux 6.0 (multishot recv).
 *
 * TCP_NODELAY is set on the listener; accepted sockets inherit it.
 *
 * usage: raw_uring_echo [--port N] [--host ADDR]   (default 127.0.0.1, port 7000)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define RING_ENTRIES 1024
#define NBUF 128             /* power of two: the buffer ring's size */
#define BUF_SIZE (64 * 1024) /* as large as a read of the bulk shape: one recv per batch */
#define BGID 0
#define NONE 0xffffu

enum tag { T_ACCEPT = 0, T_RECV = 1, T_SEND = 2, T_IGNORE = 3 };

struct conn {
  int fd;
  int recv_armed;       /* a multishot recv is in the kernel */
  int sending;          /* a send of the head buffer is in the kernel */
  int eof;              /* the peer closed, or an error: close once everything is out */
  uint16_t head, tail;  /* queue of filled buffers, linked through next[] */
  uint32_t start;       /* bytes of the head buffer already sent */
  struct conn* starved; /* next connection waiting for buffers (ENOBUFS) */
};

static struct io_uring ring;
static struct io_uring_buf_ring* br;
static unsigned char* bufs;
static uint16_t next_buf[NBUF];
static uint32_t buf_len[NBUF];
static struct conn* starved;
static int listen_fd;

static struct io_uring_sqe* get_sqe(void) {
  struct io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  while (!sqe) {
    io_uring_submit(&ring);
    sqe = io_uring_get_sqe(&ring);
  }
  return sqe;
}

static void set_data(struct io_uring_sqe* sqe, void* p, enum tag t) {
  io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)p | (uint64_t)t);
}

/* Hands a buffer back to the kernel. The ring's tail is published by advance(): the kernel
 * reads the entry only after that store. */
static void give_back(uint16_t bid) {
  io_uring_buf_ring_add(br, bufs + (size_t)bid * BUF_SIZE, BUF_SIZE, bid,
                        io_uring_buf_ring_mask(NBUF), 0);
  io_uring_buf_ring_advance(br, 1);
}

static void arm_accept(void) {
  struct io_uring_sqe* sqe = get_sqe();
  io_uring_prep_multishot_accept(sqe, listen_fd, NULL, NULL, SOCK_CLOEXEC);
  set_data(sqe, NULL, T_ACCEPT);
}

static void arm_recv(struct conn* c) {
  struct io_uring_sqe* sqe = get_sqe();
  io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
  sqe->flags |= IOSQE_BUFFER_SELECT;
  sqe->buf_group = BGID;
  set_data(sqe, c, T_RECV);
  c->recv_armed = 1;
}

static void send_head(struct conn* c) {
  uint16_t bid = c->head;
  struct io_uring_sqe* sqe = get_sqe();
  io_uring_prep_send(sqe, c->fd, bufs + (size_t)bid * BUF_SIZE + c->start, buf_len[bid] - c->start,
                     MSG_NOSIGNAL);
  set_data(sqe, c, T_SEND);
  c->sending = 1;
}

static void maybe_close(struct conn* c) {
  if (!c->eof || c->recv_armed || c->sending) return;
  while (c->head != NONE) { /* unsent after an error: the buffers go back */
    uint16_t bid = c->head;
    c->head = next_buf[bid];
    give_back(bid);
  }
  close(c->fd);
  free(c);
}

static void on_accept(struct io_uring_cqe* cqe) {
  if (cqe->res >= 0) {
    struct conn* c = calloc(1, sizeof *c);
    if (!c) {
      close(cqe->res);
    } else {
      c->fd = cqe->res;
      c->head = c->tail = NONE;
      arm_recv(c);
    }
  }
  if (!(cqe->flags & IORING_CQE_F_MORE)) arm_accept();
}

static void on_recv(struct conn* c, struct io_uring_cqe* cqe) {
  int more = (cqe->flags & IORING_CQE_F_MORE) != 0;
  if (!more) c->recv_armed = 0;
  if (cqe->res > 0) {
    uint16_t bid = (uint16_t)(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
    buf_len[bid] = (uint32_t)cqe->res;
    next_buf[bid] = NONE;
    if (c->tail == NONE)
      c->head = bid;
    else
      next_buf[c->tail] = bid;
    c->tail = bid;
    if (!c->sending) {
      c->start = 0;
      send_head(c);
    }
    if (!more && !c->eof) arm_recv(c); /* the kernel ended the multishot (CQ pressure etc.) */
    return;
  }
  if (cqe->res == -ENOBUFS && !c->eof) { /* no buffer left: wait until some come back */
    c->starved = starved;
    starved = c;
    c->recv_armed = 1; /* counts as armed: re-armed from the starved list */
    return;
  }
  c->eof = 1; /* 0: end of stream; other negatives: the connection is gone */
  maybe_close(c);
}

static void on_send(struct conn* c, int res) {
  c->sending = 0;
  if (res < 0) {
    c->eof = 1;
    maybe_close(c);
    return;
  }
  uint16_t bid = c->head;
  c->start += (uint32_t)res;
  if (c->start == buf_len[bid]) { /* this buffer is out: back to the kernel, then the next */
    c->head = next_buf[bid];
    if (c->head == NONE) c->tail = NONE;
    c->start = 0;
    give_back(bid);
  }
  if (c->head != NONE)
    send_head(c);
  else
    maybe_close(c);
}

static void rearm_starved(void) {
  while (starved) {
    struct conn* c = starved;
    starved = c->starved;
    c->recv_armed = 0;
    if (c->eof)
      maybe_close(c);
    else
      arm_recv(c);
  }
}

int main(int argc, char** argv) {
  const char* host = "127.0.0.1";
  int port = 7000;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--port") == 0 && i + 1 < argc)
      port = atoi(argv[++i]);
    else if (strcmp(argv[i], "--host") == 0 && i + 1 < argc)
      host = argv[++i];
    else if (argv[i][0] != '-')
      port = atoi(argv[i]);
    else {
      fprintf(stderr, "usage: %s [--port N] [--host ADDR]\n", argv[0]);
      return 1;
    }
  }
  signal(SIGPIPE, SIG_IGN);

  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((unsigned short)port);
  if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
    fprintf(stderr, "raw_uring_echo: bad --host %s\n", host);
    return 1;
  }
  listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(listen_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (bind(listen_fd, (struct sockaddr*)&addr, sizeof addr) != 0 || listen(listen_fd, 1024) != 0) {
    perror("raw_uring_echo: bind/listen");
    return 1;
  }

  struct io_uring_params p;
  memset(&p, 0, sizeof p);
  p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  int rc = io_uring_queue_init_params(RING_ENTRIES, &ring, &p);
  if (rc < 0) {
    fprintf(stderr, "raw_uring_echo: io_uring_queue_init: %s\n", strerror(-rc));
    return 1;
  }
  io_uring_register_ring_fd(&ring);

  br = mmap(NULL, NBUF * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE,
            MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  bufs = aligned_alloc(4096, (size_t)NBUF * BUF_SIZE);
  if (br == MAP_FAILED || !bufs) {
    fprintf(stderr, "raw_uring_echo: out of memory\n");
    return 1;
  }
  io_uring_buf_ring_init(br);
  struct io_uring_buf_reg reg = {
      .ring_addr = (unsigned long)br, .ring_entries = NBUF, .bgid = BGID};
  rc = io_uring_register_buf_ring(&ring, &reg, 0);
  if (rc < 0) {
    fprintf(stderr, "raw_uring_echo: no provided-buffer rings here (Linux 5.19+): %s\n",
            strerror(-rc));
    return 1;
  }
  for (uint16_t i = 0; i < NBUF; ++i) give_back(i);

  arm_accept();
  fprintf(stderr, "raw_uring_echo: listening on %s:%d\n", host, port);

  for (;;) {
    rc = io_uring_submit_and_wait(&ring, 1);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      fprintf(stderr, "raw_uring_echo: submit_and_wait: %s\n", strerror(-rc));
      return 1;
    }
    struct io_uring_cqe* cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      uint64_t ud = cqe->user_data;
      struct conn* c = (struct conn*)(uintptr_t)(ud & ~(uint64_t)3);
      switch ((enum tag)(ud & 3)) {
        case T_ACCEPT: on_accept(cqe); break;
        case T_RECV: on_recv(c, cqe); break;
        case T_SEND: on_send(c, cqe->res); break;
        case T_IGNORE: break;
      }
      ++seen;
    }
    io_uring_cq_advance(&ring, seen);
    rearm_starved();
  }
}
