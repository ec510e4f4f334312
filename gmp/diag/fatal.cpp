// gmp/diag/fatal.cpp — see fatal.hpp and gmp/os/fatal.hpp.
//
// Dying (die): one thread at a time prints (a second one that dies waits
// for the first to exit the process); the message goes out first, then on
// the M's own stack the tracebacks: the dying goroutine's from registers
// taken where it failed, then, for fatal errors or GORT_TRACEBACK=all, every
// other goroutine's, after the other Ms were stopped in their signal
// handlers (freeze_world) so that nothing moves while it is read. A
// watchdog ends a traceback that makes no progress for 20 s (a lock it
// needs held by a stopped thread) with exit status 2 all the same.
#include "gmp/diag/fatal.hpp"
#include "gmp/trace_consume.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "gmp/sched.hpp"
#include "gmp/switch.hpp"
#include "gmp/diag/symbolize.hpp"
#include "gmp/timer.hpp"
#include "gmp/tls.hpp"
#include "gmp/diag/traceback.hpp"
#include "gort/detail/race.hpp"
#include "gmp/os/sys.hpp"

namespace gort::internal {

void write_stderr(const char* s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = sys::write(2, s, n);
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

std::atomic<int> g_dying_tid{0};

// Not instrumented, as on_fault (fault.cpp): no ASan stack lookup before the exit.
__attribute__((no_sanitize("address"))) void on_watchdog(int) {
  write_stderr("\ngort: printing the traceback took too long; giving up\n");
  exit_now(2);
}

// Seconds without progress after which a dying process stops printing: a
// lock the traceback needs may be held by a thread it stopped.
constexpr unsigned kWatchdogSeconds = 20;

void arm_watchdog() {
  struct sigaction sa = {};
  sa.sa_handler = &on_watchdog;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGALRM);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  alarm(kWatchdogSeconds);
}

// Runs on the M's own stack (systemstack): libdw and the demangler need
// more than a goroutine may have left.
void print_tracebacks(void* arg) {
  Death* d = static_cast<Death*>(arg);
  TracebackSettings s = traceback_settings();
  int level = d->runtime_error ? 2 : s.level;
  bool all = d->all || s.all;
  arm_watchdog();
  // One traceback at a time; a thread printing one finishes soon, and none
  // is stopped yet (freeze_world comes after).
  // Polled for up to 5 s rather than try_lock_for: GCC 12's race detector
  // does not see pthread_mutex_clocklock, and would then report the unlock.
  std::mutex& mu = symbolizer_mutex();
  bool locked = false;
  for (int i = 0; i < 5000 && !(locked = mu.try_lock()); i++) {
    timespec ts{0, 1000 * 1000};
    sys::nanosleep(&ts, nullptr);
  }
  if (all) freeze_world(500 * 1000 * 1000, d->sched_locked);
  TraceWriter w(2);
  w.set_watchdog(kWatchdogSeconds);
  GoroutineFrames f;
  if (d->have_regs) {
    unwind(d->regs, d->view, d->first_pc, &f.pcs);
    f.kind = GoroutineFrames::kWalked;
    f.skip = d->skip;
    f.cut_at_throw = d->cut_at_throw;
  }
  if (d->g != nullptr) {
    w.put("\n");
    print_goroutine(w, d->g, "running", f, level);
  } else if (d->runtime_stack && d->have_regs) {
    w.put("\nruntime stack:\n");
    print_frames(w, f, level);
  }
  w.flush();
  if (all) {
    // The stopped threads may hold Sched::lock: then walk allg without it
    // (nothing changes it any more).
    std::unique_lock lock(sched.lock, std::defer_lock);
    if (!d->sched_locked) {
      for (int i = 0; i < 100 && !lock.try_lock(); i++) {
        timespec ts{0, 1000 * 1000};
        sys::nanosleep(&ts, nullptr);
      }
    }
    print_all(w, d->g, level, Frozen::kYes);
  }
  w.flush();
  if (locked) mu.unlock();
  alarm(0);
}

[[noreturn]] void finish(bool crash) {
  if (crash) {
    // GORT_TRACEBACK=crash: die of SIGABRT, so that a core is written.
    ::signal(SIGABRT, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGABRT);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    abort();
  }
  exit_now(2);
}

}  // namespace

void exit_now(int code) {
  ::syscall(SYS_exit_group, code);
  __builtin_unreachable();
}

bool dying_on_this_thread() {
  return g_dying_tid.load(std::memory_order_acquire) == static_cast<int>(gettid());
}

bool process_dying() { return g_dying_tid.load(std::memory_order_acquire) != 0; }

void die(Death* d) {
  int me = static_cast<int>(gettid());
  int prev = 0;
  if (!g_dying_tid.compare_exchange_strong(prev, me, std::memory_order_acq_rel)) {
    if (prev == me) {
      write_stderr("\nfatal error: the runtime failed while printing a traceback\n");
      exit_now(2);
    }
    // Another thread is dying and prints for both: wait for its exit.
    for (;;) sys::pause();
  }
  // Nothing may interrupt the dying thread now (a preemption or traceback
  // request); faults and the watchdog still reach it.
  sigset_t block;
  sigfillset(&block);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGALRM}) sigdelset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, nullptr);
  if (!d->in_signal_handler) std::fflush(stdout);
  for (const char* t : d->text) {
    if (t != nullptr) write_stderr(t);
  }
  // The seconds before the incident, before the tracebacks: printing them
  // can itself fault (a stack overflow's), and the dump must not be lost
  // with them. Async-signal-safe: a stack overflow's report comes from a
  // signal handler.
  if (const char* path = tracer_dump_fatal(false)) {
    write_stderr("flight recorder: the last events before this were written to ");
    write_stderr(path);
    write_stderr(" (convert it with gort-trace)\n");
  }
  TracebackSettings s = traceback_settings();
  if (s.level > 0 || d->runtime_error) systemstack(&print_tracebacks, d);
  finish(s.crash);
}

namespace {

// fatal and fatal_user: the calling goroutine (or thread) as it called.
[[noreturn, gnu::noinline]] void fatal_common(const char* preamble, const char* msg, bool runtime_error) {
  Death d;
  d.text[0] = preamble;
  d.text[1] = "fatal error: ";
  d.text[2] = msg;
  d.text[3] = "\n";
  d.runtime_error = runtime_error;
  d.all = true;
  GORT_CURRENT_REGS(&d.regs, &d.view);
  d.have_regs = true;
  d.first_pc = FirstPc::kReturnAddress;
  M* m = getm();
  G* g = m != nullptr ? m->curg : nullptr;
  if (g != nullptr && d.view.hi == reinterpret_cast<uintptr_t>(g->stack_hi)) {
    d.g = g;
  } else {
    d.runtime_stack = true;
  }
  die(&d);
}

}  // namespace

void fatal(const char* msg) { fatal_common(nullptr, msg, true); }

void fatal_user(const char* msg) { fatal_common(nullptr, msg, false); }

void fatal_after(const char* preamble, const char* msg) { fatal_common(preamble, msg, true); }

void fatal_deadlock_locked(const char* msg) {
  Death d;
  d.text[0] = "fatal error: ";
  d.text[1] = msg;
  d.text[2] = "\n";
  d.all = true;
  d.sched_locked = true;
  die(&d);
}

}  // namespace gort::internal
