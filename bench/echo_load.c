// bench/echo_load.c — the load generator of bench/echo_compare: N TCP
// connections to an echo server, driven for D seconds in one of two modes:
//
//   pingpong  each connection writes a SIZE-byte message and waits for all
//             of it to come back before writing the next (the default);
//   stream    each connection keeps W messages in flight: it writes ahead
//             without waiting for the echoes, up to W messages beyond the
//             last one that came back whole, and reads the echoes as they
//             come (PhotonLibOS's "streaming" client, which writes without
//             waiting for replies, with the window bounding what is
//             outstanding instead of the socket buffers). The server then
//             finds several messages per read. pingpong is stream with
//             W = 1.
//
// One thread and one epoll set, so that the load costs as little CPU as we
// know how to spend and leaves the rest to the server.
//
// Usage:
//   echo_load -connect HOST:PORT [-c 100] [-size 64] [-mode pingpong|stream]
//             [-window W] [-d 5 | -control]
//
// -window is the number of messages in flight per connection in stream
// mode (default 64; pingpong is always 1). The soft RLIMIT_NOFILE is raised
// to the hard limit when the connections need it; if even that is too low,
// it says so and exits 1.
//
// One turn: messages are started until D seconds have passed; then no new
// message is started, a message partly written is finished, and the echoes
// in flight are awaited (at most 5 s more), so every message the server
// received was echoed and counted. Every echoed byte is checked. A turn
// prints, on stdout:
//   messages N       messages echoed whole
//   seconds S        from the first write to the last echo
//   msgs/s R         N / S
//   cpu_seconds C    this process's CPU time (user + system) in the turn
//
// Without -control it connects, runs one turn of -d seconds, prints it and
// exits 0. With -control the connections stay open between turns, so that
// a turn costs the server no accepts and closes: it connects, prints
// "ready N" and then reads commands from stdin, one a line:
//   run SECONDS      one turn; prints it, then "end"
//   quit (or EOF)    closes the connections and exits 0
// A refused connection, an early end of stream, an echo that differs from
// what was sent, or a stalled drain print an error on stderr and exit 1;
// bad flags or commands exit 2.
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/resource.h>
#include <time.h>

#include "c_server.h"

enum {
  kMaxSize = 4096,
  kMaxWindowBytes = 1 << 20,  // size * window
  kReadBuf = 1 << 16,
};

struct conn {
  int fd;
  uint64_t sent;  // bytes written in this turn
  uint64_t got;   // bytes of echo read in this turn
  int want_out;   // EPOLLOUT is armed (a write was short)
};

static uint64_t msg_size = 64;
static uint64_t window = 1;  // messages in flight per connection
static int running;          // the turn's deadline has not passed
// The bytes of the stream: byte k of a connection's stream is pat[k % size],
// so that any stretch of it starts at out + k % size. Long enough for a
// window and a message on top.
static char* out;
static char rbuf[kReadBuf];

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void fail(const char* what) {
  perror(what);
  exit(1);
}

// How far a connection may write: W messages beyond the last echoed whole
// while the turn runs; to the end of the message begun once it is over.
static uint64_t limit(const struct conn* c) {
  if (running) return (c->got / msg_size + window) * msg_size;
  return (c->sent + msg_size - 1) / msg_size * msg_size;
}

static int finished(const struct conn* c) {
  return c->got == c->sent && c->sent % msg_size == 0;
}

static void set_events(int ep, struct conn* c, int want_out) {
  if (c->want_out == want_out) return;
  struct epoll_event ev = {.events = EPOLLIN | (want_out ? EPOLLOUT : 0), .data.ptr = c};
  if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) fail("epoll_ctl");
  c->want_out = want_out;
}

// Writes what the window allows; arms EPOLLOUT if the socket took less.
// In pingpong mode that is one send of one message per echo.
static void push(int ep, struct conn* c) {
  uint64_t lim = limit(c);
  while (c->sent < lim) {
    ssize_t n = send(c->fd, out + c->sent % msg_size, lim - c->sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      fail("send");
    }
    c->sent += (uint64_t)n;
  }
  set_events(ep, c, c->sent < lim);
}

// Reads what the server sent back, checking it, until the socket is empty.
static void pull(struct conn* c) {
  for (;;) {
    ssize_t n = read(c->fd, rbuf, sizeof rbuf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return;
      fail("read");
    }
    if (n == 0) {
      fprintf(stderr, "echo_load: the server closed a connection\n");
      exit(1);
    }
    if (c->got + (uint64_t)n > c->sent) {
      fprintf(stderr, "echo_load: the server sent bytes nobody asked for\n");
      exit(1);
    }
    // At most sent - got <= (window + 1) * size bytes: within out.
    if (memcmp(rbuf, out + c->got % msg_size, (size_t)n) != 0) {
      fprintf(stderr, "echo_load: the echo differs from the message sent\n");
      exit(1);
    }
    c->got += (uint64_t)n;
    if ((size_t)n < sizeof rbuf) return;  // the socket is drained
  }
}

// One turn of `seconds` over all connections; prints its figures.
static void turn(int ep, struct conn* cs, long conns, double seconds) {
  double cpu0 = cpu_s();
  long open = conns;  // connections not finished yet
  running = 1;
  double t0 = now_s(), deadline = t0 + seconds, drain_limit = deadline + 5, t = t0;
  for (long i = 0; i < conns; i++) {
    cs[i].sent = cs[i].got = 0;
    push(ep, &cs[i]);
  }
  struct epoll_event events[256];
  while (open > 0) {
    int n = epoll_wait(ep, events, 256, 1000);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("epoll_wait");
    }
    // One clock read per batch: a message whose echo completes in this
    // batch starts its successor until the batch that sees the deadline.
    t = now_s();
    if (running && t >= deadline) {
      running = 0;
      // From here on a connection only finishes its last message; those
      // with nothing in flight are done already.
      for (long i = 0; i < conns; i++) {
        if (finished(&cs[i])) open--;
      }
    }
    if (!running && t > drain_limit) {
      fprintf(stderr, "echo_load: %ld connection(s) still waiting for echoes 5 s after the end\n",
              open);
      exit(1);
    }
    for (int k = 0; k < n; k++) {
      struct conn* c = events[k].data.ptr;
      int was_finished = !running && finished(c);
      // push also disarms EPOLLOUT once there is nothing left to write.
      if (events[k].events & EPOLLOUT) push(ep, c);
      if (events[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        if (was_finished) {
          fprintf(stderr, "echo_load: the server sent bytes nobody asked for, or closed\n");
          exit(1);
        }
        uint64_t got = c->got;
        pull(c);
        if (running) {
          if (c->got != got) push(ep, c);  // the window moved
        } else if (finished(c)) {
          open--;
        }
      }
    }
  }
  uint64_t bytes = 0;
  for (long i = 0; i < conns; i++) {
    bytes += cs[i].got;
    set_events(ep, &cs[i], 0);
  }
  double elapsed = t - t0;
  uint64_t done = bytes / msg_size;
  printf("messages %llu\nseconds %.6f\nmsgs/s %.1f\ncpu_seconds %.6f\n", (unsigned long long)done,
         elapsed, elapsed > 0 ? (double)done / elapsed : 0.0, cpu_s() - cpu0);
  fflush(stdout);
}

// Makes room for `need` descriptors: raises the soft RLIMIT_NOFILE to the
// hard limit if it is lower, and fails with a message if even that is too
// low.
static void reserve_fds(long need) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) fail("getrlimit");
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)need) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)need) {
    fprintf(stderr,
            "echo_load: %ld descriptors needed, RLIMIT_NOFILE allows %llu (hard limit %llu): "
            "raise it (ulimit -n) or use fewer connections\n",
            need, (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
    exit(1);
  }
}

static void usage(void) {
  fprintf(stderr,
          "usage: echo_load -connect IPv4:PORT [-c CONNS] [-size BYTES] "
          "[-mode pingpong|stream] [-window MESSAGES] [-d SECONDS | -control]\n");
  exit(2);
}

int main(int argc, char** argv) {
  const char* addr = NULL;
  long conns = 100, size = 64, win = 64;
  int stream = 0, control = 0;
  double seconds = 5;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-control") == 0) {
      control = 1;
      continue;
    }
    if (i + 1 >= argc) usage();
    const char* v = argv[++i];
    char* end;
    if (strcmp(argv[i - 1], "-connect") == 0) {
      addr = v;
    } else if (strcmp(argv[i - 1], "-c") == 0) {
      conns = strtol(v, &end, 10);
      if (*end != '\0' || conns < 1 || conns > 60000) usage();
    } else if (strcmp(argv[i - 1], "-size") == 0) {
      size = strtol(v, &end, 10);
      if (*end != '\0' || size < 1 || size > kMaxSize) usage();
    } else if (strcmp(argv[i - 1], "-window") == 0) {
      win = strtol(v, &end, 10);
      if (*end != '\0' || win < 1 || win > kMaxWindowBytes) usage();
    } else if (strcmp(argv[i - 1], "-mode") == 0) {
      if (strcmp(v, "stream") == 0) stream = 1;
      else if (strcmp(v, "pingpong") != 0) usage();
    } else if (strcmp(argv[i - 1], "-d") == 0) {
      seconds = strtod(v, &end);
      if (*end != '\0' || !(seconds > 0)) usage();
    } else {
      usage();
    }
  }
  struct sockaddr_in sa;
  if (addr == NULL || !parse_ipv4_port(addr, &sa) || sa.sin_port == 0) usage();
  msg_size = (uint64_t)size;
  window = stream ? (uint64_t)win : 1;
  if (msg_size * window > kMaxWindowBytes) {
    fprintf(stderr, "echo_load: -size times -window is at most %d bytes\n", kMaxWindowBytes);
    exit(2);
  }
  size_t out_len = (size_t)(msg_size * (window + 2));
  out = malloc(out_len);
  if (out == NULL) fail("malloc");
  for (size_t i = 0; i < out_len; i++) out[i] = (char)('a' + (i % msg_size) % 26);
  reserve_fds(conns + 16);

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

  if (!control) {
    turn(ep, cs, conns, seconds);
  } else {
    printf("ready %ld\n", conns);
    fflush(stdout);
    char line[128];
    while (fgets(line, sizeof line, stdin) != NULL) {
      char* end;
      if (strncmp(line, "run ", 4) == 0) {
        double s = strtod(line + 4, &end);
        if (end == line + 4 || (*end != '\n' && *end != '\0') || !(s > 0)) {
          fprintf(stderr, "echo_load: bad command: %s", line);
          exit(2);
        }
        turn(ep, cs, conns, s);
        printf("end\n");
        fflush(stdout);
      } else if (strcmp(line, "quit\n") == 0 || strcmp(line, "quit") == 0) {
        break;
      } else {
        fprintf(stderr, "echo_load: bad command: %s", line);
        exit(2);
      }
    }
  }
  for (long i = 0; i < conns; i++) close(cs[i].fd);
  return 0;
}
