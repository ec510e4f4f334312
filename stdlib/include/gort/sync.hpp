// gort/sync.hpp — Go's sync package: Mutex, RWMutex, WaitGroup, Once, Cond,
// and a weighted Semaphore (golang.org/x/sync/semaphore).
//
// Every type here parks *goroutines*, never OS threads: a goroutine waiting
// for a Mutex lets its thread run other goroutines. They meet the standard
// Lockable / SharedLockable requirements, so the standard adapters work:
//
//   gort::Mutex mu;
//   std::map<std::string, int> counts;  // guarded by mu
//   gort::WaitGroup wg;
//   for (auto& word : words) {
//     wg.add(1);
//     gort::go([&, word] {
//       std::lock_guard lock(mu);
//       counts[word]++;
//       wg.done();
//     });
//   }
//   wg.wait();
//
// Costs: uncontended lock/unlock is one atomic each; contended waiters park
// on a per-object queue (no allocation). None of these types may be copied
// or moved (as in Go, where copying a sync value is a bug `go vet` reports).
//
// Misuse, with Go's words: unlocking an unlocked Mutex or RWMutex is a fatal
// error (`fatal error: sync: unlock of unlocked mutex`, exit 2); a negative
// WaitGroup counter panics (`sync: negative WaitGroup counter`).
//
// Called from a plain OS thread (outside any goroutine) these still work;
// the thread then queues as a goroutine would and sleeps on a futex.
//
// Shared by reference, as they must be, each may be destroyed as soon as
// the operation that let its destroyer through has taken effect: the last
// unlock of a Mutex, the done() that ends a WaitGroup's wait, the run that
// makes a Once done, the writer's unlock of an RWMutex (docs/runtime.md,
// "Destroying what others just used").
//
// Mutex and RWMutex carry abseil's thread-safety annotations, so clang's
// -Wthread-safety checks code that marks its fields ABSL_GUARDED_BY(mu), as
// it does for absl::Mutex (RWMutex's read side is a shared hold).
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "gort/detail/api.hpp"
#include "gort/detail/race.hpp"
#include "gort/detail/sema.hpp"
#include "gort/detail/waitq.hpp"
#include "gort/detail/word_lock.hpp"
#include "gort/runtime.hpp"

namespace gort {

class Context;

// Go's sync.Mutex, with its two modes. Normal mode: a woken waiter competes
// with newly arriving goroutines (which usually win: they are already on a
// CPU), and a goroutine may spin briefly on multi-P runtimes before parking.
// Starvation mode, entered when a waiter has waited more than 1 ms: the
// unlocker hands the mutex directly to the oldest waiter, FIFO, and newcomers
// queue at the tail; it ends when the last waiter has waited less than 1 ms
// or no waiter is left. lock() may park the caller; unlock() and try_lock()
// never do. Any goroutine may unlock a Mutex locked by another, as in Go.
class GORT_API ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    int32_t old = 0;
    if (!state_.compare_exchange_strong(old, kLocked, std::memory_order_acquire)) {
      lock_slow(old);  // the state the CAS saw
    }
    internal::race_acquire(this);  // unlock happens before the next lock
  }
  [[nodiscard]] bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true);
  void unlock() ABSL_UNLOCK_FUNCTION() {
    internal::race_release(this);
    // Uncontended: the CAS that frees the mutex is the last touch of it
    // (whoever takes it next may destroy it). Otherwise there may be
    // someone to wake, and a pending preemption request is honoured (a
    // cooperative preemption point wherever another goroutine wants this
    // mutex).
    int32_t old = kLocked;
    if (!state_.compare_exchange_strong(old, 0, std::memory_order_release, std::memory_order_relaxed)) {
      unlock_slow(old);
    }
  }

 private:
  static constexpr int32_t kLocked = 1;
  static constexpr int32_t kWoken = 2;
  static constexpr int32_t kStarving = 4;
  static constexpr int kWaiterShift = 3;

  // unlock in two steps, for RWMutex::unlock: unlock_state() frees the
  // mutex and says whom to wake, which wake() then does. Between the two a
  // waiter is still inside lock(), so the mutex (and what holds it) stays
  // alive.
  enum class Wake : uint8_t { kNone, kOne, kHandoff };
  Wake unlock_state();
  Wake unlock_state_slow(int32_t old);
  void wake(Wake w);
  void lock_slow(int32_t old);
  void unlock_slow(int32_t old);
  friend class RWMutex;

  std::atomic<int32_t> state_{0};
  internal::Sema sema_;
};

// Go's sync.RWMutex: any number of readers or one writer. A writer that
// calls lock() blocks new readers until it has had its turn, so a stream of
// readers cannot starve writers. lock() and lock_shared() may park.
class GORT_API ABSL_LOCKABLE RWMutex {
 public:
  RWMutex() = default;
  RWMutex(const RWMutex&) = delete;
  RWMutex& operator=(const RWMutex&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION();
  void unlock() ABSL_UNLOCK_FUNCTION();
  [[nodiscard]] bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true);
  // The read side's fast paths are inline, as Mutex's are: one atomic each.
  void lock_shared() ABSL_SHARED_LOCK_FUNCTION() {
    if (reader_count_.fetch_add(1, std::memory_order_acq_rel) + 1 < 0) lock_shared_slow();
    internal::race_acquire(&reader_sem_);
  }
  void unlock_shared() ABSL_UNLOCK_FUNCTION() {
    internal::race_release(&writer_sem_);
    int32_t r = reader_count_.fetch_sub(1, std::memory_order_acq_rel) - 1;
    if (r < 0) unlock_shared_slow(r);
  }
  [[nodiscard]] bool try_lock_shared() ABSL_SHARED_TRYLOCK_FUNCTION(true);

  // Go's RWMutex.RLocker: the read side as a lock of its own, for code
  // written against a plain lock (Go's sync.Locker; in C++ a Lockable):
  // its lock() is lock_shared(), unlock() unlock_shared(), try_lock()
  // try_lock_shared().
  //
  //   gort::RWMutex mu;
  //   auto rl = mu.rlocker();
  //   std::lock_guard guard(rl);           // holds a read lock
  //
  // A small copyable value that refers to its RWMutex (which must outlive
  // it); every copy locks the same read side, as Go's do.
  class RLocker {
   public:
    explicit RLocker(RWMutex& rw) : rw_(&rw) {}
    void lock() ABSL_SHARED_LOCK_FUNCTION(rw_) { rw_->lock_shared(); }
    void unlock() ABSL_UNLOCK_FUNCTION(rw_) { rw_->unlock_shared(); }
    [[nodiscard]] bool try_lock() ABSL_SHARED_TRYLOCK_FUNCTION(true, rw_) { return rw_->try_lock_shared(); }
    RWMutex& rwmutex() const { return *rw_; }

   private:
    RWMutex* rw_;
  };
  RLocker rlocker() { return RLocker(*this); }

 private:
  static constexpr int32_t kMaxReaders = 1 << 30;
  void lock_shared_slow();
  void unlock_shared_slow(int32_t r);
  void wait_previous_writer();

  // The counts first, beside w_'s state word: a reader touches only
  // reader_count_, a writer that, w_'s state and reader_wait_, all in the
  // object's first cache line (the Semas are touched only to park and wake).
  std::atomic<int32_t> reader_count_{0};
  std::atomic<int32_t> reader_wait_{0};
  Mutex w_;
  internal::Sema writer_sem_;
  internal::Sema reader_sem_;
};

// Go's sync.WaitGroup: wait() parks until the counter drops to zero.
// Call add() before starting the goroutine that will call done(). A
// WaitGroup may be reused once wait() has returned.
class GORT_API WaitGroup {
 public:
  WaitGroup() = default;
  WaitGroup(const WaitGroup&) = delete;
  WaitGroup& operator=(const WaitGroup&) = delete;

  // Panics `sync: negative WaitGroup counter` if the counter goes below 0.
  void add(int64_t delta);
  void done() { add(-1); }
  void wait();

 private:
  // High 32 bits: counter; low 32 bits: waiters.
  std::atomic<uint64_t> state_{0};
  internal::Sema sema_;
};

// Go's sync.Once: call(f) runs f exactly once over the life of the Once;
// concurrent callers wait until that run finishes. If f throws, the Once
// still counts as done (as in Go, where a panicking f counts as returned),
// and the exception propagates to that caller. Once no other caller waits
// in call(), whoever sees it done may destroy it, even while the run that
// made it done is still returning (stdlib/sync/once.cpp).
class GORT_API Once {
 public:
  Once() = default;
  Once(const Once&) = delete;
  Once& operator=(const Once&) = delete;

  template <class F>
  void call(F&& f) {
    if (done()) {
      internal::race_acquire(this);
      return;
    }
    if (!begin()) return;
    struct Finish {
      Once* o;
      ~Finish() { o->finish(); }
    } finish{this};
    std::forward<F>(f)();
  }
  bool done() const { return (state_.load(std::memory_order_acquire) & kDone) != 0; }

 private:
  // state_: kDone, kRunning, and the callers waiting for the run (kWaiter each).
  static constexpr uint64_t kDone = 1;
  static constexpr uint64_t kRunning = 2;
  static constexpr uint64_t kWaiter = uint64_t{1} << 32;

  // True if the caller is to run f; false once the Once is done (after
  // waiting for the run in progress, if there was one).
  bool begin();
  void finish();

  std::atomic<uint64_t> state_{0};
  internal::Sema sema_;
};

// Go's sync.Cond over a gort::Mutex. wait() atomically unlocks the mutex and
// parks; when woken it relocks before returning. As in Go, wake-ups only
// happen through signal/broadcast, but callers should wait in a loop that
// re-checks their condition.
class Cond {
 public:
  explicit Cond(Mutex& l) : l_(l) {}
  Cond(const Cond&) = delete;
  Cond& operator=(const Cond&) = delete;

  // The caller holds mutex(); the analysis cannot tie l_ to the caller's
  // name for it, so this is not ABSL_EXCLUSIVE_LOCKS_REQUIRED(l_).
  void wait() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    uint32_t t = notify_.add();
    l_.unlock();
    notify_.wait(t);
    l_.lock();
  }
  void signal() { notify_.notify_one(); }
  void broadcast() { notify_.notify_all(); }
  Mutex& mutex() { return l_; }

 private:
  Mutex& l_;
  internal::NotifyList notify_;
};

class Context;  // gort/context.hpp

// A weighted semaphore (golang.org/x/sync/semaphore): holds up to `n` units.
// Waiters are served FIFO: a large request at the head is not overtaken by
// small ones that would fit, so it cannot starve. acquire parks the caller.
//
//   gort::Semaphore slots(4);
//   if (absl::Status s = slots.acquire(ctx, 1); !s.ok()) return s;  // ctx.err()
//   ... use one of 4 slots ...
//   slots.release(1);
class GORT_API Semaphore {
 public:
  explicit Semaphore(int64_t n);
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;
  ~Semaphore();

  void acquire(int64_t n = 1);
  // As x/sync's Acquire(ctx, n): waits for n units or for ctx to be done,
  // whichever comes first. Returns OK with the units held, or ctx.err()
  // holding nothing. A ctx already done fails even if the units are free;
  // a request larger than the semaphore waits for ctx (it can never be
  // granted) without blocking the requests behind it. A waiter that leaves
  // the head of the queue lets the ones behind it through.
  absl::Status acquire(const Context& ctx, int64_t n = 1);
  [[nodiscard]] bool try_acquire(int64_t n = 1);
  // Panics `semaphore: released more than held`.
  void release(int64_t n = 1);

 private:
  void grant_locked(internal::WakeList* wake);

  int64_t size_;
  int64_t cur_ = 0;
  internal::WordLock<internal::LockRank::kSemaphore> lock_;
  uint32_t bubble_;  // internal::current_bubble_tag() at construction
  internal::WaitQ q_;  // FIFO; Sudog::n is each waiter's request
};

}  // namespace gort
