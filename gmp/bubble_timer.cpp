// gmp/bubble_timer.cpp — a synctest bubble's timers: Go's fake timers
// (timer.isFake). A timer bound to a bubble keeps `when` on the bubble's
// fake clock and lives in the bubble's own heap, which only the bubble's
// root runs (bubble_run.cpp), at the fake `now`; P heaps, sysmon and the
// poller never see it. The states and the `seq` rule are timer.hpp's; every
// change takes the heap's lock (no lock-free push later: a bubble's timers
// are for tests, where being exact matters more than a lock).
//
// Using a bubble's timer from outside it while the bubble lives is a
// panic with Go's text, checked by the public API before it takes any lock
// (timer_check_bubble). Once the bubble has ended its timers are idle for
// good: a stop returns false and a reset does nothing (a Ticker or Timer
// handle that outlives its test, used or destroyed later).
#include <string>

#include "gmp/bubble.hpp"
#include "gmp/os/fatal.hpp"
#include "gmp/timer.hpp"
#include "gmp/timer_heap.hpp"
#include "gmp/tls.hpp"
#include "gort/detail/race.hpp"
#include "gort/runtime.hpp"

namespace gort::internal {

namespace {

void update_timer0(Bubble* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->timers_lock) {
  b->timer0.store(b->timers.empty() ? 0 : b->timers[0]->when, std::memory_order_release);
}

void remove_locked(Bubble* b, Timer* t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->timers_lock) {
  heap_erase(b->timers, t);
  t->state = Timer::kIdle;
  update_timer0(b);
}

void push_locked(Bubble* b, Timer* t, int64_t when, int64_t period) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->timers_lock) {
  t->when = when;
  t->period = period;
  t->state = Timer::kQueued;
  heap_insert(b->timers, t);
  update_timer0(b);
}

}  // namespace

void timer_check_bubble(Timer* t, const char* op) {
  if (t->bubble == nullptr) return;
  G* g = getg();
  if (g != nullptr && g->bubble == t->bubble) return;
  if (t->bubble->ended.load(std::memory_order_acquire)) return;
  throw panic_error(std::string(op) + " of synctest timer from outside bubble");
}

void timer_bind_bubble(Timer* t) {
  Bubble* b = current_bubble();
  if (b == nullptr) return;
  bubble_ref(b);
  t->bubble = b;
}

void timer_unbind_bubble(Timer* t) {
  if (Bubble* b = t->bubble) {
    t->bubble = nullptr;
    bubble_unref(b);
  }
}

void bubble_timer_add(Timer* t, int64_t when, int64_t period) {
  Bubble* b = t->bubble;
  if (b->ended.load(std::memory_order_acquire)) return;  // its clock has stopped
  race_release(t);
  MutexLock lock(b->timers_lock);
  if (t->state != Timer::kIdle) fatal("timer_add: timer already active");
  t->seq.fetch_add(1, std::memory_order_release);
  if (t->ref) t->ref(t, +1);
  push_locked(b, t, when, period);
}

bool bubble_timer_stop(Timer* t) {
  Bubble* b = t->bubble;
  bool was = false;
  {
    MutexLock lock(b->timers_lock);
    t->seq.fetch_add(1, std::memory_order_release);
    if (t->state == Timer::kQueued) {
      remove_locked(b, t);
      was = true;
    }
  }
  if (was && t->ref) t->ref(t, -1);
  return was;
}

bool bubble_timer_reset(Timer* t, int64_t when, int64_t period) {
  Bubble* b = t->bubble;
  if (b->ended.load(std::memory_order_acquire)) return false;
  race_release(t);
  MutexLock lock(b->timers_lock);
  t->seq.fetch_add(1, std::memory_order_release);
  bool was = t->state == Timer::kQueued;
  if (was) {
    remove_locked(b, t);
  } else if (t->ref) {
    t->ref(t, +1);
  }
  push_locked(b, t, when, period);
  return was;
}

bool bubble_timer_active(Timer* t) {
  Bubble* b = t->bubble;
  MutexLock lock(b->timers_lock);
  return t->state == Timer::kQueued;
}

void bubble_timers_run(Bubble* b) {
  const int64_t now = b->now.load(std::memory_order_relaxed);
  b->timers_lock.lock();
  while (!b->timers.empty() && b->timers[0]->when <= now) {
    Timer* t = b->timers[0];
    auto* f = t->f;
    auto* ref = t->ref;
    uint32_t seq = t->seq.load(std::memory_order_relaxed);
    remove_locked(b, t);
    if (t->period > 0) {
      // The fake clock never skips ticks: it stops at each one.
      push_locked(b, t, t->when + t->period, t->period);
      if (ref) ref(t, +1);
    }
    b->timers_lock.unlock();
    race_acquire(t);
    f(t, now, seq);  // t may be freed, re-armed or stopped from here on
    if (ref) ref(t, -1);
    b->timers_lock.lock();
  }
  b->timers_lock.unlock();
}

void bubble_timers_drop(Bubble* b) {
  std::vector<Timer*> left;
  {
    MutexLock lock(b->timers_lock);
    left.swap(b->timers);
    for (Timer* t : left) {
      t->state = Timer::kIdle;
      t->index = -1;
      t->seq.fetch_add(1, std::memory_order_release);
    }
    update_timer0(b);
  }
  for (Timer* t : left) {
    if (t->ref) t->ref(t, -1);
  }
}

}  // namespace gort::internal
