// bench/c_server.h — what the C floor servers (bench/http_ceiling.c,
// bench/echo_ceiling.c) and the echo load generator (bench/echo_load.c)
// share: an IPv4:PORT parser, and the servers' listening socket and
// one-thread epoll loop. Static inline functions in a header, so that each
// program still builds alone with `cc -O2 bench/<name>.c`.
//
// The loop: one thread, one epoll set; connections are accepted
// non-blocking with TCP_NODELAY and registered with the events the server
// asks for; serve(fd, events) runs on each of their events and returns 0
// when the connection is finished, then drop(fd) closes it. SIGTERM and
// SIGINT end the loop.
//
// The servers read until a read comes back shorter than their buffer and
// trust that the socket is then empty: with edge-triggered epoll, bytes
// that arrive later are a new event. An end of stream that was already
// there is not: when events has EPOLLRDHUP they must read on to the 0.
#ifndef GORT_BENCH_C_SERVER_H
#define GORT_BENCH_C_SERVER_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static volatile sig_atomic_t c_server_stop;

static inline void c_server_on_signal(int sig) {
  (void)sig;
  c_server_stop = 1;
}

static inline void c_server_die(const char* what) {
  perror(what);
  exit(1);
}

// Parses "a.b.c.d:port" (port 0..65535) into sa; returns 0 if malformed.
static inline int parse_ipv4_port(const char* s, struct sockaddr_in* sa) {
  char host[64];
  const char* colon = strrchr(s, ':');
  if (colon == NULL || (size_t)(colon - s) >= sizeof host) return 0;
  memcpy(host, s, (size_t)(colon - s));
  host[colon - s] = '\0';
  char* end;
  long port = strtol(colon + 1, &end, 10);
  if (colon[1] == '\0' || *end != '\0' || port < 0 || port > 65535) return 0;
  memset(sa, 0, sizeof *sa);
  sa->sin_family = AF_INET;
  sa->sin_port = htons((uint16_t)port);
  return inet_pton(AF_INET, host, &sa->sin_addr) == 1;
}

// The value of "-listen ADDR" among Go-style flag pairs (the other flags of
// the gort samples, -procs and so on, are accepted and ignored), or dflt.
// Exits 2 on a flag without its value.
static inline const char* c_server_listen_flag(int argc, char** argv, const char* prog,
                                               const char* dflt) {
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) {
      fprintf(stderr, "usage: %s [-listen IPv4:PORT] [-procs N]\n", prog);
      exit(2);
    }
    if (strcmp(argv[i], "-listen") == 0) dflt = argv[i + 1];
  }
  return dflt;
}

// Listens on addr (non-blocking, SO_REUSEADDR, backlog SOMAXCONN as gort's
// and Go's listeners: 4096 with this glibc, capped by the kernel at
// net.core.somaxconn; bench/echo_compare connects 1,000 at once), makes
// SIGTERM and SIGINT end c_server_loop, and prints "listening on
// HOST:PORT" as the gort samples do. Exits 2 on a bad address, 1 on
// failure.
static inline int c_server_listen(const char* prog, const char* addr) {
  struct sockaddr_in sa;
  if (!parse_ipv4_port(addr, &sa)) {
    fprintf(stderr, "%s: -listen wants IPv4:PORT, got %s\n", prog, addr);
    exit(2);
  }
  struct sigaction act = {.sa_handler = c_server_on_signal};
  sigaction(SIGTERM, &act, NULL);
  sigaction(SIGINT, &act, NULL);

  int one = 1;
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (ls < 0) c_server_die("socket");
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(ls, (struct sockaddr*)&sa, sizeof sa) != 0) c_server_die("bind");
  if (listen(ls, SOMAXCONN) != 0) c_server_die("listen");
  socklen_t len = sizeof sa;
  getsockname(ls, (struct sockaddr*)&sa, &len);
  char ip[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
  printf("listening on %s:%d\n", ip, ntohs(sa.sin_port));
  fflush(stdout);
  return ls;
}

// Serves connections on ls until SIGTERM or SIGINT. Connections with a
// descriptor of max_fd or more are refused (the servers keep per-fd state
// in arrays of that size).
static inline void c_server_loop(int ls, int max_fd, uint32_t conn_events,
                                 int (*serve)(int fd, uint32_t events),
                                 void (*drop)(int fd)) {
  int one = 1;
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) c_server_die("epoll_create1");
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev) != 0) c_server_die("epoll_ctl");
  struct epoll_event events[256];
  while (!c_server_stop) {
    int n = epoll_wait(ep, events, 256, -1);
    if (n < 0 && errno != EINTR) c_server_die("epoll_wait");
    for (int i = 0; i < n; i++) {
      int fd = events[i].data.fd;
      if (fd != ls) {
        if (!serve(fd, events[i].events)) drop(fd);
        continue;
      }
      int c;
      while ((c = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
        if (c >= max_fd) {
          close(c);
          continue;
        }
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct epoll_event ce = {.events = conn_events, .data.fd = c};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce) != 0) close(c);
      }
    }
  }
}

#endif  // GORT_BENCH_C_SERVER_H
