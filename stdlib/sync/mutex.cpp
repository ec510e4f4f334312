// stdlib/sync/mutex.cpp — gort::Mutex and gort::RWMutex (Go's sync/mutex.go and
// sync/rwmutex.go algorithms).
//
// Mutex state word: bit 0 locked, bit 1 woken (a waiter was woken and is
// running, so unlock need not wake another), bit 2 starving, bits 3.. the
// number of parked waiters.
//
// The mutex profile (gmp/profiling.hpp; Go's SetMutexProfileFraction):
// while it is on, a lock that parks reports the time from its first
// failed attempt to the acquisition, with the waiter's stack (Go charges
// the unlocker's); a reader or writer of an RWMutex reports its wait on
// the semaphore. Off, it costs the contended paths one load and a branch.
#include <sched.h>

#include <atomic>

#include "gmp/bubble.hpp"
#include "gmp/os/cpu.hpp"
#include "gmp/diag/fatal.hpp"
#include "gmp/g.hpp"
#include "gmp/lifetime.hpp"
#include "gmp/lock.hpp"
#include "gmp/m.hpp"
#include "gmp/profiling.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "gmp/trace.hpp"
#include "gort/sync.hpp"

namespace gort {
namespace {

constexpr int64_t kStarvationThresholdNs = 1000000;  // 1 ms, as Go
// Go's active_spin and active_spin_cnt: a waiter spins at most kActiveSpin
// times before parking, each time for kActiveSpinCount cpu_relax()es.
constexpr int kActiveSpin = 4;
constexpr int kActiveSpinCount = 30;

// Go's sync_runtime_canSpin: spin only a little, only with several Ps, only
// when other Ps are running (someone may unlock soon), and only when this P
// has nothing else to run.
bool can_spin(int iter) {
  using namespace internal;
  if (iter >= kActiveSpin || sched.procs() <= 1) return false;
  if (sched.procs() <= sched.npidle.load(std::memory_order_relaxed) +
                          sched.nmspinning.load(std::memory_order_relaxed) + 1) {
    return false;
  }
  M* m = getm();
  if (m == nullptr || m->p == nullptr || !m->p->runq.empty()) return false;
  return true;
}

void do_spin() {
  for (int i = 0; i < kActiveSpinCount; i++) internal::cpu_relax();
}

// When a contended wait began, if the mutex profile is on (else 0).
inline int64_t contention_start() {
  if (internal::profiling.mutex_rate.load(std::memory_order_relaxed) == 0) [[likely]] return 0;
  return internal::nanotime();
}

[[gnu::noinline, gnu::cold]] void report_contention(int64_t since) {
  if (auto* event = internal::profiling.mutex_event.load(std::memory_order_acquire)) {
    event(internal::nanotime() - since);
  }
}

}  // namespace

bool Mutex::try_lock() {
  int32_t old = state_.load(std::memory_order_relaxed);
  if ((old & (kLocked | kStarving)) != 0) return false;
  if (!state_.compare_exchange_strong(old, old | kLocked, std::memory_order_acquire)) return false;
  internal::race_acquire(this);
  return true;
}

void Mutex::lock_slow(int32_t old) {
  GORT_TRACE_BLOCKING_CALL();
  // Unlocked in normal mode but with waiters (the usual state under
  // contention): grab it with the value lock()'s CAS just saw, while the
  // cache line is still ours, before anything else touches memory.
  if ((old & (kLocked | kStarving)) == 0 &&
      state_.compare_exchange_strong(old, old | kLocked, std::memory_order_acquire)) {
    return;
  }
  const int64_t contended_at = contention_start();
  // About to wait: a cooperative preemption point.
  internal::preempt_check_may_park("sync.Mutex.Lock");
  int64_t wait_start = 0;
  bool starving = false;
  bool awoke = false;
  int iter = 0;
  old = state_.load(std::memory_order_relaxed);
  for (;;) {
    // Spin while locked in normal mode, telling unlock not to wake anyone.
    if ((old & (kLocked | kStarving)) == kLocked && can_spin(iter)) {
      if (!awoke && (old & kWoken) == 0 && (old >> kWaiterShift) != 0 &&
          state_.compare_exchange_weak(old, old | kWoken, std::memory_order_relaxed)) {
        awoke = true;
      }
      do_spin();
      iter++;
      old = state_.load(std::memory_order_relaxed);
      continue;
    }
    int32_t next = old;
    // In starvation mode newcomers do not grab the lock: they queue.
    if ((old & kStarving) == 0) next |= kLocked;
    if ((old & (kLocked | kStarving)) != 0) next += 1 << kWaiterShift;
    // Switch to starvation mode, but only if the mutex is still locked
    // (unlock expects waiters in starvation mode).
    if (starving && (old & kLocked) != 0) next |= kStarving;
    if (awoke) {
      if ((next & kWoken) == 0) internal::fatal("sync: inconsistent mutex state");
      next &= ~kWoken;
    }
    if (state_.compare_exchange_weak(old, next, std::memory_order_acq_rel)) {
      if ((old & (kLocked | kStarving)) == 0) {  // locked it
        // A lock that parked (wait_start) was contended; one that got
        // in by spinning is not, as in Go.
        if (contended_at != 0 && wait_start != 0) [[unlikely]] report_contention(contended_at);
        return;
      }
      // A waiter that was woken before keeps its place at the front.
      internal::QueueAt at = wait_start != 0 ? internal::QueueAt::kFront : internal::QueueAt::kBack;
      // clock_now: a bubble's fake time, so that a seeded schedule never
      // depends on how fast the machine ran it.
      if (wait_start == 0) wait_start = internal::clock_now();
      sema_.acquire(at, static_cast<uint8_t>(internal::WaitReason::kSyncMutex));
      starving = starving || internal::clock_now() - wait_start > kStarvationThresholdNs;
      old = state_.load(std::memory_order_acquire);
      if ((old & kStarving) != 0) {
        // Handed to us directly; the state is inconsistent until we fix it:
        // locked is not set and we are still counted as a waiter.
        if ((old & (kLocked | kWoken)) != 0 || (old >> kWaiterShift) == 0) {
          internal::fatal("sync: inconsistent mutex state");
        }
        int32_t delta = kLocked - (1 << kWaiterShift);
        if (!starving || (old >> kWaiterShift) == 1) {
          // Leave starvation mode: we waited briefly, or we are the last.
          delta -= kStarving;
        }
        state_.fetch_add(delta, std::memory_order_acq_rel);
        if (contended_at != 0) [[unlikely]] report_contention(contended_at);
        return;
      }
      awoke = true;
      iter = 0;
    } else {
      old = state_.load(std::memory_order_relaxed);
    }
  }
}

// Go's unlockSlow frees the mutex (Unlock's atomic add) and then decides
// whom to wake. Here the CAS that frees it also makes that decision: once
// the mutex is free another goroutine may take it, release it and destroy
// it (a mutex may go as soon as nobody holds it or waits in lock(), the
// POSIX rule), so after that CAS only a waiter it let through, still
// inside lock(), keeps the mutex alive for the Sema's release.
void Mutex::unlock_slow(int32_t old) { wake(unlock_state_slow(old)); }

Mutex::Wake Mutex::unlock_state() {
  internal::race_release(this);
  int32_t old = kLocked;
  if (state_.compare_exchange_strong(old, 0, std::memory_order_release, std::memory_order_relaxed)) return Wake::kNone;
  return unlock_state_slow(old);
}

Mutex::Wake Mutex::unlock_state_slow(int32_t old) {
  for (;;) {
    if ((old & kLocked) == 0) internal::fatal_user("sync: unlock of unlocked mutex");
    if ((old & kStarving) != 0) {
      // Newcomers queue behind the waiters and none takes the mutex: the
      // first waiter gets it through the hand-off, and we yield to it.
      state_.fetch_sub(kLocked, std::memory_order_release);
      return Wake::kHandoff;
    }
    // Wake one waiter unless one is already awake (woken, or spinning).
    bool wake = (old >> kWaiterShift) != 0 && (old & kWoken) == 0;
    int32_t next = wake ? ((old - kLocked - (1 << kWaiterShift)) | kWoken) : old - kLocked;
    if (state_.compare_exchange_weak(old, next, std::memory_order_acq_rel, std::memory_order_relaxed)) {
      return wake ? Wake::kOne : Wake::kNone;
    }
  }
}

void Mutex::wake(Wake w) {
  internal::lifetime_probe();
  if (w == Wake::kHandoff) {
    sema_.release(internal::Handoff::kYes);
    return;
  }
  if (w == Wake::kOne) sema_.release(internal::Handoff::kNo);
  // Someone wants this mutex and may be runnable on this P only: a
  // pending preemption request is honoured here, with the mutex free,
  // so that a holder that re-locks in a loop the signal cannot interrupt
  // (a loop that polls the clock) does not keep the waiter off the P.
  internal::preempt_check();
}

// Race edges (Go's rwmutex.go): Unlock releases reader_sem_, which RLock
// and Lock acquire; RUnlock merges into writer_sem_, which Lock acquires.
// Readers are not ordered with each other.
// A writer is pending: wait for it.
void RWMutex::lock_shared_slow() {
  GORT_TRACE_BLOCKING_CALL();
  const int64_t contended_at = contention_start();
  reader_sem_.acquire(internal::QueueAt::kBack, static_cast<uint8_t>(internal::WaitReason::kSyncRWMutex));
  if (contended_at != 0) [[unlikely]] report_contention(contended_at);
}

bool RWMutex::try_lock_shared() {
  int32_t c = reader_count_.load(std::memory_order_acquire);
  for (;;) {
    if (c < 0) return false;
    if (reader_count_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) {
      internal::race_acquire(&reader_sem_);
      return true;
    }
  }
}

void RWMutex::unlock_shared_slow(int32_t r) {
  if (r + 1 == 0 || r + 1 == -kMaxReaders) internal::fatal_user("sync: RUnlock of unlocked RWMutex");
  // A writer is pending: the last departing reader lets it in.
  if (reader_wait_.fetch_sub(1, std::memory_order_acq_rel) - 1 == 0) writer_sem_.release(internal::Handoff::kNo);
  internal::preempt_check();  // a writer waits (see Mutex::unlock_slow)
}

void RWMutex::lock() {
  GORT_TRACE_BLOCKING_CALL();
  w_.lock();
  if (reader_count_.load(std::memory_order_acquire) < 0) [[unlikely]] wait_previous_writer();
  // Announce the writer; r is the number of active readers.
  int32_t r = reader_count_.fetch_sub(kMaxReaders, std::memory_order_acq_rel);
  if (r != 0 && reader_wait_.fetch_add(r, std::memory_order_acq_rel) + r != 0) {
    const int64_t contended_at = contention_start();
    writer_sem_.acquire(internal::QueueAt::kBack, static_cast<uint8_t>(internal::WaitReason::kSyncRWMutex));
    if (contended_at != 0) [[unlikely]] report_contention(contended_at);
  }
  internal::race_acquire(&reader_sem_);
  internal::race_acquire(&writer_sem_);
}

bool RWMutex::try_lock() {
  if (!w_.try_lock()) return false;
  int32_t zero = 0;
  if (!reader_count_.compare_exchange_strong(zero, -kMaxReaders, std::memory_order_acq_rel)) {
    w_.unlock();
    return false;
  }
  internal::race_acquire(&reader_sem_);
  internal::race_acquire(&writer_sem_);
  return true;
}

// Unlike Go's, the writer frees w_ before it lets readers back in: from
// the add on, a reader may get in and destroy the RWMutex (docs/runtime.md,
// "Destroying what others just used"), so nothing of w_ may follow it but
// the wake of a writer parked in w_.lock(), which keeps the RWMutex alive
// until it is woken. A writer spinning for w_ can take it between the free
// and the add, the next instruction; it waits for the add
// (wait_previous_writer). The releases after the add are for readers
// already queued, which nobody may destroy the RWMutex under either; each
// one's last touch is the Sema's unlock.
void RWMutex::unlock() {
  if (reader_count_.load(std::memory_order_relaxed) >= 0) internal::fatal_user("sync: Unlock of unlocked RWMutex");
  internal::race_release(&reader_sem_);
  Mutex::Wake wake = w_.unlock_state();
  int32_t r = reader_count_.fetch_add(kMaxReaders, std::memory_order_acq_rel) + kMaxReaders;
  internal::lifetime_probe();
  for (int32_t i = 0; i < r; i++) reader_sem_.release(internal::Handoff::kNo);
  if (wake != Mutex::Wake::kNone) {
    w_.wake(wake);
  } else if (r != 0) {
    internal::preempt_check();  // readers waited: see Mutex::wake
  }
}

// Holding w_, with the previous writer between freeing w_ and its add
// (see unlock): it is running, or runnable and about to be, so let it run.
// A goroutine that may not leave its thread (it holds an OS lock, or runs
// inside blocking()) yields the thread instead, as a plain thread does: an
// uncontended lock() must not become a fatal "yielded while holding".
void RWMutex::wait_previous_writer() {
  internal::M* m = internal::getm();
  const bool may_switch = m != nullptr && m->curg != nullptr && internal::m_may_switch(m);
  for (int i = 0; reader_count_.load(std::memory_order_acquire) < 0; i++) {
    if (i < kActiveSpinCount) {
      internal::cpu_relax();
    } else if (may_switch) {
      gort::yield();
    } else {
      sched_yield();
    }
  }
}

}  // namespace gort
