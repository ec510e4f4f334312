// stdlib/sema.cpp — Go's runtime semaphore and notify list, per object.
//
// Invariants (under lock_): nwait_ equals the number of waiters queued; a
// waiter is queued at most once; a dequeued waiter is readied exactly once.
// A waiter waits in a Sudog on its stack (gmp/sudog.hpp): it is valid until
// the waiter is woken and resumes, so the releaser reads and writes
// everything it needs *before* calling sudog_ready. Plain threads queue and
// sleep the same way as goroutines.
//
// No lost wake-up (Go's semacquire1/semrelease1): the waiter increments
// nwait_ and then re-reads count_ (try_acquire, under lock_); the releaser
// increments count_ and then reads nwait_ without the lock. That is a
// store-buffering (Dekker) pattern: with acquire/release alone both loads
// may see the old values, the waiter parks, and the releaser skips the
// wake-up. All four accesses are seq_cst, so at least one side sees the
// other's increment (on x86-64 the RMWs are locked instructions either way
// and the seq_cst loads are plain moves: it costs nothing there).
#include "gort/detail/sema.hpp"

#include "gmp/fatal.hpp"
#include "gmp/lock.hpp"
#include "gmp/sched.hpp"
#include "gmp/sudog.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {

bool Sema::try_acquire() {
  uint32_t v = count_.load(std::memory_order_seq_cst);  // seq_cst: see the top
  while (v > 0) {
    if (count_.compare_exchange_weak(v, v - 1, std::memory_order_acq_rel)) return true;
  }
  return false;
}

void Sema::acquire(QueueAt at, uint8_t reason) {
  if (try_acquire()) return;
  Note note;
  Sudog s{.g = getg(), .note = &note};
  for (;;) {
    lock_word(&lock_);
    nwait_.fetch_add(1, std::memory_order_seq_cst);  // before try_acquire's load
    if (try_acquire()) {
      nwait_.fetch_sub(1, std::memory_order_acq_rel);
      unlock_word(&lock_);
      return;
    }
    s.success = false;
    note.clear();
    if (at == QueueAt::kFront) q_.push_front(&s); else q_.push(&s);
    sudog_block(&s, &park_unlock_word, &lock_, static_cast<WaitReason>(reason));
    if (s.success || try_acquire()) return;
  }
}

void Sema::release(Handoff handoff) {
  count_.fetch_add(1, std::memory_order_seq_cst);
  if (nwait_.load(std::memory_order_seq_cst) == 0) return;  // no waiter can have missed it
  lock_word(&lock_);
  if (nwait_.load(std::memory_order_acquire) == 0) {
    unlock_word(&lock_);
    return;
  }
  Sudog* s = q_.dequeue();
  nwait_.fetch_sub(1, std::memory_order_acq_rel);
  unlock_word(&lock_);
  bool handed = handoff == Handoff::kYes && try_acquire();
  s->success = handed;
  bool thread = s->g == nullptr;
  sudog_ready(s);  // s may be gone after this
  // Let the new owner run now, on this P (a thread runs on its own).
  if (handed && !thread) gosched();
}

uint32_t NotifyList::add() { return wait_.fetch_add(1, std::memory_order_acq_rel); }

void NotifyList::wait(uint32_t ticket) {
  lock_word(&lock_);
  // Already notified? (tickets wrap: compare by signed difference)
  if (static_cast<int32_t>(ticket - notify_.load(std::memory_order_relaxed)) < 0) {
    unlock_word(&lock_);
    return;
  }
  Note note;
  Sudog s{.g = getg(), .note = &note, .ticket = ticket};
  q_.push(&s);
  sudog_block(&s, &park_unlock_word, &lock_, WaitReason::kSyncCond);
}

void NotifyList::notify_one() {
  if (wait_.load(std::memory_order_acquire) == notify_.load(std::memory_order_acquire)) return;
  lock_word(&lock_);
  uint32_t t = notify_.load(std::memory_order_relaxed);
  if (t == wait_.load(std::memory_order_acquire)) {
    unlock_word(&lock_);
    return;
  }
  notify_.store(t + 1, std::memory_order_release);
  // The waiter with ticket t may not have queued yet (it is between add and
  // wait); then it will see notify_ > t and not park.
  for (Sudog* s = q_.first; s != nullptr; s = s->next) {
    if (s->ticket == t) {
      q_.remove(s);
      unlock_word(&lock_);
      sudog_ready(s);
      return;
    }
  }
  unlock_word(&lock_);
}

void NotifyList::notify_all() {
  if (wait_.load(std::memory_order_acquire) == notify_.load(std::memory_order_acquire)) return;
  lock_word(&lock_);
  Sudog* last = q_.take_all();
  notify_.store(wait_.load(std::memory_order_acquire), std::memory_order_release);
  unlock_word(&lock_);
  WakeList wake;
  wake.push_detached(last);
  wake.wake_all();
}

}  // namespace gort::internal
