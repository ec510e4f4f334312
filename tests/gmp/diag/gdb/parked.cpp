// tests/gmp/diag/gdb/parked.cpp — a program whose goroutines are parked in known
// functions, for gdb_test.py to inspect with the gdb extension
// (gmp/diag/gdb/libgort-gdb.py) on the live process and on core files.
//
//   parked PROCS live    parks them, prints "ready PID", then waits (inside
//                        gort::blocking) until stdin closes, and exits 0
//   parked PROCS abort   parks them, prints "ready PID", starts one more
//                        goroutine (never_started: with one P it cannot
//                        run before main) and aborts, with RLIMIT_CORE
//                        raised so that the kernel may write a core
//
// Goroutines and where they wait (the test looks for these names):
//   park_in_chan_recv     a channel receive, reached through recurse(3)
//   park_in_mutex_lock    gort::Mutex::lock on a mutex main holds
//   park_in_sleep         gort::sleep(1h)
//   main                  running, inside gort::blocking (a read of stdin)
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gort/gort.hpp>

namespace {

// noinline and noipa: each must be a frame of its own in the backtrace.
__attribute__((noipa)) void park_in_chan_recv(gort::Chan<int> ch) {
  auto v = ch.recv();  // gdb_test: chan
  if (v) std::printf("received %d\n", *v);
}

__attribute__((noipa)) int recurse(int depth, gort::Chan<int> ch) {
  if (depth == 0) {
    park_in_chan_recv(ch);
    return 0;
  }
  return recurse(depth - 1, ch) + 1;
}

__attribute__((noipa)) void park_in_mutex_lock(gort::Mutex* mu) {
  mu->lock();  // gdb_test: mutex
  mu->unlock();
}

__attribute__((noipa)) void never_started() { std::printf("never_started ran\n"); }

__attribute__((noipa)) void park_in_sleep() {
  gort::sleep(absl::Hours(1));  // gdb_test: sleep
}

// Whether each of the three waits a goroutine of its own, read from the
// tracebacks' headers (`goroutine N [chan receive]:`): this program links
// the installed library's build, whose internals are hidden.
bool all_parked() {
  std::string all = gort::stack(true);
  auto count = [&all](const char* header) {
    int n = 0;
    for (size_t at = all.find(header); at != std::string::npos; at = all.find(header, at + 1)) n++;
    return n;
  };
  return count("[chan receive") == 1 && count("[sync.Mutex.Lock") == 1 && count("[sleep") == 1;
}

// Polls all_parked for up to ten seconds.
bool eventually_parked() {
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!all_parked()) {
    if (absl::Now() > deadline) return false;
    gort::sleep(absl::Milliseconds(1));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[2], "live") != 0 && std::strcmp(argv[2], "abort") != 0)) {
    std::fprintf(stderr, "usage: %s PROCS live|abort\n", argv[0]);
    return 2;
  }
  bool abort_mode = std::strcmp(argv[2], "abort") == 0;
  // Under Yama's ptrace_scope 1 only an ancestor may attach, and gdb is
  // the test's child, not ours: allow any process of this user.
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  gort::Config cfg;
  cfg.procs = std::atoi(argv[1]);
  return gort::run(
      [abort_mode] {
        auto ch = gort::make_chan<int>();
        gort::Mutex mu;
        mu.lock();
        gort::go([ch] { recurse(3, ch); });
        gort::go([&mu] { park_in_mutex_lock(&mu); });
        gort::go([] { park_in_sleep(); });
        if (!eventually_parked()) {
          std::fprintf(stderr, "the goroutines did not park\n");
          std::exit(1);
        }
        if (abort_mode) {
          rlimit lim{RLIM_INFINITY, RLIM_INFINITY};
          if (setrlimit(RLIMIT_CORE, &lim) != 0) {
            getrlimit(RLIMIT_CORE, &lim);
            lim.rlim_cur = lim.rlim_max;
            setrlimit(RLIMIT_CORE, &lim);
          }
        }
        std::printf("ready %d\n", static_cast<int>(getpid()));
        std::fflush(stdout);
        if (abort_mode) {
          // A fresh time slice: all_parked's tracebacks (the first loads
          // the debug information) outlast one, and `go`, a preemption
          // point, would then yield the P to never_started.
          gort::yield();
          gort::go([] { never_started(); });  // gdb_test: never_started
          std::abort();
        }
        // Running (in a system call) while gdb looks; stdin's end lets it go.
        gort::blocking([] {
          char c;
          while (read(0, &c, 1) > 0) {  // gdb_test: main
          }
        });
        mu.unlock();
        ch.send(1);
        // The sleeper is abandoned at exit, as Go abandons goroutines.
      },
      cfg);
}
