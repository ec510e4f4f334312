// bench/http_ceiling.c — the fastest HTTP/1.1 hello server we know how to
// write by hand, used by `bench/http_compare --ceiling` to measure what the
// load generator itself allows on this machine.
//
// One thread, one edge-triggered epoll set, no runtime, no deadlines, no
// parsing beyond finding each request's blank line: per request one read
// and one send, as gort's server, and the same response bytes as
// samples/http_server's answer to GET / (same headers, same lengths), so
// that wrk does the same work per response. It is not a server to copy:
// it trusts its clients (any request gets the hello answer; a request must
// end with CRLF CRLF) and never times anything out.
//
// Usage (the flags of samples/http_server that http_compare passes; -procs
// and -idle-timeout are accepted and ignored):
//   http_ceiling -listen 127.0.0.1:0 [-procs 1] [-idle-timeout 300]
// Prints "listening on ADDR" once it accepts connections; exits 0 on SIGTERM
// or SIGINT.
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
#include <time.h>
#include <unistd.h>

// Bytes of "\r\n\r\n" matched so far, per descriptor (requests may be split
// across reads).
static unsigned char matched[1 << 16];
static volatile sig_atomic_t stop;

static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

static void die(const char* what) {
  perror(what);
  exit(1);
}

// The response to GET / of samples/http_server, byte for byte but for the
// Server header's value, which has the same length. The Date is formatted
// at most once a second.
static char resp[256];
static size_t resp_len;
static time_t resp_sec = -1;

static void refresh_response(void) {
  time_t now = time(NULL);
  if (now == resp_sec) return;
  resp_sec = now;
  char date[64];
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  resp_len = (size_t)snprintf(resp, sizeof resp,
                              "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
                              "Content-Length: 14\r\nDate: %s\r\nServer: ceil\r\n\r\nHello, World!\n",
                              date);
}

// Reads everything queued on fd and answers each complete request; returns
// 0 when the connection is finished.
static int serve(int fd) {
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n == 0) return 0;
    if (n < 0) return errno == EAGAIN ? 1 : errno == EINTR ? serve(fd) : 0;
    int complete = 0;
    unsigned m = matched[fd];
    for (ssize_t i = 0; i < n; i++) {
      char want = (m % 2 == 0) ? '\r' : '\n';
      if (buf[i] == want) {
        if (++m == 4) {
          complete++;
          m = 0;
        }
      } else {
        m = buf[i] == '\r' ? 1 : 0;
      }
    }
    matched[fd] = (unsigned char)m;
    if (complete > 0) refresh_response();
    for (int k = 0; k < complete; k++) {
      if (send(fd, resp, resp_len, MSG_NOSIGNAL) != (ssize_t)resp_len) return 0;
    }
    if ((size_t)n < sizeof buf) return 1;  // short read: the socket is empty
  }
}

int main(int argc, char** argv) {
  const char* listen_addr = "127.0.0.1:8080";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "-listen") == 0) listen_addr = argv[i + 1];
  }
  char host[64];
  const char* colon = strrchr(listen_addr, ':');
  if (colon == NULL || (size_t)(colon - listen_addr) >= sizeof host) {
    fprintf(stderr, "http_ceiling: -listen wants IPv4:PORT, got %s\n", listen_addr);
    return 2;
  }
  memcpy(host, listen_addr, (size_t)(colon - listen_addr));
  host[colon - listen_addr] = '\0';
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
  if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
    fprintf(stderr, "http_ceiling: bad IPv4 address %s\n", host);
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
          if (c >= (int)sizeof matched) {
            close(c);
            continue;
          }
          setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          matched[c] = 0;
          struct epoll_event ce = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = c};
          if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce) != 0) close(c);
        }
        continue;
      }
      if (!serve(fd)) close(fd);
    }
  }
  return 0;
}
