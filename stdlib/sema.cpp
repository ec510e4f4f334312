// stdlib/sema.cpp — Go's runtime semaphore and notify list, per object.
//
// Invariants (under lock_): nwait_ equals the number of waiters queued; a
// waiter is queued at most once; a dequeued waiter is readied exactly once.
// A waiter record lives on the parked goroutine's stack (Go's sudog): it is
// valid until the waiter is readied and resumes, so the releaser reads
// everything it needs from it *before* calling ready.
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

#include <sched.h>

#include "gmp/fatal.hpp"
#include "gmp/lock.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {
namespace {

struct SemaWaiter {
  G* g;
  SemaWaiter* next;
  uint32_t ticket;
  bool handed;  // the releaser handed the count over directly
};

// A plain thread (no goroutine) cannot park: it polls politely, yielding
// the CPU for the first kThreadYieldPolls looks (a release is usually
// near), then sleeping kThreadPollSleepNs between looks.
constexpr int kThreadYieldPolls = 64;
constexpr long kThreadPollSleepNs = 50'000;

void thread_wait_until(bool (*cond)(void*), void* arg) {
  for (int i = 0; !cond(arg); i++) {
    if (i < kThreadYieldPolls) {
      sched_yield();
    } else {
      struct timespec ts{0, kThreadPollSleepNs};
      nanosleep(&ts, nullptr);
    }
  }
}

}  // namespace

bool Sema::try_acquire() {
  uint32_t v = count_.load(std::memory_order_seq_cst);  // seq_cst: see the top
  while (v > 0) {
    if (count_.compare_exchange_weak(v, v - 1, std::memory_order_acq_rel)) return true;
  }
  return false;
}

void Sema::acquire(bool lifo, uint8_t reason) {
  if (try_acquire()) return;
  G* self = getg();
  if (self == nullptr) {
    thread_wait_until([](void* s) { return static_cast<Sema*>(s)->try_acquire(); }, this);
    return;
  }
  SemaWaiter w{self, nullptr, 0, false};
  for (;;) {
    lock_word(&lock_);
    nwait_.fetch_add(1, std::memory_order_seq_cst);  // before try_acquire's load
    if (try_acquire()) {
      nwait_.fetch_sub(1, std::memory_order_acq_rel);
      unlock_word(&lock_);
      return;
    }
    w.next = nullptr;
    auto* head = static_cast<SemaWaiter*>(head_);
    if (lifo) {
      w.next = head;
      head_ = &w;
      if (tail_ == nullptr) tail_ = &w;
    } else {
      if (tail_ != nullptr) static_cast<SemaWaiter*>(tail_)->next = &w; else head_ = &w;
      tail_ = &w;
    }
    park(&park_unlock_word, &lock_, static_cast<WaitReason>(reason));
    if (w.handed || try_acquire()) return;
  }
}

void Sema::release(bool handoff) {
  count_.fetch_add(1, std::memory_order_seq_cst);
  if (nwait_.load(std::memory_order_seq_cst) == 0) return;  // no waiter can have missed it
  lock_word(&lock_);
  if (nwait_.load(std::memory_order_acquire) == 0) {
    unlock_word(&lock_);
    return;
  }
  auto* w = static_cast<SemaWaiter*>(head_);
  head_ = w->next;
  if (head_ == nullptr) tail_ = nullptr;
  nwait_.fetch_sub(1, std::memory_order_acq_rel);
  unlock_word(&lock_);
  bool handed = handoff && try_acquire();
  w->handed = handed;
  G* g = w->g;
  ready(g);  // w may be gone after this
  if (handed) gosched();  // let the new owner run now, on this P
}

uint32_t NotifyList::add() { return wait_.fetch_add(1, std::memory_order_acq_rel); }

void NotifyList::wait(uint32_t ticket) {
  lock_word(&lock_);
  // Already notified? (tickets wrap: compare by signed difference)
  if (static_cast<int32_t>(ticket - notify_.load(std::memory_order_relaxed)) < 0) {
    unlock_word(&lock_);
    return;
  }
  G* self = getg();
  if (self == nullptr) {
    unlock_word(&lock_);
    struct Arg {
      NotifyList* l;
      uint32_t t;
    } a{this, ticket};
    thread_wait_until(
        [](void* p) {
          auto* a = static_cast<Arg*>(p);
          return static_cast<int32_t>(a->t - a->l->notify_.load(std::memory_order_acquire)) < 0;
        },
        &a);
    return;
  }
  SemaWaiter w{self, nullptr, ticket, false};
  if (tail_ != nullptr) static_cast<SemaWaiter*>(tail_)->next = &w; else head_ = &w;
  tail_ = &w;
  park(&park_unlock_word, &lock_, WaitReason::kSyncCond);
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
  SemaWaiter* prev = nullptr;
  for (auto* w = static_cast<SemaWaiter*>(head_); w != nullptr; prev = w, w = w->next) {
    if (w->ticket == t) {
      if (prev != nullptr) prev->next = w->next; else head_ = w->next;
      if (tail_ == w) tail_ = prev;
      G* g = w->g;
      unlock_word(&lock_);
      ready(g);
      return;
    }
  }
  unlock_word(&lock_);
}

void NotifyList::notify_all() {
  if (wait_.load(std::memory_order_acquire) == notify_.load(std::memory_order_acquire)) return;
  lock_word(&lock_);
  auto* w = static_cast<SemaWaiter*>(head_);
  head_ = tail_ = nullptr;
  notify_.store(wait_.load(std::memory_order_acquire), std::memory_order_release);
  unlock_word(&lock_);
  while (w != nullptr) {
    SemaWaiter* next = w->next;
    ready(w->g);
    w = next;
  }
}

}  // namespace gort::internal
