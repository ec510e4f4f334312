// stdlib/net/fd_mutex.cpp — see fd_mutex.hpp (the word and its transitions).
#include "stdlib/net/fd_mutex.hpp"

#include "gmp/diag/fatal.hpp"
#include "gmp/g.hpp"
#include "gort/detail/race.hpp"
#include "gort/runtime.hpp"
#include "stdlib/sync/semtable.hpp"

namespace gort::internal {
namespace {

[[noreturn]] void too_many() {
  throw panic_error("too many concurrent operations on a single file or socket (max 1048575)");
}

constexpr WaitReason kReason = WaitReason::kSemacquire;

// True if the word says closed with no reference left.
bool closed_and_unreferenced(uint64_t s) {
  return (s & (FdMutex::kClosed | FdMutex::kRefMask)) == FdMutex::kClosed;
}

}  // namespace

bool FdMutex::incref() {
  uint64_t old = state_.load(std::memory_order_relaxed);
  for (;;) {
    if (old & kClosed) return false;
    uint64_t next = old + kRef;
    if ((next & kRefMask) == 0) too_many();
    if (state_.compare_exchange_weak(old, next, std::memory_order_acq_rel)) return true;
  }
}

bool FdMutex::incref_and_close() {
  uint64_t old = state_.load(std::memory_order_relaxed);
  uint64_t next;
  for (;;) {
    if (old & kClosed) return false;
    next = (old | kClosed) + kRef;
    if ((next & kRefMask) == 0) too_many();
    next &= ~(kRWaitMask | kWWaitMask);  // every waiter is woken below
    if (state_.compare_exchange_weak(old, next, std::memory_order_acq_rel)) break;
  }
  // Our reference keeps the semaphores alive through the releases; each
  // waiter holds its own, so none of them can destroy the NetFD under us.
  for (uint64_t n = (old & kRWaitMask) / kRWait; n > 0; n--) semrelease_addr(&rsema_);
  for (uint64_t n = (old & kWWaitMask) / kWWait; n > 0; n--) semrelease_addr(&wsema_);
  return true;
}

bool FdMutex::decref() {
  uint64_t old = state_.fetch_sub(kRef, std::memory_order_acq_rel);
  if ((old & kRefMask) == 0) fatal("inconsistent poll.fdMutex");
  return closed_and_unreferenced(old - kRef);
}

bool FdMutex::rwlock(bool read, bool* last) {
  const uint64_t lock = read ? kRLock : kWLock;
  const uint64_t wait = read ? kRWait : kWWait;
  const uint64_t wait_mask = read ? kRWaitMask : kWWaitMask;
  uint32_t* sema = read ? &rsema_ : &wsema_;
  *last = false;
  bool referenced = false;  // the reference this call holds, once taken
  uint64_t old = state_.load(std::memory_order_relaxed);
  for (;;) {
    if (old & kClosed) {
      if (referenced) *last = decref();
      return false;
    }
    uint64_t next;
    if ((old & lock) == 0) {
      next = old | lock;
    } else {
      next = old + wait;
      if ((next & wait_mask) == 0) too_many();
    }
    if (!referenced) {
      next += kRef;
      if ((next & kRefMask) == 0) too_many();
    }
    if (!state_.compare_exchange_weak(old, next, std::memory_order_acq_rel)) continue;
    referenced = true;
    if ((old & lock) == 0) {
      race_acquire(sema);  // the last unlock of this side happens before
      return true;
    }
    // Counted as a waiter: rwunlock or incref_and_close takes the count
    // back and releases the semaphore once for it.
    semacquire_addr(sema, kReason);
    old = state_.load(std::memory_order_relaxed);
  }
}

bool FdMutex::rwunlock(bool read) {
  const uint64_t lock = read ? kRLock : kWLock;
  const uint64_t wait = read ? kRWait : kWWait;
  const uint64_t wait_mask = read ? kRWaitMask : kWWaitMask;
  uint32_t* sema = read ? &rsema_ : &wsema_;
  race_release(sema);
  uint64_t old = state_.load(std::memory_order_relaxed);
  for (;;) {
    if ((old & lock) == 0 || (old & kRefMask) == 0) fatal("inconsistent poll.fdMutex");
    const bool waiter = (old & wait_mask) != 0;
    // With a waiter to wake, the reference goes only after the release.
    uint64_t next = (old & ~lock) - (waiter ? wait : kRef);
    if (!state_.compare_exchange_weak(old, next, std::memory_order_acq_rel)) continue;
    if (!waiter) return closed_and_unreferenced(next);
    semrelease_addr(sema);
    return decref();
  }
}

}  // namespace gort::internal
