// stdlib/semaphore.cpp — gort::Semaphore (golang.org/x/sync/semaphore).
//
// Invariants (under lock_): 0 <= cur_ <= size_; waiters are served strictly
// in FIFO order: release wakes the head while it fits and stops at the first
// that does not, so small requests never overtake a large one.
#include <optional>
#include <variant>

#include "gmp/fatal.hpp"
#include "gmp/g.hpp"
#include "gmp/lock.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "gort/context.hpp"
#include "gort/sync.hpp"

namespace gort {

struct Semaphore::Waiter {
  internal::G* g;
  int64_t n;
  Waiter* next;
  Waiter* prev;
  bool granted;
  // Set for acquire(ctx, n): closed on grant instead of readying g (the
  // waiter is parked in a select on this and ctx.done()).
  Chan<std::monostate>* ready = nullptr;
};

namespace {

// Wakes the queue's head while it fits (lock held). Ctx waiters are told by
// closing their channel, which readies them; the others are queued in *wake.
void grant_waiters(int64_t size, int64_t* cur, Semaphore::Waiter** head, Semaphore::Waiter** tail,
                   internal::GQueue* wake) {
  while (*head != nullptr && size - *cur >= (*head)->n) {
    Semaphore::Waiter* w = *head;
    *cur += w->n;
    *head = w->next;
    if (*head != nullptr) (*head)->prev = nullptr; else *tail = nullptr;
    w->granted = true;
    if (w->ready != nullptr) {
      w->ready->close();
    } else {
      wake->push_back(w->g);
    }
  }
}

}  // namespace

Semaphore::Semaphore(int64_t n) : size_(n) {
  if (n < 0) throw panic_error("semaphore: negative size");
}

Semaphore::~Semaphore() = default;

bool Semaphore::try_acquire(int64_t n) {
  internal::lock_word(&lock_);
  bool ok = size_ - cur_ >= n && head_ == nullptr;
  if (ok) cur_ += n;
  internal::unlock_word(&lock_);
  if (ok) internal::race_acquire(this);
  return ok;
}

void Semaphore::acquire(int64_t n) {
  internal::preempt_check();
  if (n < 0) throw panic_error("semaphore: negative acquire");
  internal::lock_word(&lock_);
  if (size_ - cur_ >= n && head_ == nullptr) {
    cur_ += n;
    internal::unlock_word(&lock_);
    internal::race_acquire(this);
    return;
  }
  internal::G* self = internal::getg();
  if (self == nullptr) {
    internal::unlock_word(&lock_);
    while (!try_acquire(n)) {
      struct timespec ts{0, 50000};
      nanosleep(&ts, nullptr);
    }
    return;
  }
  Waiter w{self, n, nullptr, tail_, false};
  if (n > size_) {
    // Can never be satisfied; block forever, as x/sync does (without ctx).
    internal::park(&internal::park_unlock_word, &lock_, internal::WaitReason::kSemacquire);
    internal::fatal("semaphore: impossible acquire was woken");
  }
  if (tail_ != nullptr) tail_->next = &w; else head_ = &w;
  tail_ = &w;
  internal::park(&internal::park_unlock_word, &lock_, internal::WaitReason::kSemacquire);
  if (!w.granted) internal::fatal("semaphore: waiter woken without grant");
  internal::race_acquire(this);
}

// Race edges: a release happens before the acquires it lets through (x/sync's
// semaphore orders them with its mutex).
void Semaphore::release(int64_t n) {
  internal::race_release(this);
  internal::lock_word(&lock_);
  cur_ -= n;
  if (cur_ < 0) {
    cur_ += n;
    internal::unlock_word(&lock_);
    throw panic_error("semaphore: released more than held");
  }
  internal::GQueue wake;
  grant_waiters(size_, &cur_, &head_, &tail_, &wake);
  internal::unlock_word(&lock_);
  while (internal::G* g = wake.pop()) internal::ready(g);
}

absl::Status Semaphore::acquire(const Context& ctx, int64_t n) {
  internal::preempt_check();
  if (n < 0) throw panic_error("semaphore: negative acquire");
  Chan<std::monostate> done = ctx.done();
  auto is_done = [&] {
    bool d = false;
    select(on_recv(done, [&](std::optional<std::monostate>) { d = true; }), on_default());
    return d;
  };
  // A context that is already done wins, even over free units (x/sync).
  if (is_done()) return ctx.err();
  internal::lock_word(&lock_);
  if (size_ - cur_ >= n && head_ == nullptr) {
    cur_ += n;
    internal::unlock_word(&lock_);
    internal::race_acquire(this);
    return absl::OkStatus();
  }
  if (n > size_) {
    // Can never be granted: wait for ctx without queueing, so the requests
    // behind are not held up by a doomed one.
    internal::unlock_word(&lock_);
    (void)done.recv();
    return ctx.err();
  }
  Chan<std::monostate> ready = make_chan<std::monostate>();
  Waiter w{internal::getg(), n, nullptr, tail_, false, &ready};
  if (tail_ != nullptr) tail_->next = &w; else head_ = &w;
  tail_ = &w;
  internal::unlock_word(&lock_);

  bool cancelled = false;
  select(on_recv(ready), on_recv(done, [&](std::optional<std::monostate>) { cancelled = true; }));
  if (!cancelled) {
    // Granted. If ctx finished meanwhile, prefer the error and give the
    // units back, as x/sync does.
    if (is_done()) {
      release(n);
      return ctx.err();
    }
    internal::race_acquire(this);
    return absl::OkStatus();
  }
  internal::GQueue wake;
  internal::lock_word(&lock_);
  if (w.granted) {
    // Granted after all, between ctx and the lock: put the units back.
    cur_ -= n;
  } else {
    bool front = head_ == &w;
    if (w.prev != nullptr) w.prev->next = w.next; else head_ = w.next;
    if (w.next != nullptr) w.next->prev = w.prev; else tail_ = w.prev;
    // Leaving the head may let the next ones fit.
    if (!front) {
      internal::unlock_word(&lock_);
      return ctx.err();
    }
  }
  grant_waiters(size_, &cur_, &head_, &tail_, &wake);
  internal::unlock_word(&lock_);
  while (internal::G* g = wake.pop()) internal::ready(g);
  return ctx.err();
}

}  // namespace gort
