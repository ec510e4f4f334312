// bench/echo_load.c — the load generator of bench/echo_compare: N TCP
// connections to an echo server, each writing a SIZE-byte message and
// waiting for all of it to come back before writing the next, for D
// seconds. One thread and one epoll set, so that the load costs as little
// CPU as we know how to spend and leaves the rest to the server.
//
// Usage:
//   echo_load -connect HOST:PORT [-c 100] [-size 64] [-d 5]
//
// When D seconds have passed no new message is started; the ones in flight
// are awaited (at most 5 s more), so every message the server received was
// echoed and counted. It then prints, on stdout:
//   messages N       round trips completed
//   seconds S        from the first write to the last echo
//   msgs/s R         N / S
// and exits 0. A refused connection, an early end of stream, an echo that
// differs from what was sent, or a stalled drain print an error on stderr
// and exit 1; bad flags exit 2.
#define _GNU_SOURCE
#include <fcntl.h>
#include <time.h>

#include "c_server.h"

enum { kMaxSize = 4096 };

struct conn {
  int fd;
  size_t sent;  // bytes of the current message written
  size_t got;   // bytes of its echo read
  int busy;     // a message is in flight
  int want_out; // EPOLLOUT is armed (a write was short)
};

static char msg[kMaxSize];
static size_t msg_size = 64;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fail(const char* what) {
  perror(what);
  exit(1);
}

static void set_events(int ep, struct conn* c, int want_out) {
  if (c->want_out == want_out) return;
  struct epoll_event ev = {.events = EPOLLIN | (want_out ? EPOLLOUT : 0), .data.ptr = c};
  if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) fail("epoll_ctl");
  c->want_out = want_out;
}

// Writes what is left of the current message; arms EPOLLOUT if the socket
// took only part of it.
static void push(int ep, struct conn* c) {
  while (c->sent < msg_size) {
    ssize_t n = send(c->fd, msg + c->sent, msg_size - c->sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      fail("send");
    }
    c->sent += (size_t)n;
  }
  set_events(ep, c, c->sent < msg_size);
}

static void start(int ep, struct conn* c) {
  c->sent = 0;
  c->got = 0;
  c->busy = 1;
  push(ep, c);
}

// Reads what the server sent back; returns 1 when the whole echo is in.
static int pull(struct conn* c) {
  char buf[kMaxSize];
  for (;;) {
    size_t room = msg_size - c->got;
    ssize_t n = read(c->fd, buf, room);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return 0;
      fail("read");
    }
    if (n == 0) {
      fprintf(stderr, "echo_load: the server closed a connection\n");
      exit(1);
    }
    if (c->got + (size_t)n > c->sent || memcmp(buf, msg + c->got, (size_t)n) != 0) {
      fprintf(stderr, "echo_load: the echo differs from the message sent\n");
      exit(1);
    }
    c->got += (size_t)n;
    if (c->got == msg_size) return 1;
    if ((size_t)n < room) return 0;  // the socket is drained
  }
}

static void usage(void) {
  fprintf(stderr, "usage: echo_load -connect IPv4:PORT [-c CONNS] [-size BYTES] [-d SECONDS]\n");
  exit(2);
}

int main(int argc, char** argv) {
  const char* addr = NULL;
  long conns = 100, size = 64;
  double seconds = 5;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) usage();
    char* end;
    if (strcmp(argv[i], "-connect") == 0) {
      addr = argv[i + 1];
    } else if (strcmp(argv[i], "-c") == 0) {
      conns = strtol(argv[i + 1], &end, 10);
      if (*end != '\0' || conns < 1 || conns > 60000) usage();
    } else if (strcmp(argv[i], "-size") == 0) {
      size = strtol(argv[i + 1], &end, 10);
      if (*end != '\0' || size < 1 || size > kMaxSize) usage();
    } else if (strcmp(argv[i], "-d") == 0) {
      seconds = strtod(argv[i + 1], &end);
      if (*end != '\0' || !(seconds > 0)) usage();
    } else {
      usage();
    }
  }
  struct sockaddr_in sa;
  if (addr == NULL || !parse_ipv4_port(addr, &sa) || sa.sin_port == 0) usage();
  msg_size = (size_t)size;
  for (size_t i = 0; i < msg_size; i++) msg[i] = (char)('a' + i % 26);

  struct conn* cs = calloc((size_t)conns, sizeof *cs);
  if (cs == NULL) fail("calloc");
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) fail("epoll_create1");
  int one = 1;
  for (long i = 0; i < conns; i++) {
    // A blocking connect (set-up is not timed), then non-blocking I/O.
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) fail("socket");
    if (connect(fd, (struct sockaddr*)&sa, sizeof sa) != 0) fail("connect");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) fail("fcntl");
    cs[i].fd = fd;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &cs[i]};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) fail("epoll_ctl");
  }

  long done = 0, in_flight = 0;
  double t0 = now_s(), deadline = t0 + seconds, drain_limit = deadline + 5, t = t0;
  for (long i = 0; i < conns; i++) {
    start(ep, &cs[i]);
    in_flight++;
  }
  struct epoll_event events[256];
  while (in_flight > 0) {
    int n = epoll_wait(ep, events, 256, 1000);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("epoll_wait");
    }
    // One clock read per batch: a message that completes in this batch
    // starts its successor until the batch that sees the deadline.
    t = now_s();
    int more = t < deadline;
    if (!more && t > drain_limit) {
      fprintf(stderr, "echo_load: %ld echo(es) still missing 5 s after the end\n", in_flight);
      return 1;
    }
    for (int k = 0; k < n; k++) {
      struct conn* c = events[k].data.ptr;
      if ((events[k].events & EPOLLOUT) && c->sent < msg_size) push(ep, c);
      if (!(events[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP))) continue;
      if (!c->busy) {
        fprintf(stderr, "echo_load: the server sent bytes nobody asked for, or closed\n");
        return 1;
      }
      if (!pull(c)) continue;
      done++;
      c->busy = 0;
      in_flight--;
      if (more) {
        start(ep, c);
        in_flight++;
      }
    }
  }
  double elapsed = t - t0;
  for (long i = 0; i < conns; i++) close(cs[i].fd);
  printf("messages %ld\nseconds %.6f\nmsgs/s %.1f\n", done, elapsed, (double)done / elapsed);
  return 0;
}
