// gmp/schedule.cpp — the scheduler: finding work and running it (Go's
// schedule, findRunnable, execute), and the global run queue.
//
// Where a G runs next (schedule):
//   - a goroutine that blocks or yields switches *directly* to the next G of
//     its P's local queue (one jump), and to its M's g0 only when the local
//     queue is empty or every 61st tick (so the global queue is not starved);
//     next_local and gschedule (proc.hpp) do that;
//   - a G locked to another M (an asynchronously preempted one, lockedm.cpp)
//     goes to its M: g0 hands it this P (startlockedm); an M whose own
//     locked G switched away runs only that G (lockedg_next);
//   - g0 runs find_runnable: this P's expired timers; every 61st tick one G
//     of the global queue; runnext and the local queue; the global queue (a
//     batch); a non-blocking netpoll; the other Ps' expired timers (by
//     every M, spinning or not); stealing half of a victim's queue (four
//     rounds over all Ps, each in a random order); then it gives up its P
//     and sleeps (or blocks in netpoll when it is the one M that may).
//     docs/runtime.md lists the same order with the reasons.
//
// Rejected: switching to g0 at every park (Go's mcall): it doubles the cost of
// a channel hand-off, and the after-switch protocol (switch.hpp) gives the
// same safety on a direct switch.
#include <algorithm>
#include <cstdint>
#include <mutex>

#include "gmp/clock_rand.hpp"
#include "gmp/os/fatal.hpp"
#include "gmp/proc.hpp"
#include "gmp/sched.hpp"
#include "gmp/switch.hpp"
#include "gmp/timer.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {

Sched sched;

void globrunqput_locked(G* g) {
  sched.runq.push_back(g);
  // seq_cst: Dekker with an M that stops spinning (find_runnable).
  sched.runqsize.fetch_add(1, std::memory_order_seq_cst);
}

namespace {

// Takes a batch from the global queue: returns one G and puts up to about a
// fair share of the rest into p's local queue. Sched::lock held.
G* globrunqget_locked(P* p, int32_t max) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched.lock) {
  int32_t size = sched.runqsize.load(std::memory_order_relaxed);
  if (size == 0) return nullptr;
  int32_t n = size / sched.procs() + 1;
  if (n > size) n = size;
  if (max > 0 && n > max) n = max;
  if (n > static_cast<int32_t>(kRunqSize / 2)) n = kRunqSize / 2;
  sched.runqsize.fetch_sub(n, std::memory_order_release);
  G* g = sched.runq.pop_front();
  for (int32_t i = 1; i < n; i++) {
    G* g2 = sched.runq.pop_front();
    GQueue overflow;
    if (!p->runq.put(g2, RunqAt::kTail, &overflow)) fatal("globrunqget: local queue overflow");
  }
  return g;
}

void reset_spinning(M* m) {
  relaxed_store(m->spinning, false);
  int32_t n = sched.nmspinning.fetch_sub(1, std::memory_order_acq_rel) - 1;
  if (n < 0) fatal("reset_spinning: negative nmspinning");
  // We found work: another M may find more (ramp up parallelism).
  wakep();
}

// Serves the expired timers of the other Ps (an idle P has no M to run
// them); what they ready lands in self's queue.
void run_other_timers(P* self) {
  int64_t now = 0;
  for (P* victim : sched.allp) {
    if (victim == self) continue;
    int64_t first = timers_first(victim);
    if (first == 0) continue;
    if (now == 0) now = nanotime();
    if (first <= now) timers_run(victim, now);
  }
}

G* steal_work(M* m) {
  P* self = m->p;
  // Go's stealTries: four rounds, only the last of which may take a
  // victim's runnext.
  constexpr int kStealTries = 4;
  for (int i = 0; i < kStealTries; i++) {
    bool steal_next = i == kStealTries - 1;
    // Visit every P once, in a random order (a new one each round), so
    // that no P is always the first victim nor always follows another.
    for (auto e = sched.steal_order.start(fastrand()); !e.done(); e.next()) {
      P* victim = sched.allp[e.position()];
      if (victim == self) continue;
      if (sched.stopping.load(std::memory_order_relaxed)) return nullptr;
      bool running = victim->status.load(std::memory_order_relaxed) == PStatus::kRunning;
      if (G* g = victim->runq.steal_into(&self->runq, steal_next, running)) return g;
    }
  }
  return nullptr;
}

// Polls the network without blocking and queues what it finds. Returns one
// G to run now, or null.
G* poll_nonblocking(M* m) {
  if (runtime.hooks.netpoll_waiters() == 0) return nullptr;
  if (sched.netpoll_blocked.load(std::memory_order_relaxed)) return nullptr;
  GQueue list;
  if (!runtime.hooks.netpoll(0, &list) || list.empty()) return nullptr;
  sched.last_poll.store(nanotime(), std::memory_order_relaxed);
  G* g = list.pop();
  while (G* g2 = list.pop()) runqput(m->p, g2, RunqAt::kTail);
  wakep();
  return g;
}

// Finds a runnable G for m (which holds a P), sleeping if there is none.
// Returns null only when the runtime is stopping.
G* find_runnable(M* m) {
top:
  if (sched.stopping.load(std::memory_order_acquire)) return nullptr;
  if (m->p == nullptr) {
    // Back from blocking() with no P free: wait for one.
    stopm(m);
    goto top;
  }
  if (sched.gcwaiting.load(std::memory_order_acquire)) [[unlikely]] {
    gcstopm(m);
    goto top;
  }
  P* p = m->p;
  int64_t now = 0;
  if (timers_first(p) != 0) {
    now = nanotime();
    timers_run(p, now);
  }
  if (p->schedtick % kGlobalRunqCheckTicks == 0 && sched.runqsize.load(std::memory_order_relaxed) > 0) {
    MutexLock lock(sched.lock);
    // The fairness check is for Gs that have waited, not for the one this P
    // has just preempted after a whole slice: taking that one back would
    // make what the P readied meanwhile (a G whose timer fired) wait a
    // second slice. Pass over it once; at the next check it is taken.
    if (sched.runq.front() != nullptr && sched.runq.front() == p->preempted && !p->runq.empty()) {
      p->preempted = nullptr;
    } else if (G* g = globrunqget_locked(p, 1)) {
      return g;
    }
  }
  if (G* g = p->runq.get(sched.procs() == 1)) return g;
  if (sched.runqsize.load(std::memory_order_relaxed) > 0) {
    MutexLock lock(sched.lock);
    if (G* g = globrunqget_locked(p, 0)) return g;
  }
  if (G* g = poll_nonblocking(m)) return g;

  // Expired timers of other Ps, whatever the spinning limit below: they are
  // work that is due, not work to look for. Behind that limit, an M whose
  // poll returned at once for a timer due on an idle P went round this loop
  // (P taken, P put back, netpoll(0)) until the M woken to spin got a CPU,
  // which the looping M could hold for the kernel's slice (3.8 ms seen in
  // the sleepers benchmark).
  run_other_timers(p);
  if (G* g = p->runq.get()) return g;

  // Steal, unless enough Ms are spinning already (half the busy Ps).
  int32_t busy = sched.procs() - sched.npidle.load(std::memory_order_acquire);
  if (m->spinning || 2 * sched.nmspinning.load(std::memory_order_acquire) < busy) {
    if (!m->spinning) {
      relaxed_store(m->spinning, true);
      sched.nmspinning.fetch_add(1, std::memory_order_acq_rel);
    }
    if (G* g = steal_work(m)) return g;
  }

  // Nothing. Give up the P and sleep; re-check what could have arrived.
  {
    UniqueLock lock(sched.lock);
    if (sched.stopping.load(std::memory_order_acquire)) return nullptr;
    if (sched.runqsize.load(std::memory_order_relaxed) > 0) {
      return globrunqget_locked(p, 0);
    }
    // Timers of this P must still be served while it is idle: the M that
    // blocks in netpoll (or sleeps with a timeout) waits for the earliest.
    if (!p->runq.empty()) {
      lock.unlock();
      goto top;
    }
    releasep(m);
    pidleput(p);
  }
  if (m->spinning) {
    relaxed_store(m->spinning, false);
    if (sched.nmspinning.fetch_sub(1, std::memory_order_seq_cst) - 1 < 0) {
      fatal("find_runnable: negative nmspinning");
    }
    // Work may have been queued between our last look and the decrement,
    // by someone who saw us spinning and therefore did not wake an M: on a
    // P's queue, or on the global queue by a plain thread or an M without
    // a P (Dekker with wakep: both sides store, then load, seq_cst).
    bool work = sched.runqsize.load(std::memory_order_seq_cst) > 0 ||
                std::any_of(sched.allp.begin(), sched.allp.end(), [](P* pp) { return !pp->runq.empty(); });
    if (work) {
      UniqueLock lock(sched.lock);
      P* np = pidleget();
      lock.unlock();
      if (np != nullptr) {
        acquirep(m, np);
        relaxed_store(m->spinning, true);
        sched.nmspinning.fetch_add(1, std::memory_order_acq_rel);
        goto top;
      }
    }
  }

  // Block in the poller until I/O, the next timer, or a wake-up, if we are
  // the one M allowed to and there is something to wait for.
  {
    int64_t when = timers_next();
    bool waiters = runtime.hooks.netpoll_waiters() > 0;
    if ((when >= 0 || waiters) && !sched.netpoll_blocked.exchange(true)) {
      int64_t timeout = -1;
      if (when >= 0) {
        timeout = when - nanotime();
        if (timeout < 0) timeout = 0;
      }
      // seq_cst: Dekker with wake_poller (update_timer0).
      sched.poll_until.store(when >= 0 ? when : INT64_MAX, std::memory_order_seq_cst);
      // A timer may have been added between timers_next and publishing
      // poll_until; its adder saw poll_until == 0 and did not break us.
      int64_t again = timers_next();
      if (again >= 0 && (when < 0 || again < when)) timeout = 0;
      GQueue list;
      runtime.hooks.netpoll(timeout, &list);
      sched.poll_until.store(0, std::memory_order_release);
      sched.netpoll_blocked.store(false);
      sched.last_poll.store(nanotime(), std::memory_order_relaxed);
      UniqueLock lock(sched.lock);
      P* np = pidleget();
      lock.unlock();
      if (np == nullptr) {
        if (!list.empty()) inject(&list);
      } else {
        acquirep(m, np);
        while (G* g = list.pop()) runqput(np, g, RunqAt::kTail);
        if (!np->runq.empty()) wakep();
        goto top;
      }
    } else if (when >= 0) {
      // Someone else blocks in the poller: make sure it wakes in time for
      // the earliest timer (it may have computed its timeout while that
      // timer was out of its heap, being re-armed).
      int64_t until = sched.poll_until.load(std::memory_order_acquire);
      if (until == 0 || until > when) runtime.hooks.netpoll_break();
    }
  }
  stopm(m);
  goto top;
}

void execute(M* m, G* g) {
  acquirem(m);  // carried to g (see gschedule)
  make_current(m, g);
  m->after = AfterSwitch::kNone;
  switch_to(&m->g0, g);
  releasem(getm());
}

}  // namespace

// The scheduler loop, on an M's g0, until the runtime stops.
void schedule_loop() {
  for (;;) {
    M* m = getm();
    if (m->lockedg != nullptr) [[unlikely]] {
      // Our asynchronously preempted G switched away: this M runs it and
      // nothing else (lockedm.cpp).
      G* g = lockedg_next(m);
      if (g == nullptr) return;
      execute(m, g);
      continue;
    }
    G* g = m->handoff_g;
    if (g != nullptr) {
      m->handoff_g = nullptr;
    } else {
      g = find_runnable(m);
      if (g == nullptr) return;
    }
    if (m->spinning) reset_spinning(m);
    if (relaxed_load(g->lockedm) != nullptr) [[unlikely]] {
      startlockedm(m, g);
      continue;
    }
    execute(m, g);
  }
}

}  // namespace gort::internal
