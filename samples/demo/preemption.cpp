// samples/demo/preemption.cpp — section 3: an infinite loop with no calls
// cannot take a processor hostage, unless preemption is turned off.
//
// The experiment runs in child processes (this executable re-run with
// kChildFlag), each with a one-P runtime: a spinner goroutine runs
// `for (;;) x++;` and a ticker goroutine sleeps 10 ms ten times, printing how
// late each wake-up is. With preemption on, sysmon interrupts the spinner
// every time slice (10 ms) and the ticker keeps time. With it off, the
// spinner never gives the P back, the ticker starves and the child never
// ends, which is why it is a child: the parent kills it after 1.5 s. (A
// runtime with a goroutine that cannot be stopped cannot shut down: its
// thread cannot be joined.)
//
// The parent needs no runtime: it only spawns, reads a pipe with a
// deadline, and kills.
#include <gort/gort.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "demo.hpp"

extern char** environ;

namespace demo {
namespace {

constexpr int kTicks = 10;
constexpr int kTickMs = 10;
constexpr double kStarveLimitS = 1.5;
// Generous: ten 10 ms ticks take 0.1 s even on a loaded machine.
constexpr double kTickLimitS = 10.0;

std::atomic<uint64_t> g_spins{0};

// The loop has no calls, so the only way off the P is an asynchronous
// preemption. The relaxed atomic keeps the compiler from deleting or
// collapsing the loop; it compiles to a plain load, add and store.
[[noreturn]] void spin() {
  std::printf("spinner: started: for (;;) x++; (no function calls inside)\n");
  std::fflush(stdout);
  for (;;) g_spins.store(g_spins.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void ticker() {
  for (int i = 1; i <= kTicks; i++) {
    auto before = Clock::now();
    gort::sleep(absl::Milliseconds(kTickMs));
    double late = ms_since(before) - kTickMs;
    // The parent parses this line.
    std::printf("tick %2d: late by %6.2f ms\n", i, late);
    std::fflush(stdout);
  }
}

struct ChildRun {
  int ticks = 0;
  double max_late_ms = 0;
  std::vector<double> late_ms;
  bool killed = false;
  bool exited_ok = false;
  double seconds = 0;
};

// Relays one line of the child's output, indented, and records ticks.
void on_child_line(const std::string& line, ChildRun* r) {
  std::printf("    | %s\n", line.c_str());
  std::fflush(stdout);
  int n = 0;
  double late = 0;
  if (std::sscanf(line.c_str(), "tick %d: late by %lf ms", &n, &late) == 2) {
    r->ticks++;
    r->late_ms.push_back(late);
    r->max_late_ms = std::max(r->max_late_ms, late);
  }
}

// Runs this executable as a section 3 child and relays its output until it
// exits or `limit_s` has passed, when it is killed.
bool run_child(const char* self, const char* mode, double limit_s, ChildRun* r) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    std::printf("  pipe: %s\n", std::strerror(errno));
    return false;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::string parent = std::to_string(getpid());
  char* argv[] = {const_cast<char*>(self), const_cast<char*>(kChildFlag), const_cast<char*>(mode),
                  parent.data(), nullptr};
  pid_t pid;
  // /proc/self/exe, not argv[0]: the tour may have been started through
  // PATH or a relative path from another directory.
  int err = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (err != 0) {
    close(fds[0]);
    std::printf("  posix_spawn: %s\n", std::strerror(err));
    return false;
  }

  auto start = Clock::now();
  std::string pending;
  bool eof = false;
  int status = 0;
  bool reaped = false;
  while (!reaped) {
    double left_ms = limit_s * 1000.0 - ms_since(start);
    if (left_ms <= 0) {
      kill(pid, SIGKILL);
      r->killed = true;
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      reaped = true;
      break;
    }
    if (eof) {
      // Output closed; give the child its remaining time to exit.
      if (waitpid(pid, &status, WNOHANG) == pid) {
        reaped = true;
      } else {
        usleep(1000);
      }
      continue;
    }
    pollfd p{fds[0], POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>(std::min(left_ms, 100.0)) + 1);
    if (n <= 0) continue;
    char buf[4096];
    ssize_t got = read(fds[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      eof = true;
      continue;
    }
    pending.append(buf, static_cast<size_t>(got));
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
      on_child_line(pending.substr(0, nl), r);
      pending.erase(0, nl + 1);
    }
  }
  if (!pending.empty()) on_child_line(pending, r);
  close(fds[0]);
  r->seconds = ms_since(start) / 1000.0;
  r->exited_ok = !r->killed && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return true;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int preemption_child(bool preempt, long parent) {
  // The starving child never ends by itself: if the tour dies (killed by a
  // test's timeout, ^C), take the child with it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) return 1;  // the parent died before the prctl
  gort::Config cfg;
  cfg.procs = 1;
  cfg.preempt = preempt;
  return gort::run(
      [] {
        gort::WaitGroup wg;
        wg.add(1);
        gort::go(spin);
        gort::go([&wg] {
          ticker();
          wg.done();
        });
        wg.wait();
        std::printf("spinner: %.1f million increments meanwhile (it ran between the ticks)\n",
                    static_cast<double>(g_spins.load(std::memory_order_relaxed)) / 1e6);
        std::fflush(stdout);
        return 0;
      },
      cfg);
}

bool preemption(const char* self) {
  header(3, "preemption: an infinite loop cannot take the processor");
  if (!gort::async_preemption_available()) {
    std::printf("  asynchronous preemption is not available in this build (TSan, a static\n"
                "  libgort, or not x86-64): a call-free loop would starve everyone; skipped\n");
    return true;
  }
  std::printf("  one P, two goroutines: a spinner running for (;;) x++; with no calls inside,\n"
              "  and a ticker that sleeps %d ms %d times and prints how late it wakes up\n",
              kTickMs, kTicks);

  std::printf("\n  a) preemption on (Config::preempt = true, time slice 10 ms):\n");
  std::fflush(stdout);
  ChildRun on;
  bool ok = run_child(self, "on", kTickLimitS, &on);
  if (ok) {
    std::printf("  the ticker kept time: %d of %d ticks, median lateness %.2f ms, max %.2f ms"
                "\n  (a tick waits at most about one 10 ms time slice for the spinner's preemption)\n",
                on.ticks, kTicks, median(on.late_ms), on.max_late_ms);
  }
  ok &= check(ok && on.ticks == kTicks && on.exited_ok, "preempted spinner, ticker ran on time");

  std::printf("\n  b) preemption off (Config::preempt = false):\n");
  std::fflush(stdout);
  ChildRun off;
  bool ran = run_child(self, "off", kStarveLimitS, &off);
  if (ran) {
    std::printf("  ticker starved: %d ticks in %.1f s; the spinner never gave the P back,\n"
                "  so the child was killed%s\n",
                off.ticks, off.seconds, off.killed ? "" : " (it was not: it ended by itself?!)");
  }
  ok &= check(ran && off.killed && off.ticks == 0, "without preemption the ticker starves");
  return ok;
}

}  // namespace demo
