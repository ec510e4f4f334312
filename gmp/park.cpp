// gmp/park.cpp — park and ready: how a goroutine leaves its M and comes back
// (Go's gopark, goready, Gosched, gopreempt_m, goexit), and the after-switch
// work the next context does for it. Every blocking primitive (channels,
// sync, timers, the poller) comes down to these, so they are the hot path;
// the switch itself (gschedule, next_local) is inline in proc.hpp.
#include <sched.h>

#include <cerrno>
#include <cstdio>
#include <mutex>

#include "gmp/bubble.hpp"
#include "gmp/nbsyscall.hpp"
#include "gmp/os/debugvars.hpp"
#include "gmp/os/fatal.hpp"
#include "gmp/proc.hpp"
#include "gmp/profiling.hpp"
#include "gmp/sched.hpp"
#include "gmp/race/race.hpp"
#include "gmp/switch.hpp"
#include "gmp/timer.hpp"
#include "gmp/tls.hpp"
#include "gort/detail/race.hpp"

namespace gort::internal {

namespace {

// Runs the parking goroutine's callback (Go's waitunlockf) on the context
// that comes next. In the race detector's build TSan is told to look away
// meanwhile (the guards are empty elsewhere): what the callback touches and
// synchronises on is the parking goroutine's business, not the next one's
// (the library's callbacks are not instrumented anyway; a test's may be).
bool park_unlock(M* m, G* prev) {
  RaceIgnore accesses;
  RaceIgnoreSync sync;
  return m->park_unlock(prev, m->park_arg);
}

// prev (runnable) to the global queue from an M that may have no P. An M
// without one (back from blocking() with none free, or sysmon took it
// while the kernel blocked the thread) is about to sleep: if a P fell idle
// since its last look, this M takes it and runs prev itself rather than
// sleep and wake another M for it (Go's exitsyscall0, in the same critical
// section as the put). Otherwise another M is woken: nothing else would
// look at the queue while every P is idle.
void globrunqput_and_wake(M* m, G* prev) {
  P* idle = nullptr;
  {
    MutexLock lock(sched.lock);
    globrunqput_locked(prev);
    if (m->p == nullptr) idle = pidleget();
  }
  if (idle != nullptr) {
    acquirep(m, idle);  // g0's find_runnable takes prev from the queue
  } else {
    wakep();
  }
}

}  // namespace

void after_switch(G* prev) {
  M* m = getm();
  AfterSwitch a = m->after;
  m->after = AfterSwitch::kNone;
  switch (a) {
    case AfterSwitch::kNone:
      break;
    case AfterSwitch::kRunqTail:
      relaxed_store<M*>(prev->m, nullptr);
      if (m->p != nullptr) {
        runqput(m->p, prev, RunqAt::kTail);
        break;
      }
      [[fallthrough]];  // no P (see ensurep)
    case AfterSwitch::kGlobal:
      relaxed_store<M*>(prev->m, nullptr);
      globrunqput_and_wake(m, prev);
      break;
    case AfterSwitch::kPark: {
      relaxed_store<M*>(prev->m, nullptr);
      // Read before the unlock: from then on prev may run, exit and be
      // reborn elsewhere.
      Bubble* bubble = prev->bubble;
      if (!park_unlock(m, prev)) {
        set_status(prev, GStatus::kWaiting, GStatus::kRunnable);
        // Without a P (sysmon took it while the kernel blocked this
        // thread; park's ensurep found none free) this M is about to
        // sleep: prev must not wait in the global queue unseen.
        if (m->p != nullptr) {
          runqput(m->p, prev, RunqAt::kNext);
        } else {
          globrunqput_and_wake(m, prev);
        }
      }
      if (bubble != nullptr) [[unlikely]] bubble_dec_active(bubble);
      break;
    }
    case AfterSwitch::kExit:
      // prev's stack is no longer in use: it may be released with it. Its
      // TSan fiber goes now (Go's racegoend): the race detector's room is
      // for live goroutines.
      tsan_release_fiber(&prev->tsan_fiber);
      if (m->p != nullptr) {
        gfput(m->p, prev);
      } else {
        relaxed_store<M*>(prev->m, nullptr);
        MutexLock lock(sched.lock);
        gfput_global_locked(prev);
      }
      break;
  }
}

namespace {

[[noreturn]] void fatal_named(const char* what, const char* why) {
  char buf[320];
  std::snprintf(buf, sizeof buf, "%s%s", what, why);
  fatal_user(buf);
}

[[noreturn, gnu::cold, gnu::noinline]] void may_not_switch(M* m, const char* what) {
  if (m->oslocks.load(std::memory_order_relaxed) != 0) {
    fatal_named(what, " while holding an OS lock (a pthread or std:: mutex, rwlock or spinlock, a FILE lock, "
                      "or inside a function-local static's or call_once's initialisation)");
  }
  fatal_named(what, " inside gort::blocking (f must not call gort functions that may park)");
}

// The rule is m_may_switch's (gmp/m.hpp). Inline: park and gosched are the
// hot path.
inline void check_may_switch(M* m, const char* what) {
  if (!m_may_switch(m)) [[unlikely]] may_not_switch(m, what);
}

}  // namespace

namespace {

// park's body; park_profiled wraps it for the block profile.
__attribute__((always_inline)) inline void park_common(bool (*unlock)(G*, void*), void* arg, WaitReason reason) {
  M* m = getm();
  G* self = m ? m->curg : nullptr;
  if (self == nullptr) fatal("park: not on a goroutine");
  check_may_switch(m, "goroutine parked");
  acquirem(m);
  ensurep(m);
  m->park_unlock = unlock;
  m->park_arg = arg;
  // The bubble must not look idle between "marked waiting" and the unlock
  // function's verdict (after_switch ends the bracket).
  if (self->bubble != nullptr) [[unlikely]] bubble_inc_active(self->bubble);
  relaxed_store(self->waitreason, reason);
  relaxed_store(self->waitsince, sched.coarse_now.load(std::memory_order_relaxed));
  set_status(self, GStatus::kRunning, GStatus::kWaiting);
  gschedule(self, AfterSwitch::kPark);
  relaxed_store(self->waitreason, WaitReason::kNone);
  releasem(getm());
}

// A park while the block profile is on (gmp/profiling.hpp): the wait is
// timed from before the switch and handed to the profile once the
// goroutine runs again, on its own stack (stdlib/pprof/ samples it).
[[gnu::noinline, gnu::cold]] void park_profiled(bool (*unlock)(G*, void*), void* arg, WaitReason reason) {
  if (!wait_reason_blocks(reason)) {
    park_common(unlock, arg, reason);
    return;
  }
  const int64_t t0 = nanotime();
  park_common(unlock, arg, reason);
  if (auto* event = profiling.block_event.load(std::memory_order_acquire)) event(t0, reason);
}

}  // namespace

void park(bool (*unlock)(G*, void*), void* arg, WaitReason reason) {
  // The hot path's whole cost of the block profile: a load and a branch.
  if (profiling.block_rate.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    park_profiled(unlock, arg, reason);
    return;
  }
  park_common(unlock, arg, reason);
}

namespace {

// Puts g, runnable, in runnext of the caller's P (or at its tail: `at`).
// Inside blocking() the P may already belong to another M, and sysmon may
// have taken it from an M the kernel blocked (ensurep): then g goes to the
// global queue, as from a plain thread. Returns the P used, or null for the
// global queue.
P* runqput_next_here(G* g, RunqAt at = RunqAt::kNext) {
  M* m = getm();
  bool gated = m != nullptr && !m->in_blocking.load(std::memory_order_relaxed);
  if (gated) acquirem(m);
  P* p = gated ? ensurep(m) : nullptr;
  runqput_or_global(p, g, at);
  if (gated) releasem(m);
  return p;
}

}  // namespace

void ready(G* g) {
  set_status(g, GStatus::kWaiting, GStatus::kRunnable);
  if (Bubble* b = seeded_bubble(g)) [[unlikely]] {
    // The seed picks runnext or the tail (bubble_sched.cpp); one P: no
    // other M to wake.
    runqput_next_here(g, bubble_ready_next(b) ? RunqAt::kNext : RunqAt::kTail);
    return;
  }
  runqput_next_here(g);
  wakep();
}

void ready_after_write(G* g) {
  if (runqput_next_here(g) == nullptr) {
    wakep();
    return;
  }
  sched.readied_after_write.fetch_add(1, std::memory_order_relaxed);
}

void inject(GQueue* q) {
  if (q->empty()) return;
  int32_t n = q->size;
  {
    MutexLock lock(sched.lock);
    sched.runq.push_back_all(q);
    sched.runqsize.fetch_add(n, std::memory_order_release);
  }
  for (int32_t i = 0; i < n && sched.npidle.load(std::memory_order_acquire) > 0; i++) {
    startm(nullptr, Spinning::kNo);
  }
}

void gosched() {
  M* m = getm();
  G* self = m ? m->curg : nullptr;
  if (self == nullptr) {
    sched_yield();
    return;
  }
  check_may_switch(m, "goroutine yielded");
  acquirem(m);
  P* p = ensurep(m);
  AfterSwitch after;
  if (p == nullptr) {
    after = AfterSwitch::kGlobal;  // no P: g0 waits for one
  } else if (!p->runq.empty()) {
    after = AfterSwitch::kRunqTail;
  } else if (sched.runqsize.load(std::memory_order_relaxed) > 0) {
    after = AfterSwitch::kGlobal;
  } else if (timers_first(p) != 0 ||
             runtime.hooks.netpoll_waiters() > 0) {
    // Let g0 run timers and poll; it comes straight back if nothing is due.
    after = AfterSwitch::kRunqTail;
  } else if (sched.stopping.load(std::memory_order_relaxed) ||
             self->preempt.load(std::memory_order_relaxed)) {
    after = AfterSwitch::kRunqTail;  // let g0 see the stop / the request
  } else {
    releasem(m);
    return;  // nothing else could run
  }
  set_status(self, GStatus::kRunning, GStatus::kRunnable);
  gschedule(self, after);
  releasem(getm());
}

void preempt_park(G* g, PreemptKind kind) {
  M* m = getm();
  acquirem(m);
  g->preempt.store(false, std::memory_order_relaxed);
  g->ran_out = true;
  if (P* p = ensurep(m)) p->preempted = g;
  set_status(g, GStatus::kRunning, GStatus::kRunnable);
  if (kind != PreemptKind::kAsyncLocked) {
    gschedule(g, AfterSwitch::kGlobal);
    releasem(getm());
    return;
  }
  // Interrupted anywhere in C++ code: the goroutine may be in the middle of
  // this thread's state (a thread_local being built, its address in a
  // register), so it resumes on this thread and nothing else runs here
  // meanwhile. g0 decides where it waits (lockedg_next).
  relaxed_store(g->lockedm, m);
  relaxed_store(m->lockedg, g);
  m->after = AfterSwitch::kNone;
  relaxed_store<G*>(m->curg, nullptr);
  switch_to(g, &m->g0);
  if (getm() != m) fatal("preempt_park: a locked goroutine resumed on another M");
  relaxed_store<G*>(m->lockedg, nullptr);
  relaxed_store<M*>(g->lockedm, nullptr);
  sched.npreemptlocked.fetch_sub(1, std::memory_order_relaxed);
  releasem(m);
}

void preempt_check() {
  M* m = getm();
  // Inside blocking()'s f the thread is outside the scheduler: never yield.
  // Nor while the thread holds an OS lock or runs a one-time
  // initialisation: the goroutine must stay on it.
  if (m == nullptr || m->in_blocking.load(std::memory_order_relaxed)) return;
  G* g = m->curg;
  if (g != nullptr && g->preempt.load(std::memory_order_relaxed) && m->locks.load(std::memory_order_relaxed) == 0 &&
      m->oslocks.load(std::memory_order_relaxed) == 0) {
    if (seeded_bubble(g) != nullptr) [[unlikely]] {
      // Never cut a seeded bubble's goroutine at the machine's pace.
      g->preempt.store(false, std::memory_order_relaxed);
      return;
    }
    preempt_park(g);
  }
}

namespace {
// Not inlined into its caller, so that errno's address is looked up again
// on the thread the goroutine resumed on (__errno_location is a const
// function, which the compiler may reuse across a call).
__attribute__((noipa)) void store_errno(int e) { errno = e; }
}  // namespace

void nbsyscall_preempt() {
  int e = errno;
  preempt_check();
  store_errno(e);
}

void preempt_check_may_park(const char* what) {
  M* m = getm();
  if (m == nullptr || m->curg == nullptr) return;
  // The OS-lock rule only: inside gort::blocking, f may use calls that
  // do not park this time (a send with room readies a goroutine), as the
  // docs allow.
  if (debug.parkcheck != 0 && m->oslocks.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    may_not_switch(m, what);
  }
  if (Bubble* b = seeded_bubble(m->curg)) [[unlikely]] {
    if (!m->in_blocking.load(std::memory_order_relaxed) && m->oslocks.load(std::memory_order_relaxed) == 0) {
      bubble_maybe_yield(b);
    }
  }
  preempt_check();
}

void goroutine_main(G* self) {
  // The count the switch that started us carried (see gschedule).
  releasem(getm());
  self->started = true;
  race_acquire(self);  // the spawner's release (tsan_start_fiber)
  // No catch: an exception that escapes is reported by panic.cpp from the
  // stack where it was thrown, before anything is unwound.
  self->invoke(self->closure);
  if (self->locals != nullptr) gls_destroy(self);
  if (self->labels != nullptr) [[unlikely]] labels_drop(self);
  race_release(&race_run_end);  // before run() returns (run.cpp)
  self->nopreempt = 0;
  M* m = getm();
  if (m->oslocks.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    fatal_user("goroutine exited while holding an OS lock");
  }
  acquirem(m);  // carried by switch_exit to the next context
  P* p = ensurep(m);
  set_status(self, GStatus::kRunning, GStatus::kDead);
  if (p != nullptr) {
    p->exited.store(p->exited.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  } else {
    sched.detached_exited.fetch_add(1, std::memory_order_relaxed);
  }
  G* next = next_local(m);
  m->after = AfterSwitch::kExit;
  if (next == nullptr) {
    relaxed_store<G*>(m->curg, nullptr);
    next = &m->g0;
  }
  switch_exit(self, next);
}

}  // namespace gort::internal
