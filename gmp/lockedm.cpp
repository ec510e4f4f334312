// gmp/lockedm.cpp — goroutines that keep their thread (Go's lockedm and
// lockedg, stoplockedm, startlockedm): an asynchronously preempted goroutine
// resumes on the M it was interrupted on, and that M runs nothing else while
// it waits.
//
// Why: the preemption signal lands anywhere in C++ code, and C++ code keeps
// per-thread state where no check can see it. A thread_local whose
// initialiser the compiler inlined has its guard set (or not yet set) while
// the object is half built, and addresses it straight through the thread
// pointer; a loop may hold a thread_local's (or errno's) address in a
// register. If another goroutine ran on the thread meanwhile it could see
// the object half built or build it twice; if the goroutine resumed on
// another thread it would finish that thread's object, or write through a
// stale address. Keeping the thread makes the preemption invisible to such
// code: between the interruption and the resumption nothing else touches
// the thread's state, and the goroutine finds its own thread again.
// Cooperative preemption (at gort calls) does not lock: those points are in
// the runtime, where the goroutine holds no thread state (a gort call inside
// a thread_local's constructor may move it, as a park may; preemption.md).
//
// The M of a preempted goroutine G (M.lockedg == G, G.lockedm == M):
//
//   state                               event                        next
//   G running on M                      preempt_park(kAsyncLocked)   g0 decides (lockedg_next)
//   g0 decides, nothing else runnable   (its P's timers run first)   G runs again, no queue
//   g0 decides, other work waits        G -> global queue;           asleep (stoplocked)
//                                       P handed off (handoffp)
//   asleep                              another M takes G from a     G runs on M, with that
//                                       queue: startlockedm hands    M's P
//                                       it its P (nextp), wakes M,
//                                       and sleeps itself
//   asleep                              the runtime stops            M leaves its loop
//   G runs on M again                   preempt_park returns         lock cleared
//
// A G locked to another M may be taken from a queue by g0 (find_runnable)
// or on the direct switch path (next_local, which leaves it in
// M.handoff_g for g0); either way g0 calls startlockedm.
//
// Cost: a preemption that finds other work waiting puts the M to sleep and
// wakes another for the P, and the goroutine's next run wakes its M again:
// two thread hand-offs per time slice (tens of µs in a 10 ms slice). Ms
// reserved this way are at most kMaxPreemptLockedMs; past that, preemption
// moves the goroutine (it resumes on whichever M takes it from a queue, as
// after a cooperative preemption) and the signal handler declines where the
// goroutine holds a thread-local address (preempt/safe_points.cpp).
#include <cstdint>
#include <mutex>

#include "gmp/os/fatal.hpp"
#include "gmp/proc.hpp"
#include "gmp/sched.hpp"
#include "gmp/timer.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {

bool preempt_lock_reserve() {
  int32_t n = sched.npreemptlocked.load(std::memory_order_relaxed);
  while (n < kMaxPreemptLockedMs) {
    if (sched.npreemptlocked.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) return true;
  }
  return false;
}

G* lockedg_next(M* m) {
  if (sched.stopping.load(std::memory_order_acquire)) return nullptr;
  G* g = m->lockedg;
  relaxed_store<M*>(g->m, nullptr);
  P* p = m->p;
  if (p != nullptr && !sched.gcwaiting.load(std::memory_order_acquire)) {
    // Timers due on this P may ready goroutines that should run before G
    // gets a second slice.
    if (timers_first(p) != 0) timers_run(p, nanotime());
    if (p->runq.empty() && sched.runqsize.load(std::memory_order_acquire) == 0) return g;
  }
  // Others wait: G queues as any preempted goroutine does, and this M
  // waits until whoever takes G from the queue hands it a P. It counts as
  // asleep from the moment G is queued, so that startlockedm always finds
  // it so.
  //
  // With no P (sysmon handed it away while the thread was stuck in the
  // kernel, and none was idle when it came back), an idle P found under
  // the same lock as the put is started for G: a P that went idle before
  // the put had already looked at the global queue, so nobody else would
  // come for G (as after_switch's kGlobal put does).
  P* idle = nullptr;
  {
    MutexLock lock(sched.lock);
    if (sched.stopping.load(std::memory_order_acquire)) return nullptr;
    globrunqput_locked(g);
    m->stoplocked = true;
    sched.nmidlelocked++;
    if (p == nullptr) idle = pidleget();
  }
  if (p != nullptr) {
    if (m->spinning) fatal("lockedg_next: spinning M with a locked goroutine");
    handoffp(releasep(m));
  } else if (idle != nullptr) {
    handoffp(idle);  // work is queued: an M starts on it at once
  }
  {
    MutexLock lock(sched.lock);
    check_dead_locked();
  }
  m->park.sleep();
  m->park.clear();
  P* np;
  {
    MutexLock lock(sched.lock);
    np = m->nextp;
    m->nextp = nullptr;
  }
  if (np == nullptr) return nullptr;  // the runtime stops
  acquirep(m, np);
  return g;
}

void startlockedm(M* m, G* g) {
  M* lm = relaxed_load(g->lockedm);
  if (lm == m || lm->lockedg != g) fatal("startlockedm: inconsistent locked goroutine");
  {
    MutexLock lock(sched.lock);
    if (sched.stopping.load(std::memory_order_acquire)) return;
    // The waker counts lm awake (as Go's incidlelocked(-1) in
    // startlockedm): in the stopm below the deadlock detector must see it
    // running, since g is on no queue any more.
    if (!lm->stoplocked) fatal("startlockedm: locked M is not asleep");
    lm->stoplocked = false;
    sched.nmidlelocked--;
    lm->nextp = releasep(m);
    lm->park.wakeup();
  }
  stopm(m);
}

void wake_locked_ms_locked() {
  for (M* m : sched.allm) {
    if (!m->stoplocked) continue;
    m->stoplocked = false;
    sched.nmidlelocked--;
    m->nextp = nullptr;
    m->park.wakeup();
  }
}

}  // namespace gort::internal
