// stdlib/sync/once.cpp — gort::Once (Go's sync/once.go).
//
// Go's Once is a done flag and a Mutex: the runner sets the flag and then
// unlocks. Here a caller that sees the flag may destroy the Once right away
// (C++ has no collector to keep it alive), while the runner would still be
// unlocking. So the runner's last touch must make the Once done: one
// exchange sets kDone and takes the count of callers waiting in begin(),
// and the units it then releases go to callers that are still inside call()
// until they have them (gmp/lifetime.hpp). WaitGroup works the same way.
#include "gmp/g.hpp"
#include "gmp/lifetime.hpp"
#include "gort/sync.hpp"

namespace gort {

bool Once::begin() {
  uint64_t s = state_.load(std::memory_order_acquire);
  for (;;) {
    if ((s & kDone) != 0) {
      internal::race_acquire(this);
      return false;
    }
    if ((s & kRunning) == 0) {
      if (state_.compare_exchange_weak(s, s | kRunning, std::memory_order_acq_rel)) return true;
      continue;
    }
    if (state_.compare_exchange_weak(s, s + kWaiter, std::memory_order_acq_rel)) {
      // Go's Once waits in its Mutex: the same wait reason.
      sema_.acquire(internal::QueueAt::kBack, static_cast<uint8_t>(internal::WaitReason::kSyncMutex));
      internal::race_acquire(this);
      return false;
    }
  }
}

void Once::finish() {
  internal::race_release(this);
  uint64_t s = state_.exchange(kDone, std::memory_order_acq_rel);
  internal::lifetime_probe();
  for (uint64_t n = s / kWaiter; n > 0; n--) sema_.release(internal::Handoff::kNo);
}

}  // namespace gort
