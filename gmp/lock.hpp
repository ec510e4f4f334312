// gmp/lock.hpp — the runtime's mutual-exclusion lock (Go's lock_futex).
//
// A 32-bit word: 0 unlocked, 1 locked, 2 locked with sleepers. Contenders
// spin briefly (only with several CPUs), then sleep on a futex, so a holder
// descheduled by the kernel does not make others burn CPU. Holding it
// counts as a runtime critical section (acquirem): the holder is never
// asynchronously preempted. It is an *OS-thread* lock: never hold it across
// a park, except through park's unlock function (park_unlock), which
// releases it on the next context once the parking goroutine is saved.
//
// The lock rules the compiler checks (docs/locks.md): the
// runtime's locks are capabilities for clang's -Wthread-safety. WordLock<R>
// (gort/detail/word_lock.hpp, where the table of ranks lives) is the word
// lock as a type, RuntimeMutex<R> a std::mutex (an OS lock, counted by
// preempt/oslock.cpp like any other), MutexLock and UniqueLock their scoped
// holders (std::lock_guard and std::unique_lock, annotated). Fields carry
// ABSL_GUARDED_BY and functions that expect a lock held
// ABSL_EXCLUSIVE_LOCKS_REQUIRED; every wrapper is inline and compiles to
// the very calls it wraps. The order between locks is checked at run time
// in a lock_rank build (lockrank.cpp).
#pragma once

#include "gmp/room.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "gort/detail/word_lock.hpp"

namespace gort::internal {

struct G;

// The ranks the calling thread holds, checked on every acquisition
// (lockrank.cpp); no-ops unless the library is built with lock_rank.
#ifdef GORT_LOCK_RANK
void lockrank_acquire(LockRank rank, const void* lock);
void lockrank_acquired_try(LockRank rank, const void* lock);
void lockrank_release(LockRank rank, const void* lock);
#else
inline void lockrank_acquire(LockRank, const void*) {}
inline void lockrank_acquired_try(LockRank, const void*) {}
inline void lockrank_release(LockRank, const void*) {}
#endif

// For park(): releases the lock at `arg`, of type L, on the next context
// (the one release the analysis cannot follow: docs/runtime.md).
template <class L>
bool park_unlock(G*, void* arg) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  static_cast<L*>(arg)->unlock();
  return true;
}
// Tells the analysis that `l`, handed to park's unlock function, is no
// longer held once the park returns. Compiles to nothing.
template <class L>
inline void released_by_park(L& l) ABSL_UNLOCK_FUNCTION(l) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  (void)l;
}

// A std::mutex of rank R the thread-safety analysis can follow (Sched::lock,
// the stack pool, the poll descriptor cache).
template <LockRank R>
class ABSL_LOCKABLE RuntimeMutex {
 public:
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    lockrank_acquire(R, this);
    mu_.lock();
  }
  void unlock() ABSL_UNLOCK_FUNCTION() {
    mu_.unlock();
    lockrank_release(R, this);
  }
  bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    if (!mu_.try_lock()) return false;
    lockrank_acquired_try(R, this);
    return true;
  }

 private:
  std::mutex mu_;
};

// Holds `mu` for its scope (std::lock_guard).
template <class Mu>
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mu& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mu& mu_;
};

// Holds `mu` from construction until unlock() or the end of its scope, and
// again after lock() (std::unique_lock).
template <class Mu>
class ABSL_SCOPED_LOCKABLE UniqueLock {
 public:
  explicit UniqueLock(Mu& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock(); }
  ~UniqueLock() ABSL_UNLOCK_FUNCTION() {
    if (held_) mu_.unlock();
  }
  UniqueLock(const UniqueLock&) = delete;
  UniqueLock& operator=(const UniqueLock&) = delete;
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_.lock();
    held_ = true;
  }
  void unlock() ABSL_UNLOCK_FUNCTION() {
    mu_.unlock();
    held_ = false;
  }

 private:
  Mu& mu_;
  bool held_ = true;
};

// Yields if sysmon asked the running goroutine to give up its P (Go's
// stack-bound check in function prologues). Cheap; called at gort entry
// points.
void preempt_check();
// preempt_check where a gort call that may park begins (a channel
// operation, a blocking select, a contended Mutex, WaitGroup::wait, sleep,
// a Conn's read...; `what` names it as park's fatal error would). With
// GORT_DEBUG=parkcheck=1 it also applies park's OS-lock rule (no OS lock
// held) whether or not this call parks, so that a latent mistake shows on
// the first run, not when timing changes (docs/standard-cpp.md). Inside
// gort::blocking only a call that really parks is an error.
void preempt_check_may_park(const char* what);

}  // namespace gort::internal
