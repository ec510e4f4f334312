// gmp/timer.cpp — see timer.hpp.
#include "gmp/timer.hpp"

#include <vector>

#include "gmp/fatal.hpp"
#include "gmp/lock.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {

// A P's heap. timer0 mirrors heap[0]->when (0 when empty) so the scheduler
// can tell "nothing due" with one relaxed load and no lock.
struct TimerHeap {
  std::atomic<uint32_t> lock{0};
  std::vector<Timer*> heap;
  std::atomic<int64_t> timer0{0};
};

namespace {

constexpr int64_t kFiring = -1;

TimerHeap* heap_of(P* p) {
  if (p->timers == nullptr) {
    // Created by run() for every P before any goroutine runs.
    fatal("timer: P has no timer heap");
  }
  return static_cast<TimerHeap*>(p->timers);
}

// 4-ary min-heap on `when`.
void sift_up(std::vector<Timer*>& h, size_t i) {
  Timer* t = h[i];
  while (i > 0) {
    size_t parent = (i - 1) / 4;
    if (h[parent]->when <= t->when) break;
    h[i] = h[parent];
    h[i]->index = static_cast<int32_t>(i);
    i = parent;
  }
  h[i] = t;
  t->index = static_cast<int32_t>(i);
}

void sift_down(std::vector<Timer*>& h, size_t i) {
  size_t n = h.size();
  Timer* t = h[i];
  for (;;) {
    size_t c = 4 * i + 1;
    if (c >= n) break;
    size_t best = c;
    for (size_t k = c + 1; k < c + 4 && k < n; k++) {
      if (h[k]->when < h[best]->when) best = k;
    }
    if (h[best]->when >= t->when) break;
    h[i] = h[best];
    h[i]->index = static_cast<int32_t>(i);
    i = best;
  }
  h[i] = t;
  t->index = static_cast<int32_t>(i);
}

void update_timer0(TimerHeap* th) {
  th->timer0.store(th->heap.empty() ? 0 : th->heap[0]->when, std::memory_order_release);
}

// Lock held.
void heap_remove(TimerHeap* th, Timer* t) {
  auto& h = th->heap;
  size_t i = static_cast<size_t>(t->index);
  Timer* last = h.back();
  h.pop_back();
  if (i < h.size()) {
    h[i] = last;
    last->index = static_cast<int32_t>(i);
    sift_up(h, i);
    sift_down(h, static_cast<size_t>(last->index));
  }
  t->index = -1;
  update_timer0(th);
}

// Lock held.
void heap_push(TimerHeap* th, Timer* t) {
  th->heap.push_back(t);
  sift_up(th->heap, th->heap.size() - 1);
  update_timer0(th);
}

P* current_p() {
  M* m = getm();
  if (m != nullptr && m->p != nullptr) return m->p;
  return sched.allp[0];
}

// The blocked poller (if any) must wake by `when`.
void wake_poller(int64_t when) {
  int64_t until = sched.poll_until.load(std::memory_order_acquire);
  if (until != 0 && when < until && sched.hooks.netpoll_break != nullptr) {
    sched.hooks.netpoll_break();
  } else if (sched.npidle.load(std::memory_order_acquire) == sched.procs()) {
    // Every P idle and nobody polling: make sure some M waits for it.
    wakep();
  }
}

}  // namespace

void timers_init(P* p) { p->timers = new TimerHeap; }

void timers_destroy(P* p) {
  auto* th = static_cast<TimerHeap*>(p->timers);
  p->timers = nullptr;
  if (th == nullptr) return;
  // Timers still queued are abandoned with the run: drop the references
  // they hold (a Ticker nobody stopped must not leak its state).
  std::vector<Timer*> left;
  left.swap(th->heap);
  delete th;
  for (Timer* t : left) {
    t->state = Timer::kIdle;
    t->p = nullptr;
    t->index = -1;
    if (t->ref) t->ref(t, -1);
  }
}

int64_t timers_first(P* p) {
  auto* th = static_cast<TimerHeap*>(p->timers);
  return th ? th->timer0.load(std::memory_order_acquire) : 0;
}

int32_t timers_len(P* p) {
  TimerHeap* th = heap_of(p);
  lock_word(&th->lock);
  auto n = static_cast<int32_t>(th->heap.size());
  unlock_word(&th->lock);
  return n;
}

namespace {

void add_locked(Timer* t, int64_t when, int64_t period) {
  if (when <= 0) when = 1;  // 0 means "no timer" in timer0
  P* p = current_p();
  TimerHeap* th = heap_of(p);
  lock_word(&th->lock);
  if (p->status.load(std::memory_order_seq_cst) == PStatus::kDead) [[unlikely]] {
    // The P set_procs removed (an M inside blocking() keeps its old P as
    // the hint current_p reads): P 0 takes its timers (timers_move).
    unlock_word(&th->lock);
    p = sched.allp[0];
    th = heap_of(p);
    lock_word(&th->lock);
  }
  if (t->state != Timer::kIdle) {
    unlock_word(&th->lock);
    fatal("timer_add: timer already active");
  }
  t->when = when;
  t->target = when;
  t->period = period;
  t->modwhen.store(0, std::memory_order_relaxed);
  __atomic_store_n(&t->p, p, __ATOMIC_RELEASE);
  t->state = Timer::kQueued;
  t->seq.fetch_add(1, std::memory_order_release);
  if (t->ref) t->ref(t, +1);
  heap_push(th, t);
  bool first = th->heap[0] == t;
  unlock_word(&th->lock);
  if (first) wake_poller(when);
}

bool stop_locked(Timer* t) {
  for (;;) {
    P* p = __atomic_load_n(&t->p, __ATOMIC_ACQUIRE);
    if (p == nullptr) {
      // Idle: never armed, stopped, or a one-shot firing claimed. The
      // runner read seq before it cleared p (which this load saw), so its
      // f sees this bump.
      t->seq.fetch_add(1, std::memory_order_release);
      return false;
    }
    TimerHeap* th = heap_of(p);
    lock_word(&th->lock);
    if (t->p != p) {  // moved or expired while we were locking
      unlock_word(&th->lock);
      continue;
    }
    heap_remove(th, t);
    t->state = Timer::kIdle;
    t->seq.fetch_add(1, std::memory_order_release);
    t->modwhen.store(0, std::memory_order_relaxed);
    __atomic_store_n(&t->p, nullptr, __ATOMIC_RELEASE);
    unlock_word(&th->lock);
    if (t->ref) t->ref(t, -1);
    return true;
  }
}

// The lock-free path of reset_locked: a queued one-shot timer moved no
// earlier. False if it does not apply (the caller takes the locked path).
bool reset_later(Timer* t, int64_t when) {
  if (__atomic_load_n(&t->p, __ATOMIC_SEQ_CST) == nullptr) return false;
  int64_t m = t->modwhen.load(std::memory_order_seq_cst);
  do {
    if (m == kFiring) return false;  // the runner has it: it expires
  } while (!t->modwhen.compare_exchange_weak(m, when, std::memory_order_seq_cst));
  // The CAS may have hit the 0 the runner stores after firing, once `p`
  // was cleared: then the timer is idle and our `when` is moot (add_locked
  // clears it).
  if (__atomic_load_n(&t->p, __ATOMIC_SEQ_CST) == nullptr) return false;
  t->target = when;
  return true;
}

bool reset_locked(Timer* t, int64_t when, int64_t period) {
  if (when <= 0) when = 1;
  if (period == 0 && t->period == 0 && when >= t->target && reset_later(t, when)) return true;
  for (;;) {
    P* p = __atomic_load_n(&t->p, __ATOMIC_ACQUIRE);
    if (p == nullptr) {
      add_locked(t, when, period);
      return false;
    }
    TimerHeap* th = heap_of(p);
    lock_word(&th->lock);
    if (t->p != p) {
      unlock_word(&th->lock);
      continue;
    }
    t->seq.fetch_add(1, std::memory_order_release);
    t->when = when;
    t->target = when;
    t->period = period;
    t->modwhen.store(0, std::memory_order_relaxed);
    heap_remove(th, t);
    heap_push(th, t);
    bool first = th->heap[0] == t;
    unlock_word(&th->lock);
    if (first) wake_poller(when);
    return true;
  }
}

}  // namespace

void timer_add(Timer* t, int64_t when, int64_t period) {
  lock_word(&t->mu);
  add_locked(t, when, period);
  unlock_word(&t->mu);
}

void timer_add_unshared(Timer* t, int64_t when) { add_locked(t, when, 0); }

bool timer_stop(Timer* t) {
  lock_word(&t->mu);
  bool r = stop_locked(t);
  unlock_word(&t->mu);
  return r;
}

bool timer_reset(Timer* t, int64_t when, int64_t period) {
  lock_word(&t->mu);
  bool r = reset_locked(t, when, period);
  unlock_word(&t->mu);
  return r;
}

bool timer_active(Timer* t) { return __atomic_load_n(&t->p, __ATOMIC_ACQUIRE) != nullptr; }

int64_t timers_run(P* p, int64_t now) {
  auto* th = static_cast<TimerHeap*>(p->timers);
  if (th == nullptr) return -1;
  int64_t first = th->timer0.load(std::memory_order_acquire);
  if (first == 0) return -1;
  if (first > now) return first;
  lock_word(&th->lock);
  while (!th->heap.empty() && th->heap[0]->when <= now) {
    Timer* t = th->heap[0];
    if (t->period == 0) {
      // Claim this arming, unless a reset moved it later meanwhile.
      int64_t m = t->modwhen.load(std::memory_order_seq_cst);
      bool later = false;
      for (;;) {
        if (m > now) {
          t->when = m;
          if (t->modwhen.compare_exchange_strong(m, 0, std::memory_order_seq_cst)) {
            later = true;
            break;
          }
        } else if (t->modwhen.compare_exchange_strong(m, kFiring, std::memory_order_seq_cst)) {
          break;
        }
      }
      if (later) {
        sift_down(th->heap, 0);
        update_timer0(th);
        continue;
      }
    }
    auto* f = t->f;
    auto* ref = t->ref;
    bool wake = false;
    // The claim's seq, read before `p` is cleared below (see timer.hpp).
    uint32_t seq = t->seq.load(std::memory_order_relaxed);
    if (t->period > 0) {
      // Periodic: next tick (skipping the ticks we are late for), queued
      // before f runs; f runs under an extra reference of its own, since a
      // stop during f drops the heap's.
      int64_t next = t->when + t->period;
      if (next <= now) next += t->period * ((now - next) / t->period + 1);
      t->when = next;
      heap_remove(th, t);
      heap_push(th, t);
      if (ref) ref(t, +1);
      // A poller that computed its sleep from the old heap top may sleep
      // past the new one.
      wake = th->heap[0] == t;
    } else {
      // One-shot: idle before f runs; the heap's reference is held for f.
      heap_remove(th, t);
      t->state = Timer::kIdle;
      __atomic_store_n(&t->p, nullptr, __ATOMIC_SEQ_CST);
      t->modwhen.store(0, std::memory_order_seq_cst);  // after p: see reset_later
    }
    int64_t next_when = t->when;
    unlock_word(&th->lock);
    if (wake) wake_poller(next_when);
    f(t, now, seq);  // from here on t may be freed, re-armed or running elsewhere
    if (ref) ref(t, -1);
    lock_word(&th->lock);
  }
  int64_t next = th->heap.empty() ? -1 : th->heap[0]->when;
  unlock_word(&th->lock);
  return next;
}

// Under Sched::lock (so it wakes nobody: the caller does, see
// start_the_world).
void timers_move(P* from, P* to) {
  TimerHeap* src = heap_of(from);
  TimerHeap* dst = heap_of(to);
  lock_word(&src->lock);
  lock_word(&dst->lock);
  for (Timer* t : src->heap) {
    // stop and reset find it through t->p and retry when it changed
    // while they waited for the lock.
    __atomic_store_n(&t->p, to, __ATOMIC_RELEASE);
    heap_push(dst, t);
  }
  src->heap.clear();
  update_timer0(src);
  unlock_word(&dst->lock);
  unlock_word(&src->lock);
}

int64_t timers_next() {
  int64_t best = -1;
  for (P* p : sched.allp) {
    int64_t w = timers_first(p);
    if (w != 0 && (best < 0 || w < best)) best = w;
  }
  return best;
}

}  // namespace gort::internal
