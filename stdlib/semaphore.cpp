// stdlib/semaphore.cpp — gort::Semaphore (golang.org/x/sync/semaphore).
//
// Invariants (under lock_): 0 <= cur_ <= size_; waiters are served strictly
// in FIFO order: release wakes the head while it fits and stops at the first
// that does not, so small requests never overtake a large one.
#include "gmp/fatal.hpp"
#include "gmp/g.hpp"
#include "gmp/lock.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "gort/sync.hpp"

namespace gort {

struct Semaphore::Waiter {
  internal::G* g;
  int64_t n;
  Waiter* next;
  Waiter* prev;
  bool granted;
};

Semaphore::Semaphore(int64_t n) : size_(n) {
  if (n < 0) throw panic_error("semaphore: negative size");
}

Semaphore::~Semaphore() = default;

bool Semaphore::try_acquire(int64_t n) {
  internal::lock_word(&lock_);
  bool ok = size_ - cur_ >= n && head_ == nullptr;
  if (ok) cur_ += n;
  internal::unlock_word(&lock_);
  return ok;
}

void Semaphore::acquire(int64_t n) {
  internal::preempt_check();
  if (n < 0) throw panic_error("semaphore: negative acquire");
  internal::lock_word(&lock_);
  if (size_ - cur_ >= n && head_ == nullptr) {
    cur_ += n;
    internal::unlock_word(&lock_);
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
}

void Semaphore::release(int64_t n) {
  internal::lock_word(&lock_);
  cur_ -= n;
  if (cur_ < 0) {
    cur_ += n;
    internal::unlock_word(&lock_);
    throw panic_error("semaphore: released more than held");
  }
  internal::GQueue wake;
  while (head_ != nullptr && size_ - cur_ >= head_->n) {
    Waiter* w = head_;
    cur_ += w->n;
    head_ = w->next;
    if (head_ != nullptr) head_->prev = nullptr; else tail_ = nullptr;
    w->granted = true;
    wake.push_back(w->g);
  }
  internal::unlock_word(&lock_);
  while (internal::G* g = wake.pop()) internal::ready(g);
}

}  // namespace gort
