/* raw_uring_echo: the floor for an io_uring echo server, written by hand with liburing.
 *
 * One thread, one ring. Multishot accept where the kernel has it (single-shot re-armed
 * otherwise); per connection one operation at a time: recv, then send until all of it is out,
 * then recv again. Each loop turn is one io_uring_submit_and_wait() that both submits what the
 * previous turn queued and waits, then every ready CQE is reaped.
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
#include <sys/socket.h>
#include <unistd.h>

#define BUF_SIZE (64 * 1024)
#define RING_ENTRIES 1024

enum op { OP_RECV, OP_SEND };

struct conn {
  int fd;
  enum op op;
  size_t start, end; /* while sending: buf[start, end) is still to go */
  unsigned char buf[BUF_SIZE];
};

static struct io_uring ring;
static int listen_fd;
static int multishot_accept = 1;

/* Never fails: a full SQ is flushed to the kernel to make room. */
static struct io_uring_sqe* get_sqe(void) {
  struct io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  while (!sqe) {
    io_uring_submit(&ring);
    sqe = io_uring_get_sqe(&ring);
  }
  return sqe;
}

static void arm_accept(void) {
  struct io_uring_sqe* sqe = get_sqe();
  if (multishot_accept)
    io_uring_prep_multishot_accept(sqe, listen_fd, NULL, NULL, SOCK_CLOEXEC);
  else
    io_uring_prep_accept(sqe, listen_fd, NULL, NULL, SOCK_CLOEXEC);
  io_uring_sqe_set_data(sqe, NULL);
}

static void arm_recv(struct conn* c) {
  struct io_uring_sqe* sqe = get_sqe();
  c->op = OP_RECV;
  io_uring_prep_recv(sqe, c->fd, c->buf, BUF_SIZE, 0);
  io_uring_sqe_set_data(sqe, c);
}

static void arm_send(struct conn* c) {
  struct io_uring_sqe* sqe = get_sqe();
  c->op = OP_SEND;
  io_uring_prep_send(sqe, c->fd, c->buf + c->start, c->end - c->start, MSG_NOSIGNAL);
  io_uring_sqe_set_data(sqe, c);
}

static void conn_close(struct conn* c) {
  close(c->fd);
  free(c);
}

static void on_accept(struct io_uring_cqe* cqe) {
  if (cqe->res >= 0) {
    int one = 1;
    setsockopt(cqe->res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct conn* c = malloc(sizeof *c);
    if (!c) {
      close(cqe->res);
    } else {
      c->fd = cqe->res;
      arm_recv(c);
    }
  } else if (cqe->res == -EINVAL && multishot_accept) {
    fprintf(stderr, "raw_uring_echo: no multishot accept here, using single-shot\n");
    multishot_accept = 0;
  }
  /* Multishot stays armed while the kernel says F_MORE; otherwise arm it again. */
  if (!(cqe->flags & IORING_CQE_F_MORE)) arm_accept();
}

static void on_conn(struct conn* c, int res) {
  if (res == -EINTR || res == -EAGAIN) { /* retry the same operation */
    if (c->op == OP_RECV) arm_recv(c);
    else arm_send(c);
    return;
  }
  if (res <= 0) { /* end of stream or error */
    conn_close(c);
    return;
  }
  if (c->op == OP_RECV) {
    c->start = 0;
    c->end = (size_t)res;
    arm_send(c);
  } else {
    c->start += (size_t)res;
    if (c->start < c->end) arm_send(c);
    else arm_recv(c);
  }
}

int main(int argc, char** argv) {
  const char* host = "127.0.0.1";
  int port = 7000;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) port = atoi(argv[++i]);
    else if (strcmp(argv[i], "--host") == 0 && i + 1 < argc) host = argv[++i];
    else if (argv[i][0] != '-') port = atoi(argv[i]);
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
  if (bind(listen_fd, (struct sockaddr*)&addr, sizeof addr) != 0 || listen(listen_fd, 1024) != 0) {
    perror("raw_uring_echo: bind/listen");
    return 1;
  }

  /* The flags a careful author would pick; fall back for older kernels. */
  struct io_uring_params p;
  memset(&p, 0, sizeof p);
  p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  int rc = io_uring_queue_init_params(RING_ENTRIES, &ring, &p);
  if (rc == -EINVAL) {
    memset(&p, 0, sizeof p);
    rc = io_uring_queue_init_params(RING_ENTRIES, &ring, &p);
  }
  if (rc < 0) {
    fprintf(stderr, "raw_uring_echo: io_uring_queue_init: %s\n", strerror(-rc));
    return 1;
  }
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
      struct conn* c = io_uring_cqe_get_data(cqe);
      if (c == NULL) on_accept(cqe);
      else on_conn(c, cqe->res);
      ++seen;
    }
    io_uring_cq_advance(&ring, seen);
  }
}
