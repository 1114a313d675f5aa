/* raw_splice_transfer: the floor for moving a file over TCP with the kernel's zero-copy paths,
 * written by hand with blocking system calls and no checksum.
 *
 * The sender writes the file's size (8 bytes, big-endian), then the file with sendfile. The
 * receiver reads the size, reserves it with fallocate, splices socket -> pipe (1 MiB) -> file
 * until the size is reached, and exits 0; a short stream exits 1. This is what niox-transfer
 * does minus its framing, its checksum at both ends and its event loop: the time any verified
 * transfer tool on this machine can at best approach.
 *
 * usage: raw_splice_transfer recv PORT OUT      (listens on 127.0.0.1:PORT, one connection)
 *        raw_splice_transfer send FILE PORT     (connects to 127.0.0.1:PORT)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK (1 << 20)

static int die(const char* what) {
  fprintf(stderr, "raw_splice_transfer: %s: %s\n", what, strerror(errno));
  return 1;
}

static struct sockaddr_in loopback(int port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

static int do_recv(int port, const char* out_path) {
  struct sockaddr_in a = loopback(port);
  int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(l, (struct sockaddr*)&a, sizeof a) != 0 || listen(l, 1) != 0) return die("bind/listen");
  int s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
  if (s < 0) return die("accept");
  unsigned char head[8];
  size_t got = 0;
  while (got < sizeof head) {
    ssize_t n = recv(s, head + got, sizeof head - got, 0);
    if (n <= 0) return die("reading the size");
    got += (size_t)n;
  }
  uint64_t size = 0;
  for (int i = 0; i < 8; ++i) size = size << 8 | head[i];
  int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return die("open");
  if (size > 0 && fallocate(out, 0, 0, (off_t)size) != 0 && errno != EOPNOTSUPP)
    return die("fallocate");
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return die("pipe");
  fcntl(p[1], F_SETPIPE_SZ, CHUNK);
  loff_t off = 0;
  while ((uint64_t)off < size) {
    size_t want = size - (uint64_t)off < CHUNK ? (size_t)(size - (uint64_t)off) : CHUNK;
    ssize_t n = splice(s, NULL, p[1], NULL, want, SPLICE_F_MOVE);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      fprintf(stderr, "raw_splice_transfer: the stream ended after %lld of %llu bytes\n",
              (long long)off, (unsigned long long)size);
      return 1;
    }
    while (n > 0) {
      ssize_t m = splice(p[0], NULL, out, &off, (size_t)n, SPLICE_F_MOVE);
      if (m < 0 && errno == EINTR) continue;
      if (m <= 0) return die("writing the file");
      n -= m;
    }
  }
  return close(out) == 0 ? 0 : die("close");
}

static int do_send(const char* in_path, int port) {
  int in = open(in_path, O_RDONLY | O_CLOEXEC);
  if (in < 0) return die("open");
  struct stat st;
  if (fstat(in, &st) != 0) return die("fstat");
  struct sockaddr_in a = loopback(port);
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(s, (struct sockaddr*)&a, sizeof a) != 0) return die("connect");
  unsigned char head[8];
  uint64_t size = (uint64_t)st.st_size;
  for (int i = 7; i >= 0; --i, size >>= 8) head[i] = (unsigned char)size;
  if (send(s, head, sizeof head, MSG_NOSIGNAL) != (ssize_t)sizeof head) return die("send");
  off_t off = 0;
  while (off < st.st_size) {
    ssize_t n = sendfile(s, in, &off, CHUNK);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return die("sendfile");
  }
  return close(s) == 0 ? 0 : die("close");
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "recv") == 0) return do_recv(atoi(argv[2]), argv[3]);
  if (argc == 4 && strcmp(argv[1], "send") == 0) return do_send(argv[2], atoi(argv[3]));
  fprintf(stderr, "usage: %s recv PORT OUT | send FILE PORT\n", argv[0]);
  return 2;
}
