// gort/detail/sema.hpp — the wait-queue facility under every sync type.
//
// Not part of the public API: included by <gort/sync.hpp>. Go's runtime
// semaphore (runtime/sema.go), one per object instead of Go's address-keyed
// table because C++ objects can carry their own queue: a count and a FIFO
// of parked goroutines. acquire parks the calling goroutine (never the OS
// thread); release hands its unit to the oldest waiter and readies it, and
// with Handoff::kYes also yields to it (Go's starvation-mode hand-off).
// Both take the Sema's lock; the unlock is a release's last touch of the
// Sema, so whoever gets the unit may destroy the object around it at once.
//
// Called from a plain OS thread (not a goroutine), acquire and wait queue
// the thread as any other waiter and sleep it on a futex until woken.
#pragma once

#include <atomic>
#include <cstdint>

#include "gort/detail/api.hpp"
#include "gort/detail/waitq.hpp"
#include "gort/detail/word_lock.hpp"

namespace gort::internal {

// Where Sema::acquire queues a caller that has to wait: at the back, or at
// the front (Go's lifo: a waiter that was woken and lost the race keeps its
// place, as Go's Mutex does).
enum class QueueAt : bool { kBack = false, kFront = true };
// Whether Sema::release yields to the waiter it hands its unit to (Go's
// handoff: a Mutex in starvation mode).
enum class Handoff : bool { kNo = false, kYes = true };

class GORT_API Sema {
 public:
  // Waits until the count is positive and decrements it. `reason` is a
  // WaitReason.
  void acquire(QueueAt at, uint8_t reason);
  [[nodiscard]] bool try_acquire();
  void release(Handoff handoff);
  uint32_t waiters() const { return nwait_.load(std::memory_order_relaxed); }

 private:
  uint32_t count_ = 0;                // under lock_
  std::atomic<uint32_t> nwait_{0};    // written under lock_; waiters() reads it without
  WordLock<LockRank::kSema> lock_;
  WaitQ q_;
};

// Go's notifyList (runtime/sema.go), the queue under Cond: tickets make a
// signal wake exactly the goroutines that were waiting when it was sent.
class GORT_API NotifyList {
 public:
  uint32_t add();                 // take a ticket (before unlocking the user's mutex)
  void wait(uint32_t ticket);     // park until the ticket is notified
  void notify_one();
  void notify_all();

 private:
  std::atomic<uint32_t> wait_{0};
  std::atomic<uint32_t> notify_{0};
  WordLock<LockRank::kSema> lock_;
  WaitQ q_;
};

}  // namespace gort::internal
