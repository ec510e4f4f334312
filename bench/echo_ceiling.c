// bench/echo_ceiling.c — the cheapest TCP echo server we know how to write
// by hand, used by bench/echo_compare as the floor of server CPU per
// message: what the kernel's loopback TCP costs with no runtime on top.
//
// One thread, one edge-triggered epoll set, non-blocking sockets, no
// deadlines and no connection limit: per message one read and one send
// (a read shorter than the buffer means the socket is empty, so no read
// is spent on EAGAIN; see c_server.h). Bytes the socket does not take at once are kept
// and sent when it is writable again, and reading that connection waits
// until they are out, as a blocking echo loop would. Pipelined input
// (bench/echo_load.c -mode stream) is read 4 KiB at a time and each read
// echoed as it came, as the gort sample and its Go twin do.
//
// Usage (the flags of samples/echo_server; -procs, -max-conns and
// -idle-timeout are accepted and ignored):
//   echo_ceiling -listen 127.0.0.1:0 [-procs N]
// Prints "listening on HOST:PORT" once it accepts connections; exits 0 on
// SIGTERM or SIGINT.
#define _GNU_SOURCE
#include "c_server.h"

enum { kBuf = 4096 };

// A connection's unsent bytes, if its socket was full.
struct pending {
  char* data;
  size_t off, len;
};

static struct pending pend[1 << 16];

static void drop(int fd) {
  free(pend[fd].data);
  pend[fd] = (struct pending){0};
  close(fd);
}

// Sends p's bytes; returns -1 on error, 0 if some remain, 1 when all are out.
static int flush(int fd, struct pending* p) {
  while (p->off < p->len) {
    ssize_t n = send(fd, p->data + p->off, p->len - p->off, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN ? 0 : errno == EINTR ? flush(fd, p) : -1;
    p->off += (size_t)n;
  }
  free(p->data);
  *p = (struct pending){0};
  return 1;
}

// Echoes what is queued on fd; returns 0 when the connection is finished.
static int serve(int fd, uint32_t events) {
  struct pending* p = &pend[fd];
  if (p->data != NULL) {
    int r = flush(fd, p);
    if (r <= 0) return r == 0;
  }
  char buf[kBuf];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n == 0) return 0;
    if (n < 0) return errno == EAGAIN ? 1 : errno == EINTR ? serve(fd, events) : 0;
    ssize_t w = send(fd, buf, (size_t)n, MSG_NOSIGNAL);
    if (w < 0 && errno != EAGAIN && errno != EINTR) return 0;
    if (w < n) {
      size_t off = w < 0 ? 0 : (size_t)w;
      p->len = (size_t)n - off;
      p->off = 0;
      p->data = malloc(p->len);
      if (p->data == NULL) return 0;
      memcpy(p->data, buf + off, p->len);
      return 1;  // EPOLLOUT (armed with EPOLLET from the start) resumes
    }
    // A short read: the socket is empty, unless the peer's FIN was there
    // too (c_server.h).
    if ((size_t)n < sizeof buf && !(events & EPOLLRDHUP)) return 1;
  }
}

int main(int argc, char** argv) {
  const char* addr = c_server_listen_flag(argc, argv, "echo_ceiling", "127.0.0.1:7000");
  int ls = c_server_listen("echo_ceiling", addr);
  // EPOLLOUT from the start, so that a socket that was full reports when it
  // drains. Edge-triggered, it costs nothing otherwise: the kernel signals
  // write space only after a send has found the buffer full.
  c_server_loop(ls, (int)(sizeof pend / sizeof pend[0]),
                EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, serve, drop);
  return 0;
}
