// bench/net_bench.cpp — the netpoller and the timers against Go's: TCP
// round trips, the memory an idle connection costs, mass sleeping, and
// deadlines pushed back per message.
// Twin: bench/go/net_bench/main.go. All traffic stays on 127.0.0.1.
//
// Every case is a whole-process workload (see bench_util.hpp). The server and
// its clients live in the same process, so the P count covers both sides of
// every connection.
//
//   tcp_echo/procs:N    an echo server (a goroutine per connection, 4 KiB read
//                       buffer) and 100 client connections, each a goroutine
//                       that writes a 64-byte message and reads the 64 bytes
//                       back, 200,000 round trips in all (2,000 per client).
//                       msgs/s = round trips / elapsed (dials excluded).
//                       Run with 1 and 2 Ps.
//   idle_conns/procs:1  a client process (forked before the runtime starts;
//                       plain blocking sockets) opens 10,000 connections to
//                       the echo server, which accepts them and whose
//                       goroutines then sit parked waiting for data (here
//                       in wait_readable, the idiom docs/net.md gives for
//                       many idle connections; Go's in Read with a 4 KiB
//                       heap buffer). bytes/conn =
//                       (RSS once all server goroutines have started − RSS
//                       before the first connection) / N, for the server
//                       process only. The soft RLIMIT_NOFILE is raised to the
//                       hard limit; the case fails with a message if N + 64
//                       descriptors do not fit. (Both ends in one process
//                       would need 2N: more than this machine's hard limit
//                       of 20,000.)
//   idle_sessions/procs:1  the same, served by a gort::net::Server of
//                       sessions that wait for input without a goroutine
//                       (gort/server.hpp); Go's twin runs idle_conns' code
//                       (it has no such mode), so the ratio compares with
//                       Go's goroutine per connection.
//   timers/procs:2      100,000 goroutines, each sleeping 1–50 ms (the
//                       durations come from splitmix64 seeded with 1, the
//                       same sequence on both sides), all joined.
//                       ns/timer = elapsed / N (the ~50 ms of the longest
//                       sleep included), late_ms = elapsed − the longest
//                       sleep: how long spawning and firing took beyond it.
//   timer_ops/procs:1   100,000 × {new_timer(1 h); stop()}.
//                       ns/timer_op = elapsed / N. (Not "ns/op": bench/compare
//                       reserves that name for Google Benchmark's own time.)
//   timer_rearm/procs:N  a server's read deadlines without sockets: 100,000
//                       timers of 30 s (none fires), split evenly among one
//                       goroutine per P, each making its own; then 10 rounds
//                       in which every goroutine pushes each of its timers
//                       back with reset(30 s), as a server pushes a
//                       connection's deadline back per message; then all are
//                       stopped. ns/rearm = the rounds' elapsed / 1,000,000
//                       re-arms (wall clock, from releasing the goroutines to
//                       the last one done). The case fails if a reset or a
//                       stop returns false. Run with 1 and 2 Ps.
//   deadline_rearm/procs:1  the same through the descriptors' deadline path:
//                       5,000 pipes (os::pipe; Go: os.Pipe), each read end
//                       given a read deadline of now + 30 s, then 20 rounds
//                       of set_read_deadline(now + 30 s) on every read end
//                       (Go: SetReadDeadline), the clock read per call as a
//                       server does. ns/rearm = the rounds' elapsed / 100,000
//                       re-arms. Needs 2 × 5,000 + 64 descriptors (the soft
//                       RLIMIT_NOFILE is raised, as for idle_conns); fails
//                       if a deadline cannot be set.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <gort/gort.hpp>

#include "bench_util.hpp"

namespace {

using gortbench::Stopwatch;

constexpr int64_t kEchoRoundTrips = 200'000;
constexpr int kEchoClients = 100;
constexpr size_t kEchoMessage = 64;
constexpr size_t kServerBuffer = 4096;
constexpr int64_t kIdleConns = 10'000;
constexpr int64_t kSleepers = 100'000;
constexpr int kMaxSleepMs = 50;
constexpr int64_t kTimerOps = 100'000;
constexpr int64_t kRearmTimers = 100'000;
constexpr int kRearmRounds = 10;
constexpr int64_t kDeadlineFiles = 5'000;
constexpr int kDeadlineRounds = 20;
// Far enough that no deadline of timer_rearm or deadline_rearm comes due
// while the case runs: every reset moves an armed timer later.
constexpr absl::Duration kReadDeadline = absl::Seconds(30);

// The first error of a case; later ones are dropped. Goroutines of a failed
// case stop early and the case reports the error instead of numbers.
class Failure {
 public:
  void set(std::string msg) {
    bool expected = false;
    if (set_.compare_exchange_strong(expected, true)) msg_ = std::move(msg);
  }
  bool failed() const { return set_.load(); }
  // Only after every goroutine that may call set() has been joined.
  const std::string& message() const { return msg_; }

 private:
  std::atomic<bool> set_{false};
  std::string msg_;
};

std::string status_text(const absl::Status& s) { return std::string(s.message()); }

// Echoes everything it reads until end of stream or an error.
void echo(gort::net::Conn c) {
  char buf[kServerBuffer];
  for (;;) {
    auto n = c.read(absl::MakeSpan(buf));
    if (!n.ok() || *n == 0) return;
    if (!c.write(absl::MakeConstSpan(buf, *n)).ok()) return;
  }
}

// One read and its echo, with the buffer in this frame: called only once
// data is there, so the frame is not on the stack of an idle goroutine.
[[gnu::noinline]] bool echo_some(gort::net::Conn& c) {
  char buf[kServerBuffer];
  auto n = c.read(absl::MakeSpan(buf));
  if (!n.ok() || *n == 0) return false;
  return c.write(absl::MakeConstSpan(buf, *n)).ok();
}

// echo() for servers of many idle connections (docs/net.md): an idle
// goroutine waits in wait_readable with no buffer on its stack, so it keeps
// one stack page instead of two.
void echo_lean(gort::net::Conn c) {
  while (c.wait_readable().ok() && echo_some(c)) {
  }
}

// A listener on 127.0.0.1:<free port> whose accept loop serves every
// connection with `echo` (or `echo_lean`) in its own goroutine. stop() closes the listener
// and waits for the accept loop and every connection goroutine.
class EchoServer {
 public:
  explicit EchoServer(bool lean = false) : lean_(lean) {}

  absl::Status start() {
    auto ln = gort::net::listen("tcp", "127.0.0.1:0");
    if (!ln.ok()) return ln.status();
    ln_ = std::move(*ln);
    addr_ = ln_.addr();
    all_.add(1);
    gort::go([this] {
      for (;;) {
        auto c = ln_.accept();
        if (!c.ok()) break;  // closed by stop()
        all_.add(1);
        gort::go([this](gort::net::Conn conn) {
          started_.fetch_add(1);
          if (lean_) {
            echo_lean(std::move(conn));
          } else {
            echo(std::move(conn));
          }
          all_.done();
        }, std::move(*c));
      }
      all_.done();
    });
    return absl::OkStatus();
  }
  const std::string& addr() const { return addr_; }
  // Waits until `n` connections have been accepted and their goroutines
  // are about to read. Polled: a WaitGroup could not be waited on before
  // the accept loop has seen every connection.
  void wait_started(int64_t n) {
    while (started_.load() < n) gort::sleep(absl::Milliseconds(1));
  }
  // Closes the listener, then waits for every goroutine; the clients must
  // have closed their ends first.
  void stop() {
    (void)ln_.close();
    all_.wait();
  }

 private:
  const bool lean_;
  gort::net::Listener ln_;
  std::string addr_;
  gort::WaitGroup all_;
  std::atomic<int64_t> started_{0};
};

void tcp_echo(benchmark::State& state, int procs) {
  const int64_t total = gortbench::scaled(kEchoRoundTrips);
  const int64_t per_client = std::max<int64_t>(1, total / kEchoClients);
  const int64_t done_total = per_client * kEchoClients;
  double seconds = 0;
  Failure fail;
  gort::run(
      [&] {
        EchoServer srv;
        if (auto s = srv.start(); !s.ok()) return fail.set("listen: " + status_text(s));
        std::vector<gort::net::Conn> conns;
        for (int i = 0; i < kEchoClients; i++) {
          auto c = gort::net::dial("tcp", srv.addr());
          if (!c.ok()) {
            fail.set(status_text(c.status()));
            break;
          }
          conns.push_back(std::move(*c));
        }
        gort::WaitGroup wg;
        Stopwatch sw;
        if (!fail.failed()) {
          for (auto& conn : conns) {
            wg.add(1);
            gort::go([&wg, &fail, &conn, per_client] {
              char msg[kEchoMessage];
              std::fill(std::begin(msg), std::end(msg), 'x');
              char back[kEchoMessage];
              for (int64_t i = 0; i < per_client && !fail.failed(); i++) {
                if (auto w = conn.write(absl::MakeConstSpan(msg)); !w.ok()) {
                  fail.set("client write: " + status_text(w.status()));
                  break;
                }
                for (size_t got = 0; got < kEchoMessage;) {
                  auto n = conn.read(absl::MakeSpan(back + got, kEchoMessage - got));
                  if (!n.ok() || *n == 0) {
                    fail.set("client read: " + (n.ok() ? std::string("EOF") : status_text(n.status())));
                    i = per_client;
                    break;
                  }
                  got += *n;
                }
              }
              wg.done();
            });
          }
          wg.wait();
        }
        seconds = sw.seconds();
        conns.clear();  // closes the clients' ends: the server goroutines read EOF
        srv.stop();
      },
      gort::Config{.procs = procs});
  if (fail.failed()) return state.SkipWithError(("tcp_echo: " + fail.message()).c_str());
  state.SetIterationTime(seconds);
  state.counters["msgs/s"] = static_cast<double>(done_total) / seconds;
}

// Raises the soft RLIMIT_NOFILE to the hard limit; returns the limit now in
// effect.
rlim_t raise_nofile() {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  getrlimit(RLIMIT_NOFILE, &rl);
  return rl.rlim_cur;
}

// Writes all of s to fd (a pipe); false on error.
bool write_all(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    s.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// The client process of idle_conns: reads "<port> <n>\n" from `in`, opens n
// connections to 127.0.0.1:<port> with plain blocking sockets, writes "ok\n"
// (or "error: ...\n") to `out`, then holds them until `in` reaches end of
// file. On "wake\n" it writes one byte on every connection, then reads the
// echo of each, and writes "woke <ns>\n": the time from the first write to
// the last echo. Runs in a child forked before the runtime started.
[[noreturn]] void idle_client(int in, int out) {
  std::string line;
  char ch;
  while (::read(in, &ch, 1) == 1 && ch != '\n') line += ch;
  int port = 0;
  long long n = 0;
  if (std::sscanf(line.c_str(), "%d %lld", &port, &n) != 2) _exit(1);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string err;
  std::vector<int> fds;
  for (long long i = 0; i < n && err.empty(); i++) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      err = "error: client socket/connect #" + std::to_string(i) + ": " + std::strerror(errno) + "\n";
    }
    fds.push_back(fd);
  }
  write_all(out, err.empty() ? "ok\n" : err);
  for (;;) {
    line.clear();
    ssize_t r;
    while ((r = ::read(in, &ch, 1)) == 1 && ch != '\n') line += ch;
    if (r <= 0) break;
    if (line != "wake") continue;
    auto start = std::chrono::steady_clock::now();
    bool ok = true;
    for (int fd : fds) ok &= ::write(fd, "w", 1) == 1;
    for (int fd : fds) ok &= ::read(fd, &ch, 1) == 1;
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
    write_all(out, ok ? "woke " + std::to_string(ns.count()) + "\n" : "error: wake\n");
  }
  _exit(0);  // the kernel closes the connections
}

// idle_sessions: the server side is a gort::net::Server of sessions whose
// first turn waits for input without a goroutine (gort/server.hpp).
struct IdleSession : gort::net::Session {
  gort::net::Next turn(gort::net::ServerConn& c) override {
    if (first) {  // a new connection: idle at once, until its first byte
      first = false;
      return gort::net::Next::kWaitInput;
    }
    char buf[4096];
    auto n = c.read(absl::MakeSpan(buf));
    if (!n.ok() || *n == 0) return gort::net::Next::kClose;
    return c.write(absl::MakeConstSpan(buf, *n)).ok() ? gort::net::Next::kWaitInput : gort::net::Next::kClose;
  }
  bool first = true;
};

void idle_conns_mode(benchmark::State& state, int procs, bool sessions) {
  const int64_t n = gortbench::scaled(kIdleConns);
  // This process holds the server ends only; the client process the others.
  const rlim_t need = static_cast<rlim_t>(n + 64);
  const rlim_t have = raise_nofile();
  if (have != RLIM_INFINITY && have < need) {
    std::fprintf(stderr, "idle_conns: needs %llu descriptors, RLIMIT_NOFILE allows %llu\n",
                 static_cast<unsigned long long>(need), static_cast<unsigned long long>(have));
    return state.SkipWithError("idle_conns: RLIMIT_NOFILE too low (see stderr)");
  }
  // Fork before the runtime starts: its threads would not survive a fork.
  int to_child[2], from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0) {
    return state.SkipWithError("idle_conns: pipe failed");
  }
  pid_t pid = ::fork();
  if (pid < 0) return state.SkipWithError("idle_conns: fork failed");
  if (pid == 0) {
    ::close(to_child[1]);
    ::close(from_child[0]);
    idle_client(to_child[0], from_child[1]);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);

  double seconds = 0, wake_ms = 0;
  int64_t delta = 0;
  Failure fail;
  gort::run(
      [&] {
        EchoServer srv(/*lean=*/true);
        std::optional<gort::net::Server> ss;
        gort::net::Listener sln;
        gort::WaitGroup serving;
        if (sessions) {
          // Each connection's first turn waits for input in the server's
          // poller: no goroutine, no stack.
          ss.emplace(gort::net::Sessions{[](gort::net::ServerConn&) -> std::unique_ptr<gort::net::Session> {
            return std::make_unique<IdleSession>();
          }});
          auto ln = gort::net::listen("tcp", "127.0.0.1:0");
          if (!ln.ok()) return fail.set("listen: " + status_text(ln.status()));
          sln = std::move(*ln);
          serving.add(1);
          gort::go([&] {
            (void)ss->serve(sln);
            serving.done();
          });
        } else if (auto s = srv.start(); !s.ok()) {
          return fail.set("listen: " + status_text(s));
        }
        const std::string addr = sessions ? sln.addr() : srv.addr();
        const std::string port = addr.substr(addr.rfind(':') + 1);
        const int64_t before = gortbench::rss_bytes();
        Stopwatch sw;
        if (!write_all(to_child[1], port + " " + std::to_string(n) + "\n")) {
          fail.set("cannot talk to the client process");
        } else {
          // The pipe is not on the poller: wait for the client's report with
          // this thread's P handed to the accept loop.
          std::string report = gort::blocking([&] {
            std::string r;
            char ch;
            while (::read(from_child[0], &ch, 1) == 1 && ch != '\n') r += ch;
            return r;
          });
          if (report != "ok") {
            fail.set(report.empty() ? "the client process died" : report);
          } else {
            if (sessions) {
              while (ss->num_idle() < static_cast<size_t>(n)) gort::sleep(absl::Milliseconds(1));
            } else {
              srv.wait_started(n);
            }
            delta = gortbench::rss_bytes() - before;
            // Wake every idle connection at once: one byte each, echoed.
            std::string woke;
            if (write_all(to_child[1], "wake\n")) {
              woke = gort::blocking([&] {
                std::string r;
                char ch;
                while (::read(from_child[0], &ch, 1) == 1 && ch != '\n') r += ch;
                return r;
              });
            }
            if (woke.rfind("woke ", 0) != 0) {
              fail.set(woke.empty() ? "the client process died waking" : woke);
            } else {
              wake_ms = static_cast<double>(std::stoll(woke.substr(5))) / 1e6;
            }
          }
        }
        seconds = sw.seconds();
        ::close(to_child[1]);  // the client exits; its connections close
        gort::blocking([&] { ::waitpid(pid, nullptr, 0); });
        if (sessions) {
          (void)ss->shutdown(gort::background());
          serving.wait();
        } else {
          srv.stop();
        }
      },
      gort::Config{.procs = procs});
  ::close(from_child[0]);
  if (fail.failed()) return state.SkipWithError(("idle_conns: " + fail.message()).c_str());
  state.SetIterationTime(seconds);
  state.counters["bytes/conn"] = static_cast<double>(delta) / static_cast<double>(n);
  state.counters["wake_ms"] = wake_ms;
  state.counters["peak_rss_MiB"] = gortbench::mib(gortbench::peak_rss_bytes());
}

void idle_conns(benchmark::State& state, int procs) { idle_conns_mode(state, procs, false); }
void idle_sessions(benchmark::State& state, int procs) { idle_conns_mode(state, procs, true); }

// splitmix64: the same sequence in the Go twin.
uint64_t splitmix64(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void timers(benchmark::State& state, int procs) {
  const int64_t n = gortbench::scaled(kSleepers);
  std::vector<int> ms(static_cast<size_t>(n));
  uint64_t seed = 1;
  for (auto& m : ms) m = 1 + static_cast<int>(splitmix64(&seed) % kMaxSleepMs);
  const int longest = *std::max_element(ms.begin(), ms.end());
  double seconds = 0;
  gort::run(
      [&] {
        gort::WaitGroup wg;
        Stopwatch sw;
        for (int m : ms) {
          wg.add(1);
          gort::go([&wg, m] {
            gort::sleep(absl::Milliseconds(m));
            wg.done();
          });
        }
        wg.wait();
        seconds = sw.seconds();
      },
      gort::Config{.procs = procs});
  state.SetIterationTime(seconds);
  state.counters["ns/timer"] = seconds * 1e9 / static_cast<double>(n);
  state.counters["late_ms"] = seconds * 1e3 - longest;
}

void timer_ops(benchmark::State& state, int procs) {
  const int64_t n = gortbench::scaled(kTimerOps);
  double seconds = 0;
  int64_t stopped = 0;
  gort::run(
      [&] {
        Stopwatch sw;
        for (int64_t i = 0; i < n; i++) {
          gort::Timer t = gort::new_timer(absl::Hours(1));
          stopped += t.stop();
        }
        seconds = sw.seconds();
      },
      gort::Config{.procs = procs});
  if (stopped != n) return state.SkipWithError("timer_ops: stop() returned false for an armed timer");
  state.SetIterationTime(seconds);
  state.counters["ns/timer_op"] = seconds * 1e9 / static_cast<double>(n);
}

void timer_rearm(benchmark::State& state, int procs) {
  const int64_t n = gortbench::scaled(kRearmTimers);
  double seconds = 0;
  std::atomic<int64_t> rearmed{0};
  int64_t stopped = 0;
  gort::run(
      [&] {
        std::vector<gort::Timer> timers(static_cast<size_t>(n));
        auto start = gort::make_chan<int>(0);
        gort::WaitGroup made, done;
        // One goroutine per P, each owning a slice of the timers and making
        // them itself, as a server's connection goroutines arm their own
        // deadlines (the timers land in the heap of the P that made them).
        for (int w = 0; w < procs; w++) {
          const int64_t lo = n * w / procs, hi = n * (w + 1) / procs;
          made.add(1);
          done.add(1);
          gort::go([&, start, lo, hi] {
            for (int64_t i = lo; i < hi; i++) timers[static_cast<size_t>(i)] = gort::new_timer(kReadDeadline);
            made.done();
            start.recv();  // closed: every goroutine's timers are armed
            int64_t active = 0;
            for (int r = 0; r < kRearmRounds; r++) {
              for (int64_t i = lo; i < hi; i++) active += timers[static_cast<size_t>(i)].reset(kReadDeadline);
            }
            rearmed.fetch_add(active);
            done.done();
          });
        }
        made.wait();
        Stopwatch sw;
        start.close();
        done.wait();
        seconds = sw.seconds();
        for (const auto& t : timers) stopped += t.stop();
      },
      gort::Config{.procs = procs});
  if (rearmed.load() != n * kRearmRounds) {
    return state.SkipWithError("timer_rearm: reset() returned false for an armed timer");
  }
  if (stopped != n) return state.SkipWithError("timer_rearm: stop() returned false for an armed timer");
  state.SetIterationTime(seconds);
  state.counters["ns/rearm"] = seconds * 1e9 / static_cast<double>(n * kRearmRounds);
}

void deadline_rearm(benchmark::State& state, int procs) {
  const int64_t n = gortbench::scaled(kDeadlineFiles);
  // Both ends of every pipe stay open: a read end whose writer is gone
  // would be readable (end of file), unlike an idle connection.
  const rlim_t need = static_cast<rlim_t>(2 * n + 64);
  const rlim_t have = raise_nofile();
  if (have != RLIM_INFINITY && have < need) {
    std::fprintf(stderr, "deadline_rearm: needs %llu descriptors, RLIMIT_NOFILE allows %llu\n",
                 static_cast<unsigned long long>(need), static_cast<unsigned long long>(have));
    return state.SkipWithError("deadline_rearm: RLIMIT_NOFILE too low (see stderr)");
  }
  double seconds = 0;
  Failure fail;
  gort::run(
      [&] {
        std::vector<std::pair<gort::os::File, gort::os::File>> pipes;
        pipes.reserve(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; i++) {
          auto p = gort::os::pipe();
          if (!p.ok()) {
            fail.set("pipe: " + status_text(p.status()));
            break;
          }
          pipes.push_back(std::move(*p));
        }
        // Pushes every read end's deadline to now + 30 s; false on error.
        const auto push_all = [&] {
          for (auto& p : pipes) {
            if (auto s = p.first.set_read_deadline(absl::Now() + kReadDeadline); !s.ok()) {
              fail.set("set_read_deadline: " + status_text(s));
              return false;
            }
          }
          return true;
        };
        // The first call arms each descriptor's deadline timer; the rounds
        // timed below only push armed deadlines later, as timer_rearm's
        // resets do.
        bool ok = !fail.failed() && push_all();
        Stopwatch sw;
        for (int round = 0; round < kDeadlineRounds && ok; round++) ok = push_all();
        seconds = sw.seconds();
        for (auto& p : pipes) {
          (void)p.first.close();
          (void)p.second.close();
        }
      },
      gort::Config{.procs = procs});
  if (fail.failed()) return state.SkipWithError(("deadline_rearm: " + fail.message()).c_str());
  state.SetIterationTime(seconds);
  state.counters["ns/rearm"] = seconds * 1e9 / static_cast<double>(n * kDeadlineRounds);
}

}  // namespace

int main(int argc, char** argv) {
  gortbench::register_once("tcp_echo", 1, tcp_echo);
  gortbench::register_once("tcp_echo", 2, tcp_echo);
  gortbench::register_once("idle_conns", 1, idle_conns);
  gortbench::register_once("idle_sessions", 1, idle_sessions);
  gortbench::register_once("timers", 2, timers);
  gortbench::register_once("timer_ops", 1, timer_ops);
  gortbench::register_once("timer_rearm", 1, timer_rearm);
  gortbench::register_once("timer_rearm", 2, timer_rearm);
  gortbench::register_once("deadline_rearm", 1, deadline_rearm);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
