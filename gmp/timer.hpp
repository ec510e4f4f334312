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
// timer earlier than that wake-up breaks the poll; with nobody in the
// poller, it wakes an idle P's M (docs/time-and-context.md).
//
// Timer states (under the owning P's timer lock):
//
//   | state     | meaning                   |
//   |-----------|---------------------------|
//   | kIdle     | not in any heap           |
//   | kQueued   | in p's heap at `index`    |
//
//   kIdle -> kQueued (add, reset), kQueued -> kIdle (stop, or a one-shot
//   expiring), kQueued -> kQueued (reset, a periodic timer re-armed).
//
// Moving a queued one-shot timer later (a connection's deadline pushed
// back on every request) takes no lock at all, as Go's timerModifiedLater
// takes no heap lock: reset stores the new time in `modwhen` with a CAS and
// leaves the timer where it is in the heap. When the earlier position comes
// due, the runner finds the later time, moves `when` up to it and sifts the
// timer down instead of firing it. `modwhen`:
//
//   | modwhen  | meaning                                          | set by                  |
//   |----------|--------------------------------------------------|-------------------------|
//   | 0        | `when` is the firing time                        | the locked paths, runner |
//   | t > 0    | fire at t, not before (t >= `when`)              | reset, lock-free        |
//   | kFiring  | the runner has claimed this arming; it will fire | runner                  |
//
// A push only moves modwhen later (its CAS compares with modwhen, or with
// `target` while modwhen is 0), and the runner moves `when` up to modwhen
// and leaves modwhen as it is, so t >= `when` holds however pushes, the
// runner and the locked paths interleave (gmp/timer.cpp, reset_later).
//
// The runner claims an arming with a CAS to kFiring (under the heap lock),
// clears `p` and only then turns kFiring back into 0; reset's CAS that
// finds kFiring, or succeeds and then finds `p` cleared, falls back to the
// locked path, which sees the timer idle. So a reset that returns true has
// always kept f from running for the old arming. That last step is a CAS
// too: once `p` is clear the owner may re-add the timer to another P's
// heap (whose lock the runner does not hold) and push it later lock-free,
// and a plain store of 0 would undo the push.
//
// As in Go, a runner settles the timer's state *before* calling f and never
// touches the timer after f returns: a one-shot timer is already idle while
// f runs (stop returns false, reset re-arms it), a periodic one already
// queued at its next tick. That is what lets f free or reuse the memory of
// the timer (sleep's timer lives on the sleeper's stack, and f readies the
// sleeper).
//
// Stale firings: a stop or reset that returns false may race with an f
// already claimed (or, for a periodic timer, a stop or reset that returns
// true with an f of an earlier tick still running). `seq` tells f apart:
// every add, stop and reset bumps it (except a reset that only moves a
// queued one-shot timer later, whose arming fires as the new one), and the
// runner reads it when it claims a firing (before a one-shot timer's `p`
// is cleared, under the heap lock) and passes that value to f. An owner
// that serialises f's effect with its stop and reset under a lock of its
// own sees timer_seq(t) != seq in f exactly when a stop or reset came after
// the claim (Go's timer.seq; stdlib/sync/time.cpp uses it for the channels).
//
// Lifetime: whoever owns a Timer keeps it alive while it is queued and while
// f may run. The stdlib types do this with the `ref` hook: the runner holds
// the heap's reference across f (one-shot) or takes an extra one for the
// call (periodic), so ref must count.
#pragma once

#include "gmp/room.hpp"

#include <atomic>
#include <cstdint>

#include "gmp/g.hpp"
#include "gmp/lock.hpp"

namespace gort::internal {

struct Bubble;
struct P;

struct Timer {
  enum State : uint8_t { kIdle, kQueued };

  // What a lock-free push reads comes first (32 bytes; Timer::State puts
  // the channel's before them): a server pushes back the deadline of every
  // connection, and its timers are too many to stay in the cache
  // (timer_rearm: 100,000 of them), so each line touched is a miss.
  //
  // A later firing time set without a lock (see the table above).
  std::atomic<int64_t> modwhen{0};
  // The firing time the locked paths (add, reset, stop) last set; written
  // under mu, read by a lock-free push while modwhen is 0.
  std::atomic<int64_t> target{0};
  // Owned by the timer lock of `p`.
  P* p = nullptr;
  // The synctest bubble whose heap and fake clock the timer runs on
  // (gmp/bubble.hpp; timer_bind_bubble), or null for real time. Set while
  // the timer is idle and never in use by another bubble.
  Bubble* bubble = nullptr;
  // Serialises timer_add/stop/reset on this timer (Go allows them
  // concurrently); taken before a heap lock, never by the runner.
  WordLock<LockRank::kTimer> mu;
  int64_t period = 0;  // 0: one-shot
  int64_t when = 0;  // nanotime
  // Bumped by every add, stop and reset, except reset's lock-free path
  // (see "Stale firings" above). Written under `mu`; the heap lock too
  // while the timer is queued.
  std::atomic<uint32_t> seq{0};
  int32_t index = -1;  // owned by the timer lock of `p`, as state is
  State state = kIdle;

  // `seq`: timer_seq(t) when this firing was claimed (see above).
  void (*f)(Timer* t, int64_t now, uint32_t seq) = nullptr;
  void* arg = nullptr;
  // Reference counting hook (may be null): +1 when the timer enters a heap
  // and around a periodic call of f, -1 when those end. Must count (calls
  // can overlap), and may free the timer on the last -1.
  void (*ref)(Timer* t, int delta) = nullptr;
};

// Adds t (kIdle) to the current P's heap, firing at `when`. From a plain
// thread, it goes to P 0's heap.
void timer_add(Timer* t, int64_t when, int64_t period);
// Like timer_add, for a timer nobody else can stop or reset (sleep's): skips
// t->mu, so nothing touches t once it is in the heap, where it may fire and
// be freed at once.
void timer_add_unshared(Timer* t, int64_t when);
// Parks the calling goroutine until nanotime `when` (Go's timeSleep), with
// `reason` in dumps; a `when` already past returns at once. From a plain
// thread (no goroutine), sleeps the thread.
void timer_sleep(int64_t when, WaitReason reason);
// Removes t from its heap. Returns true if it was queued (so f will not run
// for this arming), false if it was idle or has already expired (its f may
// be running now).
bool timer_stop(Timer* t);
// Stops t and re-adds it at `when`. Returns what timer_stop returned.
bool timer_reset(Timer* t, int64_t when, int64_t period);
// Moves a queued one-shot timer to `when`, no earlier than it fires now,
// without a lock (reset's lock-free path, and nothing else): true if done.
// False if t is idle, claimed by its runner or asked to move earlier: then
// the caller stops or resets it (a locked path). Only for one-shot timers
// (a channel Timer's, a descriptor's deadline): it does not look at period.
bool timer_push_later(Timer* t, int64_t when);
// True if t is queued (its f may still be running when this is false).
bool timer_active(Timer* t);
// t's stop/reset count (see "Stale firings" above).
inline uint32_t timer_seq(const Timer* t) { return t->seq.load(std::memory_order_acquire); }

// Scheduler side.
// Runs p's expired timers; returns p's next `when`, or -1 if none.
int64_t timers_run(P* p, int64_t now);
// Earliest `when` over all Ps, or -1.
int64_t timers_next();
// Earliest `when` of p: timers_first, inline in p.hpp.
// Timers in p's heap (schedtrace's timerslen). Takes p's timer lock: call
// it holding no other runtime lock.
int32_t timers_len(P* p);
#ifdef GORT_TESTING
// Adding a timer does not wake the poller or an M (a lost wake-up, for the
// backstop in sysmon to catch).
void timers_skip_poller_wake_for_test(bool skip);
// Called by the M that runs p's heap (its lock held) right after it
// claimed the one-shot timer t and made it idle, before it settles t's
// modwhen.
void timers_claimed_hook_for_test(void (*hook)(Timer* t, P* p));
#endif
// Creates p's heap (run() does it for every P).
void timers_init(P* p);
// Frees p's heap at shutdown (timers left in it are abandoned).
void timers_destroy(P* p);
// Moves every timer of `from` to `to` (set_procs removing `from`, the world
// stopped, Sched::lock held).
void timers_move(P* from, P* to);

}  // namespace gort::internal
