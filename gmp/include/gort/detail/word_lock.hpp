// gort/detail/word_lock.hpp — the runtime's lock word and the order of
// every runtime lock (Go's runtime.mutex and lockrank.go).
//
// Not part of the public API: included by <gort/detail/sema.hpp> and
// <gort/sync.hpp> so that a Mutex or Semaphore carries its lock inline. The
// lock's behaviour (spin, then sleep on a futex; a runtime critical
// section while held) is documented in gmp/lock.hpp.
//
// Lock order (docs/locks.md): GORT_LOCK_RANKS below is the
// only copy. A lock may be taken while holding locks of lower ranks (listed
// earlier), never higher; a rank that nests may also be taken while holding
// another lock of the same rank, in an order its owner fixes. With the
// Meson option `lock_rank` (on for the test suite, off in the default and
// benchmarked builds) every acquisition is checked against the locks the
// thread holds, and one out of order is a fatal error naming both (Go's
// staticlockranking experiment).
//
// Nothing may be held across a switch except through park's unlock
// function, which releases the lock on the next context, on the same
// thread, once the parking goroutine is saved.
#pragma once

#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "gort/detail/api.hpp"

namespace gort::internal {

// X(rank, nests), lowest rank first.
#define GORT_LOCK_RANKS(X)                                                    \
  /* os/signal's table (stdlib/os/signal.cpp): held while it sets up */     \
  /* the relay's poll descriptor */                                          \
  X(kSignal, false)                                                           \
  /* a context's cancel node (stdlib/sync/context_node.hpp): a parent's is */ \
  /* held while a child's is taken, and while its done channel closes */     \
  X(kCancelNode, true)                                                        \
  /* a time::Timer's send lock (stdlib/sync/time.cpp): a tick's send */      \
  X(kTimerSend, false)                                                        \
  /* gort::Semaphore's queue */                                              \
  X(kSemaphore, false)                                                        \
  /* Sema and NotifyList (Mutex, RWMutex, WaitGroup, Cond) */                \
  X(kSema, false)                                                             \
  /* a channel; select locks several, in address order */                    \
  X(kChan, true)                                                              \
  /* a poll descriptor's deadlines (netpoll/poll_desc.hpp) */                \
  X(kPollDesc, false)                                                         \
  /* a poll descriptor's wait lists */                                       \
  X(kPollWaitList, false)                                                     \
  /* a runtime timer's add, stop and reset (gmp/timer.hpp) */                \
  X(kTimer, false)                                                            \
  /* Sched::lock: idle Ms and Ps, the global queues, allg, allm */           \
  X(kSched, false)                                                            \
  /* a P's timer heap (gmp/timer.cpp); timers_move holds two, the world */ \
  /* stopped and Sched::lock held, so no other pair can be waiting */        \
  X(kTimerHeap, true)                                                        \
  /* a synctest bubble's timer heap (gmp/bubble_timer.cpp) */                \
  X(kBubbleTimers, false)                                                     \
  /* a time::Timer's reference count: taken by the runtime's reference */  \
  /* hook under the timer's and the heap's locks */                          \
  X(kTimerRefs, false)                                                        \
  /* free stack slots and slabs (gmp/stack.hpp) */                           \
  X(kStackPool, false)                                                        \
  /* free poll descriptors (netpoll/poll_desc.cpp), and, in a lock of */   \
  /* its own, free deadline timers (netpoll/poll_deadline.cpp) */            \
  X(kPollCache, false)                                                        \
  /* in-process socket pairs (stdlib/net/net_peer.cpp) */                    \
  X(kNetPeer, false)                                                          \
  /* the callbacks run at a run's end (gmp/run.cpp) */                       \
  X(kRunEnd, false)                                                           \
  /* registered preemptible code (preempt/safe_points.cpp) */                \
  X(kSafePoints, false)                                                       \
  /* a synctest bubble's counts (gmp/bubble.cpp): taken when a member's */  \
  /* status changes, under whatever its caller holds; a leaf */             \
  X(kBubble, false)                                                           \
  /* the block and mutex profiles' tables (stdlib/pprof/events.cpp): */     \
  /* taken to record a contended lock, under the lock that was */           \
  /* contended (Sched::lock and other OS locks included); a leaf */         \
  X(kProfile, false)                                                          \
  /* the tracer's buffer for threads without an M (gmp/trace.cpp): held */ \
  /* while an event is written, under whatever its emitter holds */         \
  X(kTraceNoM, false)                                                         \
  /* the tracer's free list, trace and ring (gmp/trace_consume.cpp); a */    \
  /* leaf */                                                                  \
  X(kTracer, false)

enum class LockRank : uint8_t {
  kNone = 0,
#define GORT_LOCK_RANK_ENUM(rank, nests) rank,
  GORT_LOCK_RANKS(GORT_LOCK_RANK_ENUM)
#undef GORT_LOCK_RANK_ENUM
};

// The lock word's two halves (gmp/lock.cpp). `rank` is checked only in a
// lock_rank build.
GORT_API void lock_word(std::atomic<uint32_t>* w, LockRank rank);
GORT_API void unlock_word(std::atomic<uint32_t>* w, LockRank rank);

// A runtime lock word of rank R (Go's runtime.mutex), a capability for
// clang's thread-safety analysis. The rank is part of the type, so a lock
// costs its word alone whether or not ranks are checked.
template <LockRank R>
class ABSL_LOCKABLE WordLock {
 public:
  static constexpr LockRank kRank = R;
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { lock_word(&key_, R); }
  void unlock() ABSL_UNLOCK_FUNCTION() { unlock_word(&key_, R); }

 private:
  std::atomic<uint32_t> key_{0};
};

}  // namespace gort::internal
