/* tests/netpoll/c_event_loop.c — a C library's own event loop, as libraries
 * written for threads have them: it knows nothing of gort, makes its
 * descriptors itself, and waits in poll(2), select(2) or epoll_wait(2).
 * Built as a shared library (tests/meson.build), so that its calls reach
 * libc through the dynamic linker, as a real library's do. */
#include "c_event_loop.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <unistd.h>

/* Reads `want` bytes from fd, waiting for readiness with the given call
 * between reads; -1 on an error or a timeout (each wait is at most
 * timeout_ms). */
long cel_read_all(int fd, char* buf, long want, enum cel_wait how, int timeout_ms) {
  long got = 0;
  int ep = -1;
  if (how == CEL_EPOLL) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) return -1;
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
      close(ep);
      return -1;
    }
  }
  while (got < want) {
    int ready;
    if (how == CEL_POLL) {
      struct pollfd p = {fd, POLLIN, 0};
      ready = poll(&p, 1, timeout_ms);
    } else if (how == CEL_SELECT) {
      fd_set r;
      struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
      FD_ZERO(&r);
      FD_SET(fd, &r);
      ready = select(fd + 1, &r, NULL, NULL, &tv);
    } else {
      struct epoll_event ev;
      ready = epoll_wait(ep, &ev, 1, timeout_ms);
    }
    if (ready <= 0) {
      got = -1;
      break;
    }
    long n = read(fd, buf + got, (size_t)(want - got));
    if (n < 0 && errno == EAGAIN) continue;
    if (n <= 0) {
      got = -1;
      break;
    }
    got += n;
  }
  if (ep >= 0) close(ep);
  return got;
}
