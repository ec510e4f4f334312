// stdlib/sync/waitgroup.cpp — gort::WaitGroup (Go's sync/waitgroup.go).
#include "gmp/g.hpp"
#include "gmp/lifetime.hpp"
#include "gmp/lock.hpp"
#include "gmp/trace.hpp"
#include "gort/sync.hpp"

namespace gort {

// Race edges (Go's waitgroup.go): every Done (a negative add) happens
// before Wait returns.
void WaitGroup::add(int64_t delta) {
  internal::preempt_check();
  sema_.associate_bubble();
  if (delta < 0) internal::race_release(this);
  uint64_t state = state_.fetch_add(static_cast<uint64_t>(delta) << 32, std::memory_order_acq_rel) +
                   (static_cast<uint64_t>(delta) << 32);
  int32_t v = static_cast<int32_t>(state >> 32);
  uint32_t w = static_cast<uint32_t>(state);
  if (v < 0) throw panic_error("sync: negative WaitGroup counter");
  if (w != 0 && delta > 0 && v == delta) {
    throw panic_error("sync: WaitGroup misuse: Add called concurrently with Wait");
  }
  if (v > 0 || w == 0) return;
  // Counter is 0 and there are waiters: nobody may touch the state now but
  // us, so a concurrent add is misuse.
  if (state_.load(std::memory_order_acquire) != state) {
    throw panic_error("sync: WaitGroup misuse: Add called concurrently with Wait");
  }
  state_.store(0, std::memory_order_release);
  internal::lifetime_probe();
  for (; w != 0; w--) sema_.release(internal::Handoff::kNo);
}

void WaitGroup::wait() {
  GORT_TRACE_BLOCKING_CALL();
  internal::preempt_check_may_park("sync.WaitGroup.Wait");
  uint64_t state = state_.load(std::memory_order_acquire);
  for (;;) {
    if ((state >> 32) == 0) {
      internal::race_acquire(this);
      return;
    }
    if (state_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel)) {
      sema_.acquire(internal::QueueAt::kBack, static_cast<uint8_t>(internal::WaitReason::kSyncWaitGroup));
      if (state_.load(std::memory_order_acquire) != 0) {
        throw panic_error("sync: WaitGroup is reused before previous Wait has returned");
      }
      internal::race_acquire(this);
      return;
    }
  }
}

}  // namespace gort
