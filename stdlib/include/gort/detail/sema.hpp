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
#include <type_traits>

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

// The synctest bubble of the calling goroutine, as a tag (its id's low
// 32 bits), or 0 outside one (gmp/bubble.hpp). What a Sema, and so a Mutex,
// RWMutex or WaitGroup, remembers of where it was made.
GORT_API uint32_t current_bubble_tag();

class GORT_API Sema {
 public:
  // A Sema made by a bubble's goroutine belongs to the bubble: its waits
  // are durable there (docs/testing.md). Constant-initialised ones (a
  // constinit global) are nobody's.
  constexpr Sema() {
    if (!std::is_constant_evaluated()) bubble_ = current_bubble_tag();
  }
  // WaitGroup's Go 1.25 rule: one made outside joins the bubble of the
  // first goroutine that adds to it from inside one.
  void associate_bubble() {
    if (bubble_ == 0) bubble_ = current_bubble_tag();
  }

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
  uint32_t bubble_ = 0;               // current_bubble_tag() at construction
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
