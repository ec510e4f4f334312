// gmp/park.cpp — park and ready: how a goroutine leaves its M and comes back
// (Go's gopark, goready, Gosched, gopreempt_m, goexit), and the after-switch
// work the next context does for it. Every blocking primitive (channels,
// sync, timers, the poller) comes down to these, so they are the hot path;
// the switch itself (gschedule, next_local) is inline in proc.hpp.
#include <sched.h>

#include <exception>
#include <mutex>

#include "gmp/fatal.hpp"
#include "gmp/proc.hpp"
#include "gmp/sched.hpp"
#include "gmp/switch.hpp"
#include "gmp/timer.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {

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

}  // namespace gort::internal
