// gmp/bubble.hpp — synctest bubbles: a set of goroutines with a fake clock
// that advances only when all of them are durably blocked (Go 1.25's
// testing/synctest; the user's side is <gort/synctest.hpp>, the guide
// docs/testing.md).
//
// Membership: synctest::test makes its calling goroutine the bubble's root
// and starts `main`; every goroutine a member creates is a member (G::bubble
// is inherited in newproc_alloc). A member leaves when it exits.
//
// Counting (Go's changegstatus): set_status tells the bubble when a member
// starts, exits, durably blocks or wakes from a durable block
// (wait_reason_durable in g.hpp). The bubble keeps
//
//   | count   | what                                                      |
//   |---------|-----------------------------------------------------------|
//   | total   | members alive (the root included)                         |
//   | running | members not durably blocked: running, runnable, or parked |
//   |         | for a reason that is not durable (I/O, a kernel wait)     |
//   | active  | activity that is not a member running: a park between    |
//   |         | "marked waiting" and "its unlock function confirmed it"   |
//   |         | (park, after_switch), and the wake-up of the root or the  |
//   |         | waiter until it runs                                      |
//
// When running and active both reach 0 every member is durably blocked, and
// whoever brought them there readies one goroutine (maybe_wake): the root
// if a timer is due, else the goroutine in synctest::wait if any, else the
// root, which advances the fake clock to the next timer or, with none,
// reports a deadlock. That readying happens after the bubble's lock is
// released, from contexts that hold no other lock (a park's after-switch
// work, a goroutine's exit, the root's loop).
//
// Time: `now` is the fake time in Unix ns, starting at 2000-01-01 00:00:00
// UTC. The bubble's timers (gmp/bubble_timer.cpp) live in its own heap, in
// fake ns, never in a P's: the real scheduler, sysmon and the poller never
// see them. Only the root moves `now`, under `mu`; clock readers load it.
//
// Lifetime: the root and every member hold a reference (refs); so does a
// timer bound to the bubble (timer_bind_bubble) until it is unbound. The
// last reference frees it. After the root's loop ends the bubble is `ended`:
// its timers were dropped, and using them from outside is no longer
// misuse.
//
// Lock order: mu (LockRank::kBubble) is a leaf, taken under the channel,
// semaphore and timer locks a member's status change happens under;
// nothing is taken under it. The timer heap's lock (kBubbleTimers) is
// never held together with mu: maybe_wake reads the heap's top from
// `timer0`.
#pragma once

#include "gmp/room.hpp"

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "gmp/g.hpp"
#include "gmp/lock.hpp"

namespace gort::internal {

struct Timer;

// Midnight UTC, 2000-01-01, in Unix ns: a bubble's fake clock starts there.
inline constexpr int64_t kBubbleEpoch = 946684800000000000;

struct Bubble {
  WordLock<LockRank::kBubble> mu;
  uint64_t id = 0;
  // Fake time (Unix ns). Written by the root under mu; read lock-free.
  std::atomic<int64_t> now{kBubbleEpoch};
  // CLOCK_MONOTONIC (nanotime) when the bubble started: the faked standard
  // monotonic clocks read mono_base + (now - kBubbleEpoch).
  int64_t mono_base = 0;
  bool fake_std_clocks = false;
  G* root = nullptr;
  G* main ABSL_GUARDED_BY(mu) = nullptr;
  G* waiter ABSL_GUARDED_BY(mu) = nullptr;
  bool waiting ABSL_GUARDED_BY(mu) = false;
  bool done ABSL_GUARDED_BY(mu) = false;
  std::atomic<bool> ended{false};
  int32_t total ABSL_GUARDED_BY(mu) = 1;
  int32_t running ABSL_GUARDED_BY(mu) = 1;
  int32_t active ABSL_GUARDED_BY(mu) = 0;
  std::atomic<int32_t> refs{1};

  // Seeded schedules (gmp/bubble_sched.cpp). Set before main starts and
  // then used only by the one P a seeded bubble runs on, one goroutine or
  // scheduler context at a time: no lock.
  bool seeded = false;
  uint64_t seed = 0;
  uint32_t yield_per_65536 = 0;  // chance of a yield at each call that may park
  uint64_t rng[2] = {0, 0};      // xoroshiro128+
  uint64_t schedule_hash = 0;    // FNV-1a over the ordinals run, in order
  uint64_t steps = 0;            // goroutine runs so far
  std::atomic<uint32_t> next_ordinal{0};

  // The timer heap (gmp/bubble_timer.cpp): a 4-ary heap on `when`.
  WordLock<LockRank::kBubbleTimers> timers_lock;
  std::vector<Timer*> timers ABSL_GUARDED_BY(timers_lock);
  // timers[0]->when, or 0 with none: read under mu without timers_lock.
  std::atomic<int64_t> timer0{0};
};

// The calling goroutine's bubble, or null (g0, plain threads, outside).
Bubble* current_bubble();
// Its id, or 0: what objects made in a bubble remember (channels, Mutex).
uint64_t current_bubble_id();

// The clock the runtime's timers run on, for the caller: the bubble's fake
// time (Unix ns) in a bubble, nanotime() outside. A timer bound to a
// bubble takes its `when` on this clock.
int64_t clock_now();

// Park's bracket (Go's park_m incActive/decActive): held from before a
// member is marked waiting until its park's unlock function has run.
void bubble_inc_active(Bubble* b);
void bubble_dec_active(Bubble* b);

// newproc_alloc: g, made by parent (a member), joins parent's bubble; the
// root's first spawn is the bubble's main. newproc_abort: g never started.
void bubble_adopt(G* g, G* parent);
void bubble_abandon(G* g);

void bubble_ref(Bubble* b);
void bubble_unref(Bubble* b);

// The driver (gmp/bubble_run.cpp). bubble_begin makes the calling
// goroutine the root of a new bubble; its next spawn is the bubble's main.
// Panics (panic_error) off a goroutine and inside a bubble (Go's text).
Bubble* bubble_begin(bool fake_std_clocks);
// Runs the bubble until every member but the root has exited, or all are
// durably blocked with no timer left, or main has exited and the rest are
// blocked: advances the fake clock and runs due timers on the root. Then
// drops the timers left and marks the bubble ended. Returns the deadlock
// reason (Go's text), or null when every member exited. The members left
// blocked stay so (the caller prints them: the core cannot).
const char* bubble_run(Bubble* b);
// The root leaves the bubble and drops its reference.
void bubble_end(Bubble* b);
// Go's synctest.Wait for the calling goroutine.
void bubble_wait();

// Seeded schedules (gmp/bubble_sched.cpp): every choice the scheduler
// makes for a seeded bubble's goroutines comes from its seed — runnext or
// the queue's tail at each wake-up, yields at calls that may park, select's
// case order — and nothing else can reorder them on its one P (no time
// slices, no asynchronous preemption). bubble_seed arms it (the caller has
// checked there is one P).
void bubble_seed(Bubble* b, uint64_t seed, uint32_t yield_per_65536);
// A uniform draw in [0, n) from b's seed.
uint32_t bubble_randn(Bubble* b, uint32_t n);
// The caller's seeded bubble, or null: where its choices come from.
inline Bubble* seeded_bubble(G* g) {
  return g != nullptr && g->bubble != nullptr && g->bubble->seeded ? g->bubble : nullptr;
}
// fastrandn(n), or the seeded bubble's draw for its goroutines (select).
uint32_t sched_randn(uint32_t n);
// A seeded bubble's member is about to run (set_status): it joins the
// schedule's hash.
void bubble_trace_run(Bubble* b, G* g);
// At a call that may park (preempt_check_may_park): yield, as the seed says.
void bubble_maybe_yield(Bubble* b);
// Where ready() queues a seeded bubble's goroutine.
bool bubble_ready_next(Bubble* b);

// Timers (gmp/bubble_timer.cpp). A Timer whose `bubble` is set lives in
// that bubble's heap; timer_add, stop, reset and active come here for it.
// Binding: the calling goroutine's bubble, if any (a reference is taken
// until timer_unbind_bubble).
void timer_bind_bubble(Timer* t);
void timer_unbind_bubble(Timer* t);
// Go's rule for the public API (time.cpp): panics `<op> of synctest timer
// from outside bubble` unless t is real, the caller belongs to t's bubble,
// or that bubble has ended. Before any lock is taken.
void timer_check_bubble(Timer* t, const char* op);
void bubble_timer_add(Timer* t, int64_t when, int64_t period);
bool bubble_timer_stop(Timer* t);
bool bubble_timer_reset(Timer* t, int64_t when, int64_t period);
bool bubble_timer_active(Timer* t);
// Runs b's timers due at b->now, on the root. Returns the next `when` or 0.
void bubble_timers_run(Bubble* b);
// Takes every timer out of b's heap, unfired (the bubble ended).
void bubble_timers_drop(Bubble* b);

}  // namespace gort::internal
