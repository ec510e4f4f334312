// stdlib/sync/weighted_semaphore.cpp — gort::Semaphore (golang.org/x/sync/semaphore).
//
// Invariants (under lock_): 0 <= cur_ <= size_; waiters are served strictly
// in FIFO order: release wakes the head while it fits and stops at the first
// that does not, so small requests never overtake a large one.
#include <optional>
#include <variant>

#include "gmp/diag/fatal.hpp"
#include "gmp/g.hpp"
#include "gmp/lifetime.hpp"
#include "gmp/lock.hpp"
#include "gmp/os/note.hpp"
#include "gmp/sched.hpp"
#include "gmp/sudog.hpp"
#include "gmp/tls.hpp"
#include "gmp/trace.hpp"
#include "gort/context.hpp"
#include "gort/sync.hpp"

namespace gort {

using internal::Sudog;

// Waiters wait in Sudogs (gmp/sudog.hpp): `n` is the request, `success`
// the grant. A context-aware acquire sets `elem` to a channel that is
// closed on grant instead (the waiter is parked in a select on it and on
// ctx.done()).
Semaphore::Semaphore(int64_t n) : size_(n), bubble_(internal::current_bubble_tag()) {
  if (n < 0) throw panic_error("semaphore: negative size");
}

Semaphore::~Semaphore() = default;

// Lock held: grants the queue's head while it fits. Context waiters are
// told by closing their channel, which readies them; the others are woken
// from `wake` once the lock is released.
void Semaphore::grant_locked(internal::WakeList* wake) {
  while (Sudog* s = q_.first) {
    if (size_ - cur_ < s->n) break;
    cur_ += s->n;
    q_.remove(s);
    s->success = true;
    if (s->elem != nullptr) {
      static_cast<Chan<std::monostate>*>(s->elem)->close();
      internal::lifetime_probe();
    } else {
      wake->push(s);
    }
  }
}

bool Semaphore::try_acquire(int64_t n) {
  lock_.lock();
  bool ok = size_ - cur_ >= n && q_.empty();
  if (ok) cur_ += n;
  lock_.unlock();
  if (ok) internal::race_acquire(this);
  return ok;
}

void Semaphore::acquire(int64_t n) {
  GORT_TRACE_BLOCKING_CALL();
  internal::preempt_check_may_park("semacquire");
  if (n < 0) throw panic_error("semaphore: negative acquire");
  lock_.lock();
  if (size_ - cur_ >= n && q_.empty()) {
    cur_ += n;
    lock_.unlock();
    internal::race_acquire(this);
    return;
  }
  if (n > size_) {
    // Can never be satisfied; block forever, as x/sync does (without ctx).
    lock_.unlock();
    internal::block_forever(internal::WaitReason::kSemacquire, "semaphore: impossible acquire was woken");
  }
  internal::Note note;
  Sudog s{.g = internal::getg(), .note = &note, .n = n};
  if (!internal::may_wait(s)) [[unlikely]] {
    lock_.unlock();
    internal::thread_wait_outside_run(internal::WaitReason::kSemacquire);
  }
  q_.push(&s);
  // Durable in the bubble it was made in (docs/testing.md).
  const bool durable = bubble_ != 0 && bubble_ == internal::current_bubble_tag();
  internal::sudog_block(&s, &internal::park_unlock<decltype(lock_)>, &lock_,
                        durable ? internal::WaitReason::kSynctestSemacquire : internal::WaitReason::kSemacquire);
  internal::released_by_park(lock_);
  if (!s.success) internal::fatal("semaphore: waiter woken without grant");
  internal::race_acquire(this);
}

// Race edges: a release happens before the acquires it lets through (x/sync's
// semaphore orders them with its mutex).
void Semaphore::release(int64_t n) {
  internal::race_release(this);
  lock_.lock();
  cur_ -= n;
  if (cur_ < 0) {
    cur_ += n;
    lock_.unlock();
    throw panic_error("semaphore: released more than held");
  }
  internal::WakeList wake;
  grant_locked(&wake);
  lock_.unlock();
  wake.wake_all();
}

absl::Status Semaphore::acquire(const Context& ctx, int64_t n) {
  internal::preempt_check_may_park("semacquire");
  if (n < 0) throw panic_error("semaphore: negative acquire");
  Chan<std::monostate> done = ctx.done();
  auto is_done = [&] {
    bool d = false;
    select(on_recv(done, [&](std::optional<std::monostate>) { d = true; }), on_default());
    return d;
  };
  // A context that is already done wins, even over free units (x/sync).
  if (is_done()) return ctx.err();
  lock_.lock();
  if (size_ - cur_ >= n && q_.empty()) {
    cur_ += n;
    lock_.unlock();
    internal::race_acquire(this);
    return absl::OkStatus();
  }
  if (n > size_) {
    // Can never be granted: wait for ctx without queueing, so the requests
    // behind are not held up by a doomed one.
    lock_.unlock();
    (void)done.recv();
    return ctx.err();
  }
  Chan<std::monostate> ready = make_chan<std::monostate>();
  Sudog s{.g = internal::getg(), .elem = &ready, .n = n};
  q_.push(&s);
  lock_.unlock();

  bool cancelled = false;
  select(on_recv(ready), on_recv(done, [&](std::optional<std::monostate>) { cancelled = true; }));
  if (!cancelled) {
    // Granted. If ctx finished meanwhile, prefer the error and give the
    // units back, as x/sync does.
    if (is_done()) {
      release(n);
      return ctx.err();
    }
    // The granter closed `ready` with the lock held and may still hold it:
    // our caller may destroy the semaphore once we return, so wait for the
    // granter's unlock, its last touch of it (gmp/lifetime.hpp).
    lock_.lock();
    lock_.unlock();
    internal::race_acquire(this);
    return absl::OkStatus();
  }
  internal::WakeList wake;
  lock_.lock();
  if (s.success) {
    // Granted after all, between ctx and the lock: put the units back.
    cur_ -= n;
  } else {
    bool front = q_.first == &s;
    q_.remove(&s);
    // Leaving the head may let the next ones fit.
    if (!front) {
      lock_.unlock();
      return ctx.err();
    }
  }
  grant_locked(&wake);
  lock_.unlock();
  wake.wake_all();
  return ctx.err();
}

}  // namespace gort
