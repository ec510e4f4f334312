// gmp/proc.hpp — what the scheduler's own files share (Go keeps all of it in
// proc.go; gort splits it: schedule.cpp, park.cpp, idle.cpp, syscall.cpp).
// Nothing outside gmp/ needs it; the API other subsystems use is sched.hpp.
//
// The inline functions are the direct-switch hot path: park, ready, gosched
// and a goroutine's exit (park.cpp) and execute (schedule.cpp) all go through
// them. They were file-local to one translation unit; being inline here lets
// both files keep inlining them (the library is built without LTO, and with
// -fPIC GCC inlines no exported function into another).
#pragma once

#include "gmp/room.hpp"

#include <cstdint>
#include <mutex>

#include "gmp/clock_rand.hpp"
#include "gmp/sched.hpp"
#include "gmp/switch.hpp"
#include "gmp/timer.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {

// ---- Ps and Ms (idle.cpp) ----

// m takes the idle P p (from pidleget, or handed over in m->nextp).
void acquirep(M* m, P* p);
// m gives up its P, which it returns; the caller decides where it goes.
P* releasep(M* m);
// The idle P list. Sched::lock held.
void pidleput(P* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched.lock);
P* pidleget() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched.lock);
// Puts the M to sleep until somebody hands it a P (or shutdown).
void stopm(M* m);

// ---- run queues and the direct switch (schedule.cpp, park.cpp) ----

// Every this many schedules a P looks at the global queue before its own
// (Go's `schedtick%61 == 0` in findRunnable), so that two goroutines that
// keep readying each other through runnext cannot starve it.
inline constexpr uint32_t kGlobalRunqCheckTicks = 61;

// Puts g on p's local queue, at its tail or in runnext (RunqAt, runq.hpp);
// half of a full queue moves to the global queue, and then it returns
// false (newproc_start applies back-pressure on that). p is the caller's,
// held under acquirem (or on g0).
inline bool runqput(P* p, G* g, RunqAt at) {
  GQueue overflow;
  if (!p->runq.put(g, at, &overflow, sched.procs() == 1)) {
    MutexLock lock(sched.lock);
    int32_t n = overflow.size;
    sched.runq.push_back_all(&overflow);
    sched.runqsize.fetch_add(n, std::memory_order_release);
    return false;
  }
  return true;
}

// The same, or the global queue when the M has no P (sysmon took it while
// the thread slept in the kernel, see ensurep).
inline void runqput_or_global(P* p, G* g, RunqAt at) {
  if (p != nullptr) {
    runqput(p, g, at);
    return;
  }
  MutexLock lock(sched.lock);
  globrunqput_locked(g);
}

// g (runnable, just taken from a queue) becomes m's running goroutine. A G
// taken from runnext inherits the current time slice (Go's inheritTime):
// otherwise a pair handing off to each other through runnext would start a
// fresh slice at every hand-off, never be preempted, and starve the rest of
// the P's queue.
//
// The status changes last: a dying process's freeze that stops this M on
// the way sees either a runnable g, not yet current, or a current one
// (curg) about to be resumed (unwind.cpp), never a running g that no M
// has as its current goroutine.
inline void make_current(M* m, G* g, bool inherit = false) {
  P* p = m->p;
  if (!inherit) {
    p->schedtick++;
    p->schedtick_seen.store(p->schedtick, std::memory_order_relaxed);
    // A CPU-bound G: have the kernel signal this thread when its slice
    // ends, rather than wait for sysmon to notice (a system call, paid only
    // by Gs that use whole slices).
    if (g->ran_out) runtime.hooks.slice_started(p, p->schedtick);
  }
  g->ran_out = false;
  relaxed_store(g->m, m);
  g->preempt.store(false, std::memory_order_relaxed);
  relaxed_store(m->curg, g);
  set_status(g, GStatus::kRunnable, GStatus::kRunning);
}

// Picks the next G of this P for a goroutine that is switching away,
// without going through g0. Null: go to g0.
inline G* next_local(M* m) {
  P* p = m->p;
  // No P (sysmon took it, see ensurep): g0 waits for one. Stopping the
  // world: g0 stops the P.
  if (p == nullptr || sched.stopping.load(std::memory_order_relaxed) ||
      sched.gcwaiting.load(std::memory_order_relaxed)) {
    return nullptr;
  }
  if (p->schedtick % kGlobalRunqCheckTicks == 0 && sched.runqsize.load(std::memory_order_relaxed) > 0) {
    return nullptr;
  }
  // Timers due on this P are run by g0 (it is one load when there are none).
  int64_t first = timers_first(p);
  if (first != 0 && first <= nanotime()) return nullptr;
  bool inherit = false;
  G* g = p->runq.get(sched.procs() == 1, &inherit);
  if (g == nullptr) return nullptr;
  if (relaxed_load(g->lockedm) != nullptr) [[unlikely]] {
    m->handoff_g = g;  // g0 hands it to its own M (lockedm.cpp)
    return nullptr;
  }
  make_current(m, g, inherit);
  return g;
}

// Switches away from the running goroutine `self`; the next context does
// `after` with it. Returns when self is resumed. Called under acquirem,
// after ensurep (the switch carries that count to the next context, which
// drops it: M::locks is per thread, and every context resumes where it
// switched away holding exactly as many).
inline void gschedule(G* self, AfterSwitch after) {
  M* m = getm();
  G* next = next_local(m);
  m->after = after;
  if (next == nullptr) {
    relaxed_store<G*>(m->curg, nullptr);
    next = &m->g0;
  }
  switch_to(self, next);
}

}  // namespace gort::internal
