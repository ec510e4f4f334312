// gmp/timer.hpp — runtime timers: per-P 4-ary heaps run by the scheduler.
//
// A Timer calls `f(t, now)` on an M (in scheduler context, not in a
// goroutine) once `when` has passed, and again every `period` if non-zero.
// `f` must not park: it readies a goroutine, does a non-blocking channel
// send, or starts a goroutine. Timers are added to the heap of the P of
// the caller and stay there until they fire or are stopped.
//
// Who runs them: the P's own M whenever it schedules (cheap when the P has
// no timers: one load), Ms looking for work also run expired timers of
// other Ps (so timers of an idle P are served), and the one M that blocks
// in netpoll sleeps at most until the earliest timer of all Ps. Adding a
// timer earlier than that wake-up breaks the poll.
//
// Timer states (under the owning P's timer lock):
//
//   | state     | meaning                                   |
//   |-----------|-------------------------------------------|
//   | kIdle     | not in any heap                           |
//   | kQueued   | in p's heap at index `index`              |
//   | kRunning  | popped by a runner, f not finished yet    |
//
//   kIdle -> kQueued (add), kQueued -> kIdle (stop), kQueued -> kRunning
//   (expired), kRunning -> kQueued (periodic re-add, or reset while
//   running), kRunning -> kIdle (done).
//
// Lifetime: whoever owns a Timer must keep it alive while it is queued or
// running: stop() it (and, if stop reports it is running, wait for that)
// before freeing it. The stdlib types do this with reference counts.
#pragma once

#include <atomic>
#include <cstdint>

namespace gort::internal {

struct P;

struct Timer {
  enum State : uint8_t { kIdle, kQueued, kRunning };

  int64_t when = 0;    // nanotime
  int64_t period = 0;  // 0: one-shot
  void (*f)(Timer* t, int64_t now) = nullptr;
  void* arg = nullptr;
  // Reference counting hook: called with +1 when the timer enters a heap and
  // -1 when it leaves it for good (may be null).
  void (*ref)(Timer* t, int delta) = nullptr;

  // Serialises timer_add/stop/reset on this timer (Go allows them
  // concurrently); taken before a heap lock, never by the runner.
  std::atomic<uint32_t> mu{0};
  // Owned by the timer lock of `p`.
  P* p = nullptr;
  int32_t index = -1;
  State state = kIdle;
  // Bumped on every add/stop so a runner can tell a stale pop.
  uint32_t seq = 0;
};

// Adds t (kIdle) to the current P's heap, firing at `when`. From a plain
// thread, it goes to P 0's heap.
void timer_add(Timer* t, int64_t when, int64_t period);
// Removes t from its heap. Returns true if it was queued (so f will not run
// for this arming), false if it was idle or already running.
bool timer_stop(Timer* t);
// Stops t and re-adds it at `when`. Returns what timer_stop returned.
bool timer_reset(Timer* t, int64_t when, int64_t period);
// True if t's callback is running or t is queued.
bool timer_active(Timer* t);

// Scheduler side.
// Runs p's expired timers; returns p's next `when`, or -1 if none.
int64_t timers_run(P* p, int64_t now);
// Earliest `when` over all Ps, or -1.
int64_t timers_next();
// Earliest `when` of p (relaxed snapshot), or 0 if none.
int64_t timers_first(P* p);
// Creates p's heap (run() does it for every P).
void timers_init(P* p);
// Frees p's heap at shutdown (timers left in it are abandoned).
void timers_destroy(P* p);

}  // namespace gort::internal
