// gmp/proc.cpp — the scheduler: finding work, running it, parking and waking.
//
// Where a G runs next (schedule):
//   - a goroutine that blocks or yields switches *directly* to the next G of
//     its P's local queue (one jump), and to its M's g0 only when the local
//     queue is empty or every 61st tick (so the global queue is not starved);
//   - g0 runs find_runnable: runnext, local queue, global queue (a batch),
//     expired timers, a non-blocking netpoll, stealing half of a random
//     victim's queue (four rounds over all Ps), then gives up its P and
//     sleeps (or blocks in netpoll when it is the one M that may).
//
// Rejected: switching to g0 at every park (Go's mcall): it doubles the cost of
// a channel hand-off, and the after-switch protocol (switch.hpp) gives the
// same safety on a direct switch.
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gmp/cpu.hpp"
#include "gmp/fatal.hpp"
#include "gmp/sanitizer.hpp"
#include "gmp/sched.hpp"
#include "gmp/switch.hpp"
#include "gmp/timer.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {

Sched sched;

void check_dead_locked();
void newm(P* p, bool spinning);
void stopm(M* m);

namespace {

// ---- Ps and Ms (Sched::lock held where noted) ----

void acquirep(M* m, P* p) {
  if (p->m != nullptr || p->status.load(std::memory_order_relaxed) != PStatus::kIdle) {
    fatal("acquirep: P is not idle");
  }
  m->p = p;
  p->m = m;
  p->status.store(PStatus::kRunning, std::memory_order_release);
  if (sched.sysmon_wait.load(std::memory_order_relaxed) && sched.sysmon_wake != nullptr) {
    sched.sysmon_wake();
  }
}

P* releasep(M* m) {
  P* p = m->p;
  if (p == nullptr || p->m != m) fatal("releasep: invalid P state");
  p->m = nullptr;
  p->status.store(PStatus::kIdle, std::memory_order_release);
  m->p = nullptr;
  return p;
}

// Sched::lock held.
void pidleput(P* p) {
  if (!p->runq.empty()) fatal("pidleput: P has non-empty run queue");
  p->link = sched.pidle;
  sched.pidle = p;
  sched.npidle.fetch_add(1, std::memory_order_acq_rel);
}

// Sched::lock held.
P* pidleget() {
  P* p = sched.pidle;
  if (p != nullptr) {
    sched.pidle = p->link;
    p->link = nullptr;
    sched.npidle.fetch_sub(1, std::memory_order_acq_rel);
  }
  return p;
}

// Sched::lock held.
void mput(M* m) {
  m->link = sched.midle;
  sched.midle = m;
  sched.nmidle++;
}

// Sched::lock held.
M* mget() {
  M* m = sched.midle;
  if (m != nullptr) {
    sched.midle = m->link;
    m->link = nullptr;
    sched.nmidle--;
  }
  return m;
}

void runqput(P* p, G* g, bool next) {
  GQueue overflow;
  if (!p->runq.put(g, next, &overflow, sched.nprocs == 1)) {
    std::lock_guard<std::mutex> lock(sched.lock);
    int32_t n = overflow.size;
    sched.runq.push_back_all(&overflow);
    sched.runqsize.fetch_add(n, std::memory_order_release);
  }
}

// Takes a batch from the global queue: returns one G and puts up to about a
// fair share of the rest into p's local queue. Sched::lock held.
G* globrunqget_locked(P* p, int32_t max) {
  int32_t size = sched.runqsize.load(std::memory_order_relaxed);
  if (size == 0) return nullptr;
  int32_t n = size / sched.nprocs + 1;
  if (n > size) n = size;
  if (max > 0 && n > max) n = max;
  if (n > static_cast<int32_t>(kRunqSize / 2)) n = kRunqSize / 2;
  sched.runqsize.fetch_sub(n, std::memory_order_release);
  G* g = sched.runq.pop();
  for (int32_t i = 1; i < n; i++) {
    G* g2 = sched.runq.pop();
    GQueue overflow;
    if (!p->runq.put(g2, false, &overflow)) fatal("globrunqget: local queue overflow");
  }
  return g;
}

}  // namespace

void startm(P* p, bool spinning) {
  std::unique_lock<std::mutex> lock(sched.lock);
  if (p == nullptr) {
    p = pidleget();
    if (p == nullptr) {
      lock.unlock();
      if (spinning) sched.nmspinning.fetch_sub(1, std::memory_order_acq_rel);
      return;
    }
  }
  M* m = mget();
  if (m == nullptr) {
    lock.unlock();
    newm(p, spinning);
    return;
  }
  lock.unlock();
  m->spinning = spinning;
  m->nextp = p;
  m->park.wakeup();
}

// Puts the M to sleep until somebody hands it a P (or shutdown).
void stopm(M* m) {
  {
    std::lock_guard<std::mutex> lock(sched.lock);
    // begin_stop wakes the idle Ms under this lock after setting stopping,
    // so an M that gets here later must not go to sleep.
    if (sched.stopping.load(std::memory_order_acquire)) return;
    mput(m);
    check_dead_locked();
  }
  m->park.sleep();
  m->park.clear();
  if (m->nextp != nullptr) {
    acquirep(m, m->nextp);
    m->nextp = nullptr;
  }
}

namespace {

void reset_spinning(M* m) {
  m->spinning = false;
  int32_t n = sched.nmspinning.fetch_sub(1, std::memory_order_acq_rel) - 1;
  if (n < 0) fatal("reset_spinning: negative nmspinning");
  // We found work: another M may find more (ramp up parallelism).
  wakep();
}

G* steal_work(M* m) {
  P* self = m->p;
  // Serve the expired timers of other Ps first (an idle P has no M to run
  // them); what they ready lands in our queue.
  int64_t now = 0;
  for (P* victim : sched.allp) {
    if (victim == self) continue;
    int64_t first = timers_first(victim);
    if (first == 0) continue;
    if (now == 0) now = nanotime();
    if (first <= now) timers_run(victim, now);
  }
  if (G* g = self->runq.get()) return g;
  int32_t n = sched.nprocs;
  constexpr int kStealTries = 4;
  for (int i = 0; i < kStealTries; i++) {
    bool steal_next = i == kStealTries - 1;
    uint32_t start = fastrandn(static_cast<uint32_t>(n));
    // Visit all Ps in a random order: start at a random offset and step by
    // a stride coprime with n (n is small, 1 always works).
    for (int32_t k = 0; k < n; k++) {
      P* victim = sched.allp[(start + static_cast<uint32_t>(k)) % static_cast<uint32_t>(n)];
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
  if (sched.hooks.netpoll == nullptr || sched.hooks.netpoll_waiters == nullptr) return nullptr;
  if (sched.hooks.netpoll_waiters() == 0) return nullptr;
  if (sched.netpoll_blocked.load(std::memory_order_relaxed)) return nullptr;
  GQueue list;
  if (!sched.hooks.netpoll(0, &list) || list.empty()) return nullptr;
  sched.last_poll.store(nanotime(), std::memory_order_relaxed);
  G* g = list.pop();
  while (G* g2 = list.pop()) runqput(m->p, g2, false);
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
  P* p = m->p;
  int64_t now = 0;
  if (timers_first(p) != 0) {
    now = nanotime();
    timers_run(p, now);
  }
  if (p->schedtick % 61 == 0 && sched.runqsize.load(std::memory_order_relaxed) > 0) {
    std::lock_guard<std::mutex> lock(sched.lock);
    // The fairness check is for Gs that have waited, not for the one this P
    // has just preempted after a whole slice: taking that one back would
    // make what the P readied meanwhile (a G whose timer fired) wait a
    // second slice. Pass over it once; 61 ticks later it is taken.
    if (sched.runq.head != nullptr && sched.runq.head == p->preempted && !p->runq.empty()) {
      p->preempted = nullptr;
    } else if (G* g = globrunqget_locked(p, 1)) {
      return g;
    }
  }
  if (G* g = p->runq.get(sched.nprocs == 1)) return g;
  if (sched.runqsize.load(std::memory_order_relaxed) > 0) {
    std::lock_guard<std::mutex> lock(sched.lock);
    if (G* g = globrunqget_locked(p, 0)) return g;
  }
  if (G* g = poll_nonblocking(m)) return g;

  // Steal, unless enough Ms are spinning already (half the busy Ps).
  int32_t busy = sched.nprocs - sched.npidle.load(std::memory_order_acquire);
  if (m->spinning || 2 * sched.nmspinning.load(std::memory_order_acquire) < busy) {
    if (!m->spinning) {
      m->spinning = true;
      sched.nmspinning.fetch_add(1, std::memory_order_acq_rel);
    }
    if (G* g = steal_work(m)) return g;
  }

  // Nothing. Give up the P and sleep; re-check what could have arrived.
  {
    std::unique_lock<std::mutex> lock(sched.lock);
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
  bool was_spinning = m->spinning;
  if (m->spinning) {
    m->spinning = false;
    if (sched.nmspinning.fetch_sub(1, std::memory_order_acq_rel) - 1 < 0) {
      fatal("find_runnable: negative nmspinning");
    }
    // Work may have been queued between our last look and the decrement,
    // by someone who saw us spinning and therefore did not wake an M.
    for (P* pp : sched.allp) {
      if (!pp->runq.empty()) {
        std::unique_lock<std::mutex> lock(sched.lock);
        P* np = pidleget();
        lock.unlock();
        if (np != nullptr) {
          acquirep(m, np);
          m->spinning = true;
          sched.nmspinning.fetch_add(1, std::memory_order_acq_rel);
          goto top;
        }
        break;
      }
    }
  }
  (void)was_spinning;

  // Block in the poller until I/O, the next timer, or a wake-up, if we are
  // the one M allowed to and there is something to wait for.
  if (sched.hooks.netpoll != nullptr) {
    int64_t when = timers_next();
    bool waiters = sched.hooks.netpoll_waiters() > 0;
    if ((when >= 0 || waiters) && !sched.netpoll_blocked.exchange(true)) {
      int64_t timeout = -1;
      if (when >= 0) {
        timeout = when - nanotime();
        if (timeout < 0) timeout = 0;
      }
      sched.poll_until.store(when >= 0 ? when : INT64_MAX, std::memory_order_release);
      // A timer may have been added between timers_next and publishing
      // poll_until; its adder saw poll_until == 0 and did not break us.
      int64_t again = timers_next();
      if (again >= 0 && (when < 0 || again < when)) timeout = 0;
      GQueue list;
      sched.hooks.netpoll(timeout, &list);
      sched.poll_until.store(0, std::memory_order_release);
      sched.netpoll_blocked.store(false);
      sched.last_poll.store(nanotime(), std::memory_order_relaxed);
      std::unique_lock<std::mutex> lock(sched.lock);
      P* np = pidleget();
      lock.unlock();
      if (np == nullptr) {
        if (!list.empty()) inject(&list);
      } else {
        acquirep(m, np);
        while (G* g = list.pop()) runqput(np, g, false);
        if (!np->runq.empty()) wakep();
        goto top;
      }
    } else if (when >= 0) {
      // Someone else blocks in the poller: make sure it wakes in time for
      // the earliest timer (it may have computed its timeout while that
      // timer was out of its heap, being re-armed).
      int64_t until = sched.poll_until.load(std::memory_order_acquire);
      if (until == 0 || until > when) sched.hooks.netpoll_break();
    }
  }
  stopm(m);
  goto top;
}

// g (runnable, just taken from a queue) becomes m's running goroutine. A G
// taken from runnext inherits the current time slice (Go's inheritTime):
// otherwise a pair handing off to each other through runnext would start a
// fresh slice at every hand-off, never be preempted, and starve the rest of
// the P's queue.
void make_current(M* m, G* g, bool inherit = false) {
  set_status(g, GStatus::kRunnable, GStatus::kRunning);
  P* p = m->p;
  if (!inherit) {
    p->schedtick++;
    p->schedtick_seen.store(p->schedtick, std::memory_order_relaxed);
    // A CPU-bound G: have the kernel signal this thread when its slice
    // ends, rather than wait for sysmon to notice (a system call, paid only
    // by Gs that use whole slices).
    if (g->ran_out && sched.hooks.slice_started != nullptr) sched.hooks.slice_started(p, p->schedtick);
  }
  g->ran_out = false;
  g->m = m;
  g->preempt.store(false, std::memory_order_relaxed);
  m->curg = g;
}

// Picks the next G of this P for a goroutine that is switching away,
// without going through g0. Null: go to g0.
G* next_local(M* m) {
  P* p = m->p;
  if (sched.stopping.load(std::memory_order_relaxed)) return nullptr;
  if (p->schedtick % 61 == 0 && sched.runqsize.load(std::memory_order_relaxed) > 0) return nullptr;
  // Timers due on this P are run by g0 (it is one load when there are none).
  int64_t first = timers_first(p);
  if (first != 0 && first <= nanotime()) return nullptr;
  bool inherit = false;
  G* g = p->runq.get(sched.nprocs == 1, &inherit);
  if (g == nullptr) return nullptr;
  make_current(m, g, inherit);
  return g;
}

// Switches away from the running goroutine `self`; the next context does
// `after` with it. Returns when self is resumed.
void gschedule(G* self, AfterSwitch after) {
  M* m = getm();
  G* next = next_local(m);
  m->after = after;
  if (next == nullptr) {
    m->curg = nullptr;
    next = &m->g0;
  }
  switch_to(self, next);
}

void execute(M* m, G* g) {
  make_current(m, g);
  m->after = AfterSwitch::kNone;
  switch_to(&m->g0, g);
}

}  // namespace

void globrunqput_locked(G* g) {
  sched.runq.push_back(g);
  sched.runqsize.fetch_add(1, std::memory_order_release);
}

// Sched::lock held. Go's checkdead: called when an M goes idle. If no M is
// running a goroutine and nothing can ever make one runnable, report it.
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

void wakep() {
  if (sched.npidle.load(std::memory_order_acquire) == 0) return;
  if (sched.nmspinning.load(std::memory_order_acquire) != 0) return;
  int32_t zero = 0;
  if (!sched.nmspinning.compare_exchange_strong(zero, 1, std::memory_order_acq_rel)) return;
  startm(nullptr, true);
}

void after_switch(G* prev) {
  M* m = getm();
  AfterSwitch a = m->after;
  m->after = AfterSwitch::kNone;
  switch (a) {
    case AfterSwitch::kNone:
      break;
    case AfterSwitch::kRunqTail:
      prev->m = nullptr;
      runqput(m->p, prev, false);
      break;
    case AfterSwitch::kGlobal: {
      prev->m = nullptr;
      {
        std::lock_guard<std::mutex> lock(sched.lock);
        globrunqput_locked(prev);
      }
      wakep();
      break;
    }
    case AfterSwitch::kPark:
      prev->m = nullptr;
      if (!m->park_unlock(prev, m->park_arg)) {
        set_status(prev, GStatus::kWaiting, GStatus::kRunnable);
        runqput(m->p, prev, true);
      }
      break;
    case AfterSwitch::kExit:
      // prev's stack is no longer in use: it may be released with it.
      gfput(m->p, prev);
      break;
  }
}

void park(bool (*unlock)(G*, void*), void* arg, WaitReason reason) {
  M* m = getm();
  G* self = m ? m->curg : nullptr;
  if (self == nullptr) fatal("park: not on a goroutine");
  m->park_unlock = unlock;
  m->park_arg = arg;
  self->waitreason = reason;
  set_status(self, GStatus::kRunning, GStatus::kWaiting);
  gschedule(self, AfterSwitch::kPark);
  self->waitreason = WaitReason::kNone;
}

void ready(G* g) {
  set_status(g, GStatus::kWaiting, GStatus::kRunnable);
  M* m = getm();
  // Inside blocking() the P may already belong to another M: use the
  // global queue, as a plain thread does.
  if (m != nullptr && m->p != nullptr && !m->in_blocking.load(std::memory_order_relaxed)) {
    runqput(m->p, g, true);
  } else {
    std::lock_guard<std::mutex> lock(sched.lock);
    globrunqput_locked(g);
  }
  wakep();
}

void inject(GQueue* q) {
  if (q->empty()) return;
  int32_t n = q->size;
  {
    std::lock_guard<std::mutex> lock(sched.lock);
    sched.runq.push_back_all(q);
    sched.runqsize.fetch_add(n, std::memory_order_release);
  }
  for (int32_t i = 0; i < n && sched.npidle.load(std::memory_order_acquire) > 0; i++) {
    startm(nullptr, false);
  }
}

void gosched() {
  M* m = getm();
  G* self = m ? m->curg : nullptr;
  if (self == nullptr) {
    sched_yield();
    return;
  }
  P* p = m->p;
  AfterSwitch after;
  if (!p->runq.empty()) {
    after = AfterSwitch::kRunqTail;
  } else if (sched.runqsize.load(std::memory_order_relaxed) > 0) {
    after = AfterSwitch::kGlobal;
  } else if (timers_first(p) != 0 ||
             (sched.hooks.netpoll_waiters != nullptr && sched.hooks.netpoll_waiters() > 0)) {
    // Let g0 run timers and poll; it comes straight back if nothing is due.
    after = AfterSwitch::kRunqTail;
  } else if (sched.stopping.load(std::memory_order_relaxed) ||
             self->preempt.load(std::memory_order_relaxed)) {
    after = AfterSwitch::kRunqTail;  // let g0 see the stop / the request
  } else {
    return;  // nothing else could run
  }
  set_status(self, GStatus::kRunning, GStatus::kRunnable);
  gschedule(self, after);
}

void gls_destroy(G* g);

void preempt_park(G* g) {
  g->preempt.store(false, std::memory_order_relaxed);
  g->ran_out = true;
  getm()->p->preempted = g;
  set_status(g, GStatus::kRunning, GStatus::kRunnable);
  gschedule(g, AfterSwitch::kGlobal);
}

void preempt_check() {
  M* m = getm();
  // Inside blocking()'s f the thread is outside the scheduler: never yield.
  if (m == nullptr || m->in_blocking.load(std::memory_order_relaxed)) return;
  G* g = m->curg;
  if (g != nullptr && g->preempt.load(std::memory_order_relaxed) && m->locks.load(std::memory_order_relaxed) == 0) {
    preempt_park(g);
  }
}

void goroutine_main(G* self) {
  self->started = true;
  try {
    self->invoke(self->closure);
    if (self->locals != nullptr) gls_destroy(self);
  } catch (const std::exception& e) {
    fatal_panic(e.what(), self->id);
  } catch (...) {
    fatal_panic("(unknown exception)", self->id);
  }
  self->nopreempt = 0;
  M* m = getm();
  P* p = m->p;
  set_status(self, GStatus::kRunning, GStatus::kDead);
  p->exited.store(p->exited.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  G* next = next_local(m);
  m->after = AfterSwitch::kExit;
  if (next == nullptr) {
    m->curg = nullptr;
    next = &m->g0;
  }
  switch_exit(self, next);
}

// The scheduler loop, on an M's g0, until the runtime stops.
void schedule_loop() {
  for (;;) {
    M* m = getm();
    G* g = find_runnable(m);
    if (g == nullptr) return;
    if (m->spinning) reset_spinning(m);
    execute(m, g);
  }
}

namespace {

// Per-thread set-up of an M, on its own thread.
void minit(M* m) {
  setm(m);
  m->tid = pthread_self();
  m->os_tid.store(static_cast<int>(gettid()), std::memory_order_release);
  m_thread_state_init(m);
  m_signal_stack_init(m);
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &m->g0_stack_lo, &m->g0_stack_size);
    pthread_attr_destroy(&attr);
  }
}

void* mstart(void* arg) {
  M* m = static_cast<M*>(arg);
  // Every M gets the signal mask of the thread that called run, whoever
  // started it (sysmon blocks the preemption signal for itself).
  pthread_sigmask(SIG_SETMASK, &sched.m_sigmask, nullptr);
  minit(m);
  if (m->nextp != nullptr) {
    acquirep(m, m->nextp);
    m->nextp = nullptr;
  }
  schedule_loop();
  if (m->p != nullptr && m->p->m == m) {
    std::lock_guard<std::mutex> lock(sched.lock);
    P* p = releasep(m);
    p->link = nullptr;
  }
  m->p = nullptr;
  m_signal_stack_free(m);
  setm(nullptr);
  return nullptr;
}

}  // namespace

void newm(P* p, bool spinning) {
  if (sched.stopping.load(std::memory_order_acquire)) {
    // No new threads once stopping: run() may already have joined them.
    // p is simply dropped: nothing schedules any more, teardown frees it.
    if (spinning) sched.nmspinning.fetch_sub(1, std::memory_order_acq_rel);
    return;
  }
  M* m = new M;
  m->id = sched.mnext.fetch_add(1, std::memory_order_relaxed);
  m->g0.is_g0 = true;
  m->g0.status.store(GStatus::kRunning, std::memory_order_relaxed);
  m->nextp = p;
  m->spinning = spinning;
  m->fastrand_state = static_cast<uint64_t>(nanotime()) ^ (static_cast<uint64_t>(m->id) << 32) ^
                      0x9E3779B97F4A7C15ull;
  {
    std::lock_guard<std::mutex> lock(sched.lock);
    sched.allm.push_back(m);
    sched.mcount++;
  }
  m->thread = std::thread([m] { mstart(m); });
}

// Used by run.cpp for the thread that called gort::run.
void mstart_on_current_thread(M* m) {
  minit(m);
  schedule_loop();
  m_signal_stack_free(m);
}

void handoffp(P* p) {
  // Work to do: start an M for it right away.
  if (!p->runq.empty() || sched.runqsize.load(std::memory_order_acquire) > 0) {
    startm(p, false);
    return;
  }
  // Nobody spinning or idle: this P may be needed to find work soon.
  if (sched.nmspinning.load() + sched.npidle.load() == 0) {
    int32_t zero = 0;
    if (sched.nmspinning.compare_exchange_strong(zero, 1)) {
      startm(p, true);
      return;
    }
  }
  std::unique_lock<std::mutex> lock(sched.lock);
  if (sched.runqsize.load(std::memory_order_relaxed) > 0) {
    lock.unlock();
    startm(p, false);
    return;
  }
  // Its timers still need someone: the poller or an idle M will serve
  // them (find_runnable runs other Ps' timers and blocks until the next).
  int64_t first = timers_first(p);
  pidleput(p);
  lock.unlock();
  if (first != 0 && sched.npidle.load() == sched.nprocs) wakep();
}

int64_t nanotime() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

uint32_t fastrand() {
  M* m = getm();
  uint64_t* s;
  thread_local uint64_t fallback = 0x853c49e6748fea9bull ^ reinterpret_cast<uintptr_t>(&fallback);
  s = m ? &m->fastrand_state : &fallback;
  // xorshift64*
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return static_cast<uint32_t>((x * 0x2545F4914F6CDD1Dull) >> 32);
}

uint32_t fastrandn(uint32_t n) {
  return static_cast<uint32_t>((static_cast<uint64_t>(fastrand()) * n) >> 32);
}

}  // namespace gort::internal

namespace gort::internal {

void entersyscall() {
  M* m = getm();
  if (m == nullptr || m->curg == nullptr || m->p == nullptr) return;
  P* p = m->p;
  m->blocking_p = p;
  sched.nblocking.fetch_add(1, std::memory_order_relaxed);
  p->syscalltick.store(p->syscalltick.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  m->in_blocking.store(true, std::memory_order_seq_cst);
  // A slice timer still to fire would interrupt f's system calls (EINTR):
  // stop it, here on its own thread, before f runs. Whatever its deadline
  // says: a timer fires up to the timer slack late.
  if (m->slice_timer_deadline.load(std::memory_order_seq_cst) != 0 &&
      sched.hooks.slice_timer_stop != nullptr) {
    sched.hooks.slice_timer_stop(m);
  }
  // From here p belongs to nobody: sysmon may take it (kBlocking -> kIdle)
  // and hand it off, and any M leaving blocking() may take it
  // (kBlocking -> kRunning), ours or not (see exitsyscall). m->p stays set
  // only as a hint for which timer heap to use.
  p->m = nullptr;
  p->status.store(PStatus::kBlocking, std::memory_order_release);
}

void exitsyscall() {
  M* m = getm();
  if (m == nullptr || !m->in_blocking.load(std::memory_order_relaxed)) return;
  G* g = m->curg;
  P* oldp = m->blocking_p;
  m->blocking_p = nullptr;
  m->in_blocking.store(false, std::memory_order_release);
  sched.nblocking.fetch_sub(1, std::memory_order_relaxed);
  PStatus expected = PStatus::kBlocking;
  if (oldp->status.compare_exchange_strong(expected, PStatus::kRunning, std::memory_order_acq_rel)) {
    // Fast path: our P is free. It may have been retaken and handed off
    // meanwhile, and be in blocking() again under another M: taking it is
    // then a retake like sysmon's (as in Go), and that M finds it gone.
    oldp->m = m;
    m->p = oldp;
    return;
  }
  // sysmon handed our P to another M.
  m->p = nullptr;
  {
    std::unique_lock<std::mutex> lock(sched.lock);
    P* np = pidleget();
    lock.unlock();
    if (np != nullptr) {
      acquirep(m, np);
      return;
    }
  }
  // No P free: queue ourselves and let this M go idle.
  set_status(g, GStatus::kRunning, GStatus::kRunnable);
  m->after = AfterSwitch::kGlobal;
  m->curg = nullptr;
  switch_to(g, &m->g0);
}

}  // namespace gort::internal
