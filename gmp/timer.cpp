// gmp/timer.cpp — see timer.hpp.
#include "gmp/timer.hpp"

#include "gmp/trace.hpp"

#include <vector>

#include <gort/detail/race.hpp>

#include "gmp/bubble.hpp"
#include "gmp/os/fatal.hpp"
#include "gmp/lock.hpp"
#include "gmp/race/sanitizer.hpp"
#include "gmp/sched.hpp"
#include "gmp/os/sys.hpp"
#include "gmp/timer_heap.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {

// A P's heap. timer0 mirrors heap[0]->when (0 when empty) so the scheduler
// can tell "nothing due" with one relaxed load and no lock.
struct TimerHeap {
  WordLock<LockRank::kTimerHeap> lock;
  std::vector<Timer*> heap ABSL_GUARDED_BY(lock);
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

void update_timer0(TimerHeap* th) ABSL_EXCLUSIVE_LOCKS_REQUIRED(th->lock) {
  // seq_cst: Dekker with an M going idle (find_runnable: it puts its P on
  // pidle or publishes poll_until, then reads timer0) against wake_poller
  // (this store, then it reads poll_until and npidle). With release/acquire
  // both sides could read the old values (store-buffer reordering): the M
  // sleeps without a timeout and nobody wakes it.
  th->timer0.store(th->heap.empty() ? 0 : th->heap[0]->when, std::memory_order_seq_cst);
}

void heap_remove(TimerHeap* th, Timer* t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(th->lock) {
  heap_erase(th->heap, t);
  update_timer0(th);
}

void heap_push(TimerHeap* th, Timer* t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(th->lock) {
  heap_insert(th->heap, t);
  update_timer0(th);
}

P* current_p() {
  M* m = getm();
  if (m != nullptr && m->p != nullptr) return m->p;
  return sched.allp[0];
}

#ifdef GORT_TESTING
std::atomic<bool> skip_poller_wake_for_test{false};
std::atomic<void (*)(Timer*, P*)> claimed_hook_for_test{nullptr};
#endif

// The blocked poller (if any) must wake by `when`.
void wake_poller(int64_t when) {
#ifdef GORT_TESTING
  if (skip_poller_wake_for_test.load(std::memory_order_relaxed)) [[unlikely]] return;
#endif
  // seq_cst loads, after update_timer0's seq_cst store (see there).
  int64_t until = sched.poll_until.load(std::memory_order_seq_cst);
  if (until != 0) {
    if (when < until) runtime.hooks.netpoll_break();
  } else {
    // Nobody waits in the poller: get an idle P's M there (Go's
    // wakeNetPoller), or the timer waits until its own P schedules, which
    // a goroutine that keeps running delays by a slice (for ever in the
    // race build). wakep does nothing unless a P is idle and no M spins.
    wakep();
  }
}

}  // namespace

void timers_init(P* p) {
  auto* th = new TimerHeap;
  p->timers = th;
  p->timer0 = &th->timer0;
}

#ifdef GORT_TESTING
void timers_skip_poller_wake_for_test(bool skip) { skip_poller_wake_for_test.store(skip); }

void timers_claimed_hook_for_test(void (*hook)(Timer* t, P* p)) { claimed_hook_for_test.store(hook); }
#endif

// The run is over: no M runs timers any more.
void timers_destroy(P* p) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  auto* th = static_cast<TimerHeap*>(p->timers);
  p->timer0 = nullptr;
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

int32_t timers_len(P* p) {
  TimerHeap* th = heap_of(p);
  th->lock.lock();
  auto n = static_cast<int32_t>(th->heap.size());
  th->lock.unlock();
  return n;
}

namespace {

void add_locked(Timer* t, int64_t when, int64_t period) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu) {
  if (when <= 0) when = 1;  // 0 means "no timer" in timer0
  P* p = current_p();
  TimerHeap* th = heap_of(p);
  th->lock.lock();
  if (p->status.load(std::memory_order_seq_cst) == PStatus::kDead) [[unlikely]] {
    // The P set_procs removed (an M inside blocking() keeps its old P as
    // the hint current_p reads): P 0 takes its timers (timers_move).
    th->lock.unlock();
    p = sched.allp[0];
    th = heap_of(p);
    th->lock.lock();
  }
  if (t->state != Timer::kIdle) {
    th->lock.unlock();
    fatal("timer_add: timer already active");
  }
  t->when = when;
  t->target.store(when, std::memory_order_relaxed);
  t->period = period;
  t->modwhen.store(0, std::memory_order_relaxed);
  __atomic_store_n(&t->p, p, __ATOMIC_RELEASE);
  t->state = Timer::kQueued;
  t->seq.fetch_add(1, std::memory_order_release);
  if (t->ref) t->ref(t, +1);
  heap_push(th, t);
  bool first = th->heap[0] == t;
  th->lock.unlock();
  if (first) wake_poller(when);
}

bool stop_locked(Timer* t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu) {
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
    th->lock.lock();
    if (t->p != p) {  // moved or expired while we were locking
      th->lock.unlock();
      continue;
    }
    heap_remove(th, t);
    t->state = Timer::kIdle;
    t->seq.fetch_add(1, std::memory_order_release);
    t->modwhen.store(0, std::memory_order_relaxed);
    __atomic_store_n(&t->p, nullptr, __ATOMIC_RELEASE);
    th->lock.unlock();
    if (t->ref) t->ref(t, -1);
    return true;
  }
}

// The lock-free path of reset_locked and timer_push_later: a queued
// one-shot timer moved no earlier than its firing time so far (modwhen once
// pushed, else the time the locked paths set). It needs no lock: modwhen's
// CAS orders the pushes, which only ever move it later, and the runner
// moves the heap position (`when`) up to modwhen, never past it, so
// modwhen >= when holds whatever the interleaving. A push that read the
// `target` of an arming a locked reset has since replaced is ordered before
// that reset: the reset's store of 0 wipes it, or the runner finds it below
// the new `when` and fires at `when`. False if it does not apply (the
// caller takes the locked path).
bool reset_later(Timer* t, int64_t when) {
  if (__atomic_load_n(&t->p, __ATOMIC_SEQ_CST) == nullptr) return false;
  int64_t m = t->modwhen.load(std::memory_order_seq_cst);
  do {
    if (m == kFiring) return false;  // the runner has it: it expires
    if (when < (m != 0 ? m : t->target.load(std::memory_order_relaxed))) return false;  // earlier
  } while (!t->modwhen.compare_exchange_weak(m, when, std::memory_order_seq_cst));
  // The CAS may have hit the 0 the runner stores after firing, once `p`
  // was cleared: then the timer is idle and our `when` is moot (add_locked
  // clears it).
  return __atomic_load_n(&t->p, __ATOMIC_SEQ_CST) != nullptr;
}

bool reset_locked(Timer* t, int64_t when, int64_t period) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu) {
  if (when <= 0) when = 1;
  if (period == 0 && t->period == 0 && reset_later(t, when)) return true;
  for (;;) {
    P* p = __atomic_load_n(&t->p, __ATOMIC_ACQUIRE);
    if (p == nullptr) {
      add_locked(t, when, period);
      return false;
    }
    TimerHeap* th = heap_of(p);
    th->lock.lock();
    if (t->p != p) {
      th->lock.unlock();
      continue;
    }
    t->seq.fetch_add(1, std::memory_order_release);
    t->when = when;
    t->target.store(when, std::memory_order_relaxed);
    t->period = period;
    t->modwhen.store(0, std::memory_order_relaxed);
    heap_remove(th, t);
    heap_push(th, t);
    bool first = th->heap[0] == t;
    th->lock.unlock();
    if (first) wake_poller(when);
    return true;
  }
}

// The race detector's view of a timer (docs/race.md): what the goroutine
// that armed it did happens before its function runs. The function runs in
// a fiber of the M's own, not in whichever goroutine's was current when the
// M looked at its timers: a channel send or a spawn from it must carry the
// timer's history, not that goroutine's.
class TimerRaceContext {
 public:
  explicit TimerRaceContext(Timer* t) {
#ifdef GORT_TSAN_ON
    M* m = getm();
    if (m == nullptr) return;
    if (m->race.timer_fiber == nullptr) m->race.timer_fiber = tsan_create_orphan_fiber();
    prev_ = tsan_current_fiber();
    tsan_switch_to(m->race.timer_fiber);
    race_acquire(t);
#else
    (void)t;
#endif
  }
  ~TimerRaceContext() {
    if (prev_ != nullptr) tsan_switch_to(prev_);
  }
  TimerRaceContext(const TimerRaceContext&) = delete;
  TimerRaceContext& operator=(const TimerRaceContext&) = delete;

 private:
  void* prev_ = nullptr;
};

}  // namespace

void timer_add(Timer* t, int64_t when, int64_t period) {
  if (t->bubble != nullptr) [[unlikely]] return bubble_timer_add(t, when, period);
  race_release(t);
  t->mu.lock();
  add_locked(t, when, period);
  t->mu.unlock();
}

// Nobody else may touch t (see timer.hpp): t->mu has nothing to exclude.
void timer_add_unshared(Timer* t, int64_t when) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (t->bubble != nullptr) [[unlikely]] return bubble_timer_add(t, when, 0);
  race_release(t);
  add_locked(t, when, 0);
}

bool timer_stop(Timer* t) {
  if (t->bubble != nullptr) [[unlikely]] return bubble_timer_stop(t);
  t->mu.lock();
  bool r = stop_locked(t);
  t->mu.unlock();
  return r;
}

bool timer_reset(Timer* t, int64_t when, int64_t period) {
  if (t->bubble != nullptr) [[unlikely]] return bubble_timer_reset(t, when, period);
  race_release(t);
  t->mu.lock();
  bool r = reset_locked(t, when, period);
  t->mu.unlock();
  return r;
}

// Without t->mu (reset_later says why that is safe): a server pushes back
// a deadline per request, and the lock was two of its three atomic
// operations.
bool timer_push_later(Timer* t, int64_t when) {
  if (t->bubble != nullptr) [[unlikely]] return false;  // a bubble's are always locked
  race_release(t);
  return reset_later(t, when);
}

bool timer_active(Timer* t) {
  if (t->bubble != nullptr) [[unlikely]] return bubble_timer_active(t);
  return __atomic_load_n(&t->p, __ATOMIC_ACQUIRE) != nullptr;
}

int64_t timers_run(P* p, int64_t now) {
  auto* th = static_cast<TimerHeap*>(p->timers);
  if (th == nullptr) return -1;
  int64_t first = th->timer0.load(std::memory_order_acquire);
  if (first == 0) return -1;
  if (first > now) return first;
  // Goroutines the timers' functions ready were woken by a timer.
  TraceSourceScope source(TraceSource::kTimer);
  th->lock.lock();
  while (!th->heap.empty() && th->heap[0]->when <= now) {
    Timer* t = th->heap[0];
    if (t->period == 0) {
      // Claim this arming, unless a reset moved it later meanwhile.
      int64_t m = t->modwhen.load(std::memory_order_seq_cst);
      bool later = false;
      for (;;) {
        if (m > now) {
          // Moved up to the pushed time, which stays in modwhen: the next
          // push compares with it (reset_later), and a push meanwhile only
          // raised it further.
          t->when = m;
          later = true;
          break;
        }
        if (t->modwhen.compare_exchange_strong(m, kFiring, std::memory_order_seq_cst)) break;
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
    int64_t next_when = 0;
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
      next_when = next;
    } else {
      // One-shot: idle before f runs; the heap's reference is held for f.
      heap_remove(th, t);
      t->state = Timer::kIdle;
      __atomic_store_n(&t->p, nullptr, __ATOMIC_SEQ_CST);
      // From here on the owner may re-arm t on another P's heap (we hold
      // only this one's lock) and push it later lock-free: settle our
      // kFiring only if nobody has, or a plain store of 0 would wipe that
      // push and the arming would fire at its old time with a current seq
      // (a stale value through a timer channel). After p: see reset_later.
#ifdef GORT_TESTING
      if (auto* hook = claimed_hook_for_test.load(std::memory_order_relaxed)) [[unlikely]] hook(t, p);
#endif
      int64_t firing = kFiring;
      t->modwhen.compare_exchange_strong(firing, 0, std::memory_order_seq_cst);
    }
    th->lock.unlock();
    if (wake) wake_poller(next_when);
    {
      TimerRaceContext race(t);
      f(t, now, seq);  // from here on t may be freed, re-armed or running elsewhere
      if (ref) ref(t, -1);  // may free it: in the timer's context too
    }
    th->lock.lock();
  }
  int64_t next = th->heap.empty() ? -1 : th->heap[0]->when;
  th->lock.unlock();
  return next;
}

// Under Sched::lock (so it wakes nobody: the caller does, see
// start_the_world).
void timers_move(P* from, P* to) {
  TimerHeap* src = heap_of(from);
  TimerHeap* dst = heap_of(to);
  src->lock.lock();
  dst->lock.lock();
  for (Timer* t : src->heap) {
    // stop and reset find it through t->p and retry when it changed
    // while they waited for the lock.
    __atomic_store_n(&t->p, to, __ATOMIC_RELEASE);
    heap_push(dst, t);
  }
  src->heap.clear();
  update_timer0(src);
  dst->lock.unlock();
  src->lock.unlock();
}

int64_t timers_next() {
  int64_t best = -1;
  for (P* p : sched.allp) {
    int64_t w = timers_first(p);
    if (w != 0 && (best < 0 || w < best)) best = w;
  }
  return best;
}

void timer_sleep(int64_t when, WaitReason reason) {
  G* g = getg();
  if (g == nullptr) {
    for (int64_t now = nanotime(); now < when; now = nanotime()) {
      timespec ts{static_cast<time_t>((when - now) / 1000000000), static_cast<long>((when - now) % 1000000000)};
      sys::nanosleep(&ts, nullptr);
    }
    return;
  }
  // In a bubble, `when` is on its fake clock and the timer in its heap: a
  // durable wait (kSleep), which lets the clock jump to it.
  if (when <= clock_now()) return;
  Timer t;
  t.f = [](Timer* t, int64_t, uint32_t) { ready(static_cast<G*>(t->arg)); };
  t.arg = g;
  t.when = when;
  t.bubble = g->bubble;
  // Armed only once we are parked, so that it cannot fire first. The timer
  // lives on this stack: the runner never touches it after f (the header).
  park(
      [](G*, void* arg) {
        auto* t = static_cast<Timer*>(arg);
        timer_add_unshared(t, t->when);
        return true;
      },
      &t, reason);
}

}  // namespace gort::internal
