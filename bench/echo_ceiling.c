// bench/echo_ceiling.c — the cheapest TCP echo server we know how to write
// by hand, used by bench/echo_compare as the floor of server CPU per
// message: what the kernel's loopback TCP costs with no runtime on top.
//
// One thread, one edge-triggered epoll set, non-blocking sockets, no
// deadlines and no connection limit: per message one read and one send
// (a read shorter than the buffer means the socket is empty, so no read
// is spent on EAGAIN; edge-triggered epoll reports bytes that arrive
// later as a new event). Bytes the socket does not take at once are kept
// and sent when it is writable again, and reading that connection waits
// until they are out, as a blocking echo loop would.
//
// Usage (the flags of samples/echo_server; -procs, -max-conns and
// -idle-timeout are accepted and ignored):
//   echo_ceiling -listen 127.0.0.1:0 [-procs N]
// Prints "listening on HOST:PORT" once it accepts connections; exits 0 on
// SIGTERM or SIGINT.
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

enum { kBuf = 4096 };

// A connection's unsent bytes, if its socket was full.
struct pending {
  char* data;
  size_t off, len;
};

static struct pending pend[1 << 16];
static volatile sig_atomic_t stop;

static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

static void die(const char* what) {
  perror(what);
  exit(1);
}

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
static int serve(int fd) {
  struct pending* p = &pend[fd];
  if (p->data != NULL) {
    int r = flush(fd, p);
    if (r <= 0) return r == 0;
  }
  char buf[kBuf];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n == 0) return 0;
    if (n < 0) return errno == EAGAIN ? 1 : errno == EINTR ? serve(fd) : 0;
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
    if ((size_t)n < sizeof buf) return 1;  // short read: the socket is empty
  }
}

static int parse_listen(const char* s, struct sockaddr_in* sa) {
  char host[64];
  const char* colon = strrchr(s, ':');
  if (colon == NULL || (size_t)(colon - s) >= sizeof host) return 0;
  memcpy(host, s, (size_t)(colon - s));
  host[colon - s] = '\0';
  char* end;
  long port = strtol(colon + 1, &end, 10);
  if (*end != '\0' || port < 0 || port > 65535) return 0;
  memset(sa, 0, sizeof *sa);
  sa->sin_family = AF_INET;
  sa->sin_port = htons((uint16_t)port);
  return inet_pton(AF_INET, host, &sa->sin_addr) == 1;
}

int main(int argc, char** argv) {
  const char* listen_addr = "127.0.0.1:7000";
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) {
      fprintf(stderr, "usage: echo_ceiling [-listen IPv4:PORT] [-procs N]\n");
      return 2;
    }
    if (strcmp(argv[i], "-listen") == 0) listen_addr = argv[i + 1];
  }
  struct sockaddr_in sa;
  if (!parse_listen(listen_addr, &sa)) {
    fprintf(stderr, "echo_ceiling: -listen wants IPv4:PORT, got %s\n", listen_addr);
    return 2;
  }

  struct sigaction act = {.sa_handler = on_signal};
  sigaction(SIGTERM, &act, NULL);
  sigaction(SIGINT, &act, NULL);

  int one = 1;
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (ls < 0) die("socket");
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(ls, (struct sockaddr*)&sa, sizeof sa) != 0) die("bind");
  if (listen(ls, 1024) != 0) die("listen");
  socklen_t len = sizeof sa;
  getsockname(ls, (struct sockaddr*)&sa, &len);
  char ip[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
  printf("listening on %s:%d\n", ip, ntohs(sa.sin_port));
  fflush(stdout);

  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) die("epoll_create1");
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev) != 0) die("epoll_ctl");
  struct epoll_event events[256];
  while (!stop) {
    int n = epoll_wait(ep, events, 256, -1);
    if (n < 0 && errno != EINTR) die("epoll_wait");
    for (int i = 0; i < n; i++) {
      int fd = events[i].data.fd;
      if (fd == ls) {
        int c;
        while ((c = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
          if (c >= (int)(sizeof pend / sizeof pend[0])) {
            close(c);
            continue;
          }
          setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          struct epoll_event ce = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                                   .data.fd = c};
          if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce) != 0) close(c);
        }
        continue;
      }
      if (!serve(fd)) drop(fd);
    }
  }
  return 0;
}
