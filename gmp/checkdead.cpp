// gmp/checkdead.cpp — Go's checkdead: when the last running M goes idle,
// whether anything can ever make a goroutine runnable again; if nothing
// can, the program is deadlocked and dies with Go's report (the dump is
// the diagnostics' part: fatal_deadlock_locked, gmp/diag/fatal.cpp).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gmp/os/fatal.hpp"
#include "gmp/sched.hpp"
#include "gmp/timer.hpp"
#include "gort/detail/race.hpp"

namespace gort::internal {

namespace {

int os_thread_count() {
  FILE* f = std::fopen("/proc/self/stat", "r");
  if (f == nullptr) return 1 << 30;  // unknown: assume others exist
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // Field 20 (num_threads); skip "pid (comm)" first: comm may hold spaces.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 1 << 30;
  int field = 2;
  for (p++; *p != '\0' && field < 20; p++) {
    if (*p == ' ') field++;
  }
  return std::atoi(p);
}

}  // namespace

// Sched::lock held.
void check_dead_locked() {
  if (sched.stopping.load(std::memory_order_relaxed)) return;
  // Ms inside blocking() count as running: their call may return and
  // wake someone.
  // Ms asleep until their locked G is picked count as idle (that G is on
  // a run queue, which the checks below see).
  int32_t run = sched.mcount - sched.nmidle - sched.nmidlelocked;
  if (run > 0) return;
  // The poller's waiters first, then who may be carrying one away. An M
  // that polled one is running (counted above); sysmon raises external_ops
  // before its poll counts a G out of the waiters and lowers it after
  // injecting the G under sched.lock, which we hold. Read in the other
  // order, a G in transit could be missed by both checks. seq_cst on every
  // side (netpoll/poll_desc.cpp, preempt/sysmon.cpp).
  if (runtime.hooks.netpoll_waiters() > 0) return;
  if (sched.netpoll_blocked.load(std::memory_order_seq_cst)) return;
  if (runtime.external_ops.load(std::memory_order_seq_cst) > 0) return;
  if (sched.runqsize.load(std::memory_order_relaxed) > 0) return;
  for (P* p : sched.allp) {
    if (!p->runq.empty()) return;
  }
  if (timers_next() >= 0) return;
  // Any thread besides the runtime's own (its Ms, sysmon, the stack pool's
  // helper: nsystem_threads) could still send on a channel or start a
  // goroutine: then nothing is provably dead (as Go, which does not report
  // deadlocks while cgo threads exist).
  // ThreadSanitizer runs one thread of its own in a race build, started
  // with the process's first pthread_create (sysmon's, at the latest) and
  // again in a forked child.
  int32_t sanitizer_threads = kRaceEnabled ? 1 : 0;
  if (os_thread_count() > sched.mcount + runtime.nsystem_threads.load() + sanitizer_threads) return;
  fatal_deadlock_locked("all goroutines are asleep - deadlock!");
}

}  // namespace gort::internal
