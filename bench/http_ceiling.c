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
#include <time.h>

#include "c_server.h"

// Bytes of "\r\n\r\n" matched so far, per descriptor (requests may be split
// across reads).
static unsigned char matched[1 << 16];

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
static int serve(int fd, uint32_t events) {
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n == 0) return 0;
    if (n < 0) return errno == EAGAIN ? 1 : errno == EINTR ? serve(fd, events) : 0;
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
    // A short read: the socket is empty, unless the peer's FIN was there
    // too (c_server.h).
    if ((size_t)n < sizeof buf && !(events & EPOLLRDHUP)) return 1;
  }
}

// Forgets fd's partial match, then closes it.
static void drop(int fd) {
  matched[fd] = 0;
  close(fd);
}

int main(int argc, char** argv) {
  const char* addr = c_server_listen_flag(argc, argv, "http_ceiling", "127.0.0.1:8080");
  int ls = c_server_listen("http_ceiling", addr);
  c_server_loop(ls, (int)sizeof matched, EPOLLIN | EPOLLRDHUP | EPOLLET, serve, drop);
  return 0;
}
