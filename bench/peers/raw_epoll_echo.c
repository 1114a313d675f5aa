/* raw_epoll_echo: the floor for an epoll echo server, written by hand.
 *
 * One thread, edge-triggered epoll, every socket registered once for EPOLLIN|EPOLLOUT. Each
 * event drains the connection: write out what is pending, read until EAGAIN, echo each read at
 * once. A connection whose peer stops reading keeps its unsent bytes and stops reading until
 * EPOLLOUT says there is room again, so memory stays bounded at one buffer per connection.
 *
 * usage: raw_epoll_echo [--port N] [--host ADDR]   (default 127.0.0.1, port 7000)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_SIZE (64 * 1024)
#define MAX_EVENTS 256

struct conn {
  int fd;
  size_t start, end; /* unsent bytes are buf[start, end) */
  unsigned char buf[BUF_SIZE];
};

static void conn_close(int ep, struct conn* c) {
  epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  free(c);
}

/* Returns 0 to keep the connection, -1 to close it. */
static int conn_service(struct conn* c) {
  for (;;) {
    while (c->start < c->end) {
      ssize_t n = send(c->fd, c->buf + c->start, c->end - c->start, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0; /* EPOLLOUT edge resumes us */
        return -1;
      }
      c->start += (size_t)n;
    }
    c->start = c->end = 0;
    ssize_t n = recv(c->fd, c->buf, BUF_SIZE, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0; /* EPOLLIN edge resumes us */
      return -1;
    }
    if (n == 0) return -1;
    c->end = (size_t)n;
  }
}

static int parse_port(int argc, char** argv, const char** host) {
  int port = 7000;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--port") == 0 && i + 1 < argc)
      port = atoi(argv[++i]);
    else if (strcmp(argv[i], "--host") == 0 && i + 1 < argc)
      *host = argv[++i];
    else if (argv[i][0] != '-')
      port = atoi(argv[i]);
    else {
      fprintf(stderr, "usage: %s [--port N] [--host ADDR]\n", argv[0]);
      exit(1);
    }
  }
  return port;
}

int main(int argc, char** argv) {
  const char* host = "127.0.0.1";
  int port = parse_port(argc, argv, &host);
  signal(SIGPIPE, SIG_IGN);

  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((unsigned short)port);
  if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
    fprintf(stderr, "raw_epoll_echo: bad --host %s\n", host);
    return 1;
  }
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(lfd, (struct sockaddr*)&addr, sizeof addr) != 0 || listen(lfd, 1024) != 0) {
    perror("raw_epoll_echo: bind/listen");
    return 1;
  }
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  fprintf(stderr, "raw_epoll_echo: listening on %s:%d\n", host, port);

  struct epoll_event events[MAX_EVENTS];
  for (;;) {
    int n = epoll_wait(ep, events, MAX_EVENTS, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      perror("epoll_wait");
      return 1;
    }
    for (int i = 0; i < n; ++i) {
      struct conn* c = events[i].data.ptr;
      if (c == NULL) {
        for (;;) {
          int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (fd < 0) break; /* EAGAIN, or a transient error: the listener stays armed */
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          struct conn* nc = malloc(sizeof *nc);
          if (!nc) {
            close(fd);
            continue;
          }
          nc->fd = fd;
          nc->start = nc->end = 0;
          struct epoll_event cev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                                    .data.ptr = nc};
          if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev) != 0) {
            close(fd);
            free(nc);
          }
        }
        continue;
      }
      if (conn_service(c) != 0) conn_close(ep, c);
    }
  }
}
