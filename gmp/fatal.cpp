// gmp/fatal.cpp — see fatal.hpp. Go's checkdead is here too: its verdict is
// one more way to die, with the same goroutine dump.
#include "gmp/fatal.hpp"

#include <execinfo.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gmp/sched.hpp"
#include "gmp/timer.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {

void write_stderr(const char* s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = ::write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void write_stderr_int(long long v) {
  char buf[32];
  char* e = buf + sizeof buf;
  char* p = e;
  *--p = '\0';
  bool neg = v < 0;
  unsigned long long u = neg ? 0ull - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
  do {
    *--p = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (neg) *--p = '-';
  write_stderr(p);
}

void write_stderr_hex(unsigned long long v) {
  char buf[32];
  char* p = buf + sizeof buf;
  *--p = '\0';
  do {
    *--p = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v != 0);
  *--p = 'x';
  *--p = '0';
  write_stderr(p);
}

namespace {

void print_goroutine_header(long long id, const char* state) {
  write_stderr("goroutine ");
  write_stderr_int(id);
  write_stderr(" [");
  write_stderr(state);
  write_stderr("]:\n");
}

}  // namespace

void dump_goroutines_locked(G* current) {
  int shown = 0;
  for (G* g = sched.allg; g != nullptr; g = g->allg_next) {
    GStatus s = g->status.load(std::memory_order_relaxed);
    if (g == current || s == GStatus::kDead || s == GStatus::kIdle) continue;
    if (++shown > 64) {
      write_stderr("...additional goroutines elided...\n");
      break;
    }
    write_stderr("\n");
    const char* what = s == GStatus::kWaiting ? wait_reason_string(g->waitreason) : gstatus_string(s);
    print_goroutine_header(g->id, what);
  }
}

void fatal(const char* msg) {
  std::fflush(stdout);
  write_stderr("fatal error: ");
  write_stderr(msg);
  write_stderr("\n");
  G* g = getg();
  if (g != nullptr) {
    write_stderr("\n");
    print_goroutine_header(g->id, "running");
  }
  // Go prints the stacks on a throw; we have no unwinder of goroutine
  // stacks, but the native frames of the failing thread say where.
  write_stderr("\nruntime stack:\n");
  void* frames[48];
  int n = backtrace(frames, 48);
  backtrace_symbols_fd(frames, n, 2);
  _exit(2);
}

void fatal_panic(const char* what, long long goid) {
  std::fflush(stdout);
  write_stderr("panic: ");
  write_stderr(what);
  write_stderr("\n\n");
  print_goroutine_header(goid, "running");
  _exit(2);
}

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
  int32_t run = sched.mcount - sched.nmidle;
  if (run > 0) return;
  if (sched.netpoll_blocked.load(std::memory_order_relaxed)) return;
  if (sched.external_ops.load(std::memory_order_acquire) > 0) return;
  if (sched.runqsize.load(std::memory_order_relaxed) > 0) return;
  for (P* p : sched.allp) {
    if (!p->runq.empty()) return;
  }
  if (timers_next() >= 0) return;
  if (sched.hooks.netpoll_waiters != nullptr && sched.hooks.netpoll_waiters() > 0) return;
  // Any thread besides the runtime's own (its Ms and sysmon) could still
  // send on a channel or start a goroutine: then nothing is provably dead
  // (as Go, which does not report deadlocks while cgo threads exist).
  if (os_thread_count() > sched.mcount + sched.nsystem_threads.load()) return;
  std::fflush(stdout);
  write_stderr("fatal error: all goroutines are asleep - deadlock!\n");
  dump_goroutines_locked(nullptr);
  _exit(2);
}

}  // namespace gort::internal
