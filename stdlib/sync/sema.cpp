// stdlib/sync/sema.cpp — Go's runtime semaphore and notify list, per object.
//
// Invariants (under lock_): count_ is the units nobody has taken; nwait_
// equals the number of waiters queued; a waiter is queued at most once; a
// dequeued waiter is readied exactly once, with its unit. A waiter waits in
// a Sudog on its stack (gmp/sudog.hpp): it is valid until the waiter is
// woken and resumes, so the releaser reads and writes everything it needs
// *before* calling sudog_ready. Plain threads queue and sleep the same way
// as goroutines.
//
// Everything is under lock_, and a release hands its unit straight to the
// oldest waiter, or with nobody queued adds it to count_, before it
// unlocks: unlock() is a release's last touch of the Sema (gmp/
// lifetime.hpp). A Sema lives inside the object that uses it, and the
// object's users may destroy it as soon as they have the unit: the waiter
// of a WaitGroup returns from wait and its frame is gone while the last
// done() is still in release. Go's semaphore could count lock-free, then
// look for waiters, because its garbage collector keeps the semaphore
// alive; a lock-free count here let an acquirer take the unit and destroy
// the object before the releaser looked.
#include "gort/detail/sema.hpp"

#include "gmp/bubble.hpp"
#include "gmp/diag/fatal.hpp"
#include "gmp/lifetime.hpp"
#include "gmp/lock.hpp"
#include "gmp/sched.hpp"
#include "gmp/sudog.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {

uint32_t current_bubble_tag() { return static_cast<uint32_t>(current_bubble_id()); }

namespace {

// A wait on a Sema of the caller's own bubble is durable (gort's rule: Go
// counts only WaitGroups; golang/go#77687 asks for mutexes).
WaitReason durable_reason(uint8_t reason) {
  switch (static_cast<WaitReason>(reason)) {
    case WaitReason::kSyncMutex: return WaitReason::kSynctestMutex;
    case WaitReason::kSyncRWMutex: return WaitReason::kSynctestRWMutex;
    case WaitReason::kSyncWaitGroup: return WaitReason::kSynctestWaitGroup;
    default: return WaitReason::kSynctestSemacquire;
  }
}

}  // namespace

bool Sema::try_acquire() {
  lock_.lock();
  bool got = count_ > 0;
  if (got) count_--;
  lock_.unlock();
  return got;
}

void Sema::acquire(QueueAt at, uint8_t reason) {
  Note note;
  Sudog s{.g = getg(), .note = &note};
  lock_.lock();
  if (count_ > 0) {
    count_--;
    lock_.unlock();
    return;
  }
  if (!may_wait(s)) [[unlikely]] {
    lock_.unlock();
    thread_wait_outside_run(static_cast<WaitReason>(reason));
  }
  nwait_.store(nwait_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (at == QueueAt::kFront) q_.push_front(&s); else q_.push(&s);
  WaitReason why = static_cast<WaitReason>(reason);
  if (bubble_ != 0 && bubble_ == current_bubble_tag()) [[unlikely]] why = durable_reason(reason);
  sudog_block(&s, &park_unlock<decltype(lock_)>, &lock_, why);
  released_by_park(lock_);
  // Woken only by release, which handed over its unit.
}

void Sema::release(Handoff handoff) {
  lock_.lock();
  Sudog* s = q_.dequeue();
  if (s == nullptr) {
    count_++;
    lifetime_probe();  // nobody sees the unit before the unlock
    lock_.unlock();
    return;
  }
  nwait_.store(nwait_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  s->success = true;
  bool thread = s->g == nullptr;
  lock_.unlock();
  sudog_ready(s);  // s may be gone after this
  // Go's hand-off: let the new owner run now, on this P (a thread runs on
  // its own).
  if (handoff == Handoff::kYes && !thread) gosched();
}

uint32_t NotifyList::add() { return wait_.fetch_add(1, std::memory_order_acq_rel); }

void NotifyList::wait(uint32_t ticket) {
  preempt_check_may_park("sync.Cond.Wait");
  lock_.lock();
  // Already notified? (tickets wrap: compare by signed difference)
  if (static_cast<int32_t>(ticket - notify_.load(std::memory_order_relaxed)) < 0) {
    lock_.unlock();
    return;
  }
  Note note;
  Sudog s{.g = getg(), .note = &note, .ticket = ticket};
  if (!may_wait(s)) [[unlikely]] {
    lock_.unlock();
    thread_wait_outside_run(WaitReason::kSyncCond);
  }
  q_.push(&s);
  sudog_block(&s, &park_unlock<decltype(lock_)>, &lock_, WaitReason::kSyncCond);
  released_by_park(lock_);
}

void NotifyList::notify_one() {
  if (wait_.load(std::memory_order_acquire) == notify_.load(std::memory_order_acquire)) return;
  lock_.lock();
  uint32_t t = notify_.load(std::memory_order_relaxed);
  if (t == wait_.load(std::memory_order_acquire)) {
    lock_.unlock();
    return;
  }
  notify_.store(t + 1, std::memory_order_release);
  // The waiter with ticket t may not have queued yet (it is between add and
  // wait); then it will see notify_ > t and not park.
  for (Sudog* s = q_.first; s != nullptr; s = s->next) {
    if (s->ticket == t) {
      q_.remove(s);
      lock_.unlock();
      sudog_ready(s);
      return;
    }
  }
  lock_.unlock();
}

void NotifyList::notify_all() {
  if (wait_.load(std::memory_order_acquire) == notify_.load(std::memory_order_acquire)) return;
  lock_.lock();
  Sudog* last = q_.take_all();
  notify_.store(wait_.load(std::memory_order_acquire), std::memory_order_release);
  lock_.unlock();
  WakeList wake;
  wake.push_detached(last);
  wake.wake_all();
}

}  // namespace gort::internal
