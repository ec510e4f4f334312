// preempt/sigquit.cpp — SIGQUIT (Ctrl-\) prints every goroutine and exits
// with status 2, as Go does (docs/debugging.md).
//
// The dump runs on sysmon, which runs no goroutine code: a handler on any
// other thread may have interrupted malloc or a lock holder, and the dump
// allocates (libdw) and takes locks. A SIGQUIT that lands elsewhere is
// passed on to sysmon (tgkill). On sysmon, the handler dumps right away if
// sysmon is asleep between rounds (then it holds nothing a dump needs);
// otherwise it leaves a note that sysmon reads at the end of its round.
// Between the runtime's start and sysmon's first instruction, the handler
// only leaves the note: sysmon reads it in its first round. Outside
// gort::run the signal keeps the disposition it had before (by default: a
// core dump).
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "gmp/diag/fatal.hpp"
#include "preempt/preempt.hpp"

namespace gort::internal {
namespace {

std::once_flag g_once;
struct sigaction g_old;
// sysmon's thread id; 0 outside gort::run; kStarting while sysmon's thread
// is being started.
constexpr int kStarting = -1;
std::atomic<int> g_sysmon_tid{0};
std::atomic<bool> g_asleep{false};
std::atomic<bool> g_pending{false};

[[noreturn]] void dump(bool in_handler) {
  Death d;
  d.text[0] = "SIGQUIT: quit\n";
  d.all = true;
  d.in_signal_handler = in_handler;
  die(&d);
}

void pass_on(int sig, siginfo_t* info, void* uc) {
  if ((g_old.sa_flags & SA_SIGINFO) != 0 && g_old.sa_sigaction != nullptr) {
    g_old.sa_sigaction(sig, info, uc);
  } else if (g_old.sa_handler != SIG_DFL && g_old.sa_handler != SIG_IGN) {
    g_old.sa_handler(sig);
  } else if (g_old.sa_handler == SIG_DFL) {
    // The default action, now: a core dump.
    ::signal(sig, SIG_DFL);
    raise(sig);
  }
}

void on_sigquit(int sig, siginfo_t* info, void* uc) {
  int sysmon = g_sysmon_tid.load(std::memory_order_acquire);
  if (sysmon == 0) {
    pass_on(sig, info, uc);
    return;
  }
  g_pending.store(true, std::memory_order_seq_cst);
  // Read again after the note (sigquit_start stores the id, seq_cst, before
  // sysmon's first look at the note): either sysmon will see the note, or
  // this sees its id and sends it the signal.
  sysmon = g_sysmon_tid.load(std::memory_order_seq_cst);
  if (sysmon == kStarting || sysmon == 0) return;
  if (static_cast<int>(gettid()) != sysmon) {
    syscall(SYS_tgkill, getpid(), sysmon, sig);
    return;
  }
  if (g_asleep.load(std::memory_order_acquire)) dump(true);
}

}  // namespace

void sigquit_arm() {
  std::call_once(g_once, [] {
    struct sigaction sa = {};
    sa.sa_sigaction = &on_sigquit;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    // Nothing interrupts the handler: on an M it passes the signal on, and
    // sysmon's freeze, which follows at once, then finds the goroutine
    // where SIGQUIT found it rather than inside this handler (a walk from
    // there goes through the signal frame, and stops if the goroutine was
    // caught somewhere without unwind tables, such as a context switch).
    sigfillset(&sa.sa_mask);
    sigaction(SIGQUIT, &sa, &g_old);
  });
  g_pending.store(false, std::memory_order_relaxed);
  g_sysmon_tid.store(kStarting, std::memory_order_release);
}

void sigquit_start() {
  // sysmon takes SIGQUIT even if the thread that called run blocks it.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGQUIT);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  g_sysmon_tid.store(static_cast<int>(gettid()), std::memory_order_seq_cst);
}

void sigquit_stop() { g_sysmon_tid.store(0, std::memory_order_release); }

void sigquit_sleeping(bool asleep) {
  g_asleep.store(asleep, std::memory_order_release);
  // A SIGQUIT that came just before the sleep began.
  if (asleep && g_pending.load(std::memory_order_seq_cst)) dump(false);
}

void sigquit_poll() {
  if (g_pending.load(std::memory_order_seq_cst)) dump(false);
}

}  // namespace gort::internal
