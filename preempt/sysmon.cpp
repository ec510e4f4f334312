// preempt/sysmon.cpp — the monitor thread (Go's sysmon).
//
// A thread with no P. Each round it:
//   - asks any G that has run longer than Config::time_slice on the same P
//     (the P's schedtick has not moved) to yield: sets g->preempt for the
//     cooperative checks and sends the asynchronous preemption signal;
//   - retakes the P of an M that has been inside gort::blocking() for at
//     least one round when that P has work or no P is idle or spinning, and
//     hands it to another M (Go's retake/handoffp);
//   - polls the network if nobody has for 10 ms;
//   - starts an M (or wakes the poller) when timers are overdue and every
//     P is idle, and sleeps no longer than until the next timer;
//   - releases dead Gs (with their stacks) the program stopped needing
//     (gfree_scavenge, newproc.cpp), all of the excess before a deep sleep;
//   - reports a goroutine that keeps its P far past its slice, or an M the
//     kernel keeps blocked outside blocking() (stall.cpp);
//   - keeps Sched::coarse_now, and prints the goroutines on SIGQUIT
//     (sigquit.cpp);
//   - prints Go's SCHED trace every GORT_DEBUG=schedtrace=N ms
//     (gmp/diag/schedtrace.cpp);
//   - moves the Ps to a changed default number once a second
//     (procs_update_check, gmp/procresize.cpp).
//
// Sleep: 20 µs between rounds while something happens (a P retaken, dead
// Gs released; a preemption or network work it injects does not count, as
// in Go), doubling after 50 quiet rounds up to 10 ms, as Go's sysmon. A run
// that its M's slice timer times (a G whose last run used its whole slice) is preempted by that
// timer exactly at the slice's end, and the signal handler retries an
// unsafe point itself: sysmon does not wake for it. It does wake by the
// slice's end of an untimed run (a G's first long run, which it sees at its
// paced round: that first slice may last up to one round longer, as in
// Go), for a retry of its own signal, and for retake_blocked's looks at a
// thread that may be asleep while work waits for its P. So CPU-bound
// goroutines cost about 100 wake-ups a second, not one per tenth of a
// slice (docs/preemption.md, "What sysmon costs"). When every P is idle
// and no M is in blocking(), it sleeps until a P starts running again, so
// an idle program costs nothing. With schedtrace on, as in Go, it never
// sleeps that deep nor past the next trace.
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "gmp/os/debugvars.hpp"
#include "gmp/diag/fatal.hpp"
#include "gmp/os/note.hpp"
#include "gmp/sched.hpp"
#include "gmp/diag/schedtrace.hpp"
#include "gmp/timer.hpp"
#include "preempt/preempt.hpp"
#include "gmp/os/sys.hpp"

namespace gort::internal {
namespace {

struct SysmonTick {
  uint32_t schedtick = 0;
  int64_t schedwhen = 0;
  // The schedule tick at which a look found goroutines queued behind a run
  // that outlived its slice; 0: none found.
  uint32_t queued_tick = 0;
  uint32_t syscalltick = 0;
  int64_t syscallwhen = 0;
  BlockedWatch blocked;
  StallWatch stall;
};

struct Sysmon {
  std::thread thread;
  std::atomic<bool> stop{false};
  // Sleeps here (Go's sysmonnote); woken early by stop and by sysmon_wake.
  Note wake;
  std::vector<SysmonTick> ticks;
};

Sysmon* g_sysmon = nullptr;

constexpr int64_t kMinDelayNs = 20 * 1000;
constexpr int64_t kMaxDelayNs = 10 * 1000 * 1000;
constexpr int64_t kPollIntervalNs = 10 * 1000 * 1000;
// Quiet rounds (nothing retaken or injected) at kMinDelayNs before the
// delay starts doubling (Go's `idle > 50`); past them, an all-idle sysmon
// may also sleep deep and release the excess dead Gs.
constexpr int kIdleRoundsBeforeBackoff = 50;
// A P in blocking() with nothing queued, while another M can find work, is
// left to its M for this long (Go's retake: 10 ms).
constexpr int64_t kSyscallRetakeNs = 10 * 1000 * 1000;

// deep: until a P runs again (acquirep wakes sysmon), or for ns if ns > 0
// (the next timer: Go's sysmon also bounds its deep sleep by it).
void sleep_ns(Sysmon* s, int64_t ns, bool deep) {
  sigquit_sleeping(true);
  struct Awake {
    ~Awake() { sigquit_sleeping(false); }
  } awake;
  if (deep) {
    sched.sysmon_wait.store(true, std::memory_order_seq_cst);
    // Re-check after publishing: a P may have started meanwhile (it saw
    // sysmon_wait false and did not wake us).
    if (sched.npidle.load(std::memory_order_seq_cst) == sched.procs() &&
        !s->stop.load(std::memory_order_acquire)) {
      if (ns > 0) {
        s->wake.sleep_for(ns);
      } else {
        s->wake.sleep();
      }
    }
    sched.sysmon_wait.store(false, std::memory_order_relaxed);
  } else if (!s->stop.load(std::memory_order_acquire)) {
    s->wake.sleep_for(ns);
  }
  // A wake-up that comes after this is kept for the next sleep (it returns
  // at once); one that came during the round is answered by the round.
  s->wake.clear();
}

void wake_sysmon() {
  Sysmon* s = g_sysmon;
  if (s == nullptr) return;
  // Goroutines may park before sysmon's first round: the clock they stamp
  // their waits with must not be as old as the deep sleep.
  sched.coarse_now.store(nanotime(), std::memory_order_relaxed);
  bool expected = true;
  if (!sched.sysmon_wait.compare_exchange_strong(expected, false)) return;
  s->wake.kick();
}

// Returns how many Ps it retook from blocking() (while stopping: preempted).
// *next_deadline: the earliest time a running G's slice ends (for the
// sleep), INT64_MAX if none.
int retake(Sysmon* s, int64_t now, int64_t* next_deadline) {
  int n = 0;
  int64_t slice = sched.time_slice_ns;
  *next_deadline = INT64_MAX;
  // Retakes go on while the world stops: a P that sysmon hands off is
  // stopped by pidleput or by its next M (procresize.cpp), and the stopper
  // cannot take the P of an M the kernel blocks outside blocking() (a
  // goroutine in std::thread::join) by itself.
  const size_t nprocs = static_cast<size_t>(sched.allp.size());
  for (size_t i = 0; i < nprocs; i++) {
    P* p = sched.allp[i];
    SysmonTick& pd = s->ticks[i];
    PStatus st = p->status.load(std::memory_order_acquire);
    if (st == PStatus::kRunning && sched.stopping.load(std::memory_order_relaxed)) {
      // Shutting down: every M must get back to its scheduler loop.
      preempt_one(p);
      n++;
      continue;
    }
    M* m = st == PStatus::kRunning ? relaxed_load(p->m) : nullptr;
    G* g = m != nullptr ? relaxed_load(m->curg) : nullptr;
    if (st == PStatus::kRunning && !sched.stopping.load(std::memory_order_relaxed) &&
        retake_blocked(p, &pd.blocked, now, next_deadline)) {
      // Its M sleeps in the kernel outside blocking(): handed off. It may
      // stay there: the stall report watches it.
      stall_watch_blocked(m, g, pd.blocked.since);
      pd.stall.since = 0;
      n++;
      continue;
    }
    if (st != PStatus::kRunning) pd.stall.since = 0;  // a new run when it runs again
    if (st == PStatus::kRunning) {
      stall_check_running(p, &pd.stall, now);
      uint32_t t = p->schedtick_seen.load(std::memory_order_relaxed);
      // The M's own slice timer ends this run on time and retries unsafe
      // points itself: sysmon neither wakes for its deadline nor signals
      // it, unless it outlives a second slice (a backstop).
      bool timed = slice_timer_times(m, t);
      if (pd.schedtick != t || pd.schedwhen == 0) {
        pd.schedtick = t;
        pd.schedwhen = now;
      } else if (pd.schedwhen + (timed ? 2 * slice : slice) <= now) {
        // Not counted in n (as in Go's retake): CPU-bound goroutines are
        // preempted every slice, and resetting the back-off each time kept
        // sysmon at its 20 µs tick for good — some 6,000-8,000 wake-ups a
        // second, a fifth of a CPU, each one taking a core from a
        // goroutine. The slice deadline still wakes it for the next look.
        //
        // A signal may land at an unsafe point: look again shortly. One
        // not yet delivered (its thread is not running, on a busy machine)
        // needs no resending: look again in a tenth of a slice. A
        // cooperative request (preemption off, or an M in blocking()) stays
        // set until the G's next gort call; asking again before another
        // slice would only cost wake-ups (every 100 µs, for as long as a
        // call-free loop runs).
        switch (preempt_one(p)) {
          case PreemptRequest::kSignalled:
            pd.schedwhen = now - slice + preempt_retry_ns();
            break;
          case PreemptRequest::kPending:
            pd.schedwhen = now - slice + std::max<int64_t>(slice / 10, kMinDelayNs * 5);
            break;
          case PreemptRequest::kNone:
            pd.schedwhen = now;
            break;
        }
        // What waits on this P's queue may wait for as long as this run
        // goes on (the preemption deferred: NoPreempt, an OS lock held,
        // preemption off), while a P idles and no M looks for work: a
        // goroutine requeued by a yield or a preemption wakes nobody (nor
        // does Go's, whose goroutines can always be preempted). An M woken
        // here steals it. Only when a goroutine runs (not g0 between two)
        // and two looks in a row found the queue full with no schedule in
        // between: a goroutine that yields puts itself on the queue for a
        // moment on its way back, and that is no work for another M (the
        // woken M would find nothing, and a new thread might be made).
        if (g != nullptr && !p->runq.empty()) {
          if (pd.queued_tick == t + 1) wakep();
          pd.queued_tick = t + 1;
        } else {
          pd.queued_tick = 0;
        }
      }
      if (!timed) *next_deadline = std::min(*next_deadline, pd.schedwhen + slice);
    } else if (st == PStatus::kBlocking) {
      // A goroutine that calls blocking() in a loop takes its P back in
      // exitsyscall's fast path after every call, so the syscall tick
      // changes between two looks and the P never looks retakable, while
      // what waits on its run queue never runs (Go's sysretake): once the
      // P has not scheduled for a slice, it is retaken whatever the tick.
      bool sysretake = false;
      uint32_t st_tick = p->schedtick_seen.load(std::memory_order_relaxed);
      if (pd.schedtick != st_tick || pd.schedwhen == 0) {
        pd.schedtick = st_tick;
        pd.schedwhen = now;
      } else if (pd.schedwhen + slice <= now) {
        sysretake = true;
      }
      uint32_t t = p->syscalltick.load(std::memory_order_relaxed);
      if (!sysretake && (pd.syscalltick != t || pd.syscallwhen == 0)) {
        pd.syscalltick = t;
        pd.syscallwhen = now;
        *next_deadline = std::min(*next_deadline, pd.schedwhen + slice);
        continue;
      }
      // Leave it if it has nothing to do, someone else can find work, and
      // the call has not gone on for long (saves needless wake-ups).
      if (p->runq.empty() &&
          sched.nmspinning.load() + sched.npidle.load() > 0 && pd.syscallwhen + kSyscallRetakeNs > now) {
        continue;
      }
      if (cas_status(p, PStatus::kBlocking, PStatus::kIdle)) {
        // p->m is already null (entersyscall cleared it).
        n++;
        handoffp(p);
      }
    }
  }
  return n;
}

void sysmon_loop(Sysmon* s) {
  int idle = 0;
  int64_t delay = kMinDelayNs;
  // schedtrace: when this run's first trace and the last one were printed
  // (0: none yet). Go's sysmon keeps the same two.
  int64_t trace_start = 0;
  int64_t lasttrace = 0;
  const int64_t trace_every = int64_t{debug.schedtrace} * 1000 * 1000;
  for (;;) {
    if (idle == 0) {
      delay = kMinDelayNs;
    } else if (idle > kIdleRoundsBeforeBackoff) {
      delay = std::min(delay * 2, kMaxDelayNs);
    }
    int64_t now = nanotime();
    sched.coarse_now.store(now, std::memory_order_relaxed);
    // A dying process stopped the Ms to print them: hands off.
    while (sched.frozen.load(std::memory_order_acquire)) sys::pause();
    int64_t deadline;
    int acted = retake(s, now, &deadline);
    bool stall_pending = stall_check_blocked(now);
    if (s->stop.load(std::memory_order_acquire)) return;
    if (trace_every > 0 && (trace_start == 0 || lasttrace + trace_every <= now)) {
      if (trace_start == 0) trace_start = now;
      lasttrace = now;
      schedtrace(trace_start, now, debug.scheddetail > 0);
    }
    // Follow the default number of Ps (CPUs, cgroup limit) once a second.
    if (!sched.stopping.load(std::memory_order_relaxed)) procs_update_check(now);
    int64_t next_sweep = runtime.hooks.netpoll_sweep(now);
    // Dead goroutines' stacks the program stopped needing (a round that
    // released some counts as busy, so the rest follow quickly).
    if (gfree_scavenge(now, Scavenge::kUnneeded) > 0) acted++;

    // Poll the network if nobody has for a while.
    if (runtime.hooks.netpoll_waiters() > 0) {
      int64_t last = sched.last_poll.load(std::memory_order_relaxed);
      if (last != 0 && last + kPollIntervalNs < now && !sched.netpoll_blocked.load()) {
        sched.last_poll.store(now, std::memory_order_relaxed);
        GQueue list;
        // What it takes from the poller is on no run queue until inject:
        // counted as an outside caller meanwhile, or the last M to go idle
        // would find no waiter, no queued G and no busy M, and report a
        // deadlock (Go's sysmon raises its idle-locked count around its
        // injectglist for the same reason). seq_cst: before the poll takes
        // any waiter off the count the deadlock check reads first.
        runtime.external_ops.fetch_add(1, std::memory_order_seq_cst);
        // Not activity for the back-off (as in Go, where only retake
        // resets it): a server whose P never runs dry is polled here every
        // 10 ms for good, and each reset kept sysmon at a 20 µs pace, some
        // 1,000 wake-ups a second instead of 100.
        if (runtime.hooks.netpoll(0, &list) && !list.empty()) inject(&list);
        runtime.external_ops.fetch_sub(1, std::memory_order_release);
      }
    }
    // Overdue timers while every P is idle: get an M, or wake the poller
    // if it waits past them (a missed wake-up; the poller publishes when
    // it will wake in poll_until).
    int64_t next_timer = timers_next();
    if (next_timer >= 0 && next_timer < now && sched.npidle.load() == sched.procs()) {
      if (!sched.netpoll_blocked.load()) {
        wakep();
      } else if (sched.poll_until.load() > next_timer) {
        runtime.hooks.netpoll_break();
      }
    }

    idle = acted > 0 ? 0 : idle + 1;
    if (acted > 0) delay = kMinDelayNs;
    // Wake by the first deadline of an untimed run (or a retake look), if
    // it comes before the paced round.
    int64_t sleep = delay;
    if (deadline != INT64_MAX) sleep = std::clamp<int64_t>(deadline - now, kMinDelayNs, delay);
    bool all_idle = sched.npidle.load(std::memory_order_acquire) == sched.procs() &&
                    sched.nblocking.load(std::memory_order_acquire) == 0 && !stall_pending;
    sigquit_poll();
    // Going to sleep until a P runs again: nothing will come back for the
    // dead Gs beyond the warm limit meanwhile.
    if (all_idle && idle > kIdleRoundsBeforeBackoff) gfree_scavenge(now, Scavenge::kAllExcess);
    if (trace_every > 0) {
      sleep = std::max(kMinDelayNs, std::min(sleep, lasttrace + trace_every - now));
    }
    bool deep = all_idle && idle > kIdleRoundsBeforeBackoff && trace_every == 0;
    if (deep) {
      // Not past the next timer (as read for the overdue check above): if
      // the M that should wait for it missed it, that check gets one (Go's
      // sysmon does the same). A timer already overdue and still unserved
      // is that check's to retry at the paced rate.
      sleep = next_timer < 0 ? 0 : std::max(next_timer - now, delay);
      // Goroutines wait on descriptors the libc hooks know: the poller's
      // look for numbers reused behind them comes round even when idle.
      if (next_sweep >= 0) sleep = sleep == 0 ? std::max(next_sweep - now, delay) : std::min(sleep, std::max(next_sweep - now, delay));
    }
    sleep_ns(s, sleep, deep);
    if (s->stop.load(std::memory_order_acquire)) return;
  }
}

void sysmon_start() {
  auto* s = new Sysmon;
  s->ticks.resize(kMaxProcs);  // set_procs may add Ps
  g_sysmon = s;
  preempt_init();
  retake_init();
  stall_init();
  runtime.nsystem_threads.fetch_add(1);
  sigquit_arm();
  s->thread = std::thread([s] {
    // SIGQUIT goes to this thread from its first round to its last.
    sigquit_start();
    // Named for top -H, gdb and the wake-up count in bench/preempt_bench.
    pthread_setname_np(pthread_self(), "gort-sysmon");
    // Short sleeps must be short: the default 50 µs timer slack would
    // stretch every 20 µs tick.
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    // sysmon never runs goroutine code: keep the preemption signal away.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, preempt_signal());
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    sysmon_loop(s);
    sigquit_stop();
  });
}

void sysmon_stop() {
  Sysmon* s = g_sysmon;
  if (s == nullptr) return;
  s->stop.store(true, std::memory_order_release);
  s->wake.kick();
  s->thread.join();
  delete_slice_timers();
  runtime.nsystem_threads.fetch_sub(1);
  g_sysmon = nullptr;
  delete s;
}

}  // namespace

void install_sysmon_hooks(SchedHooks* hooks) {
  hooks->sysmon_start = &sysmon_start;
  hooks->sysmon_stop = &sysmon_stop;
  hooks->sysmon_wake = &wake_sysmon;
}

}  // namespace gort::internal
