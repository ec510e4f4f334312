// tests/preempt/clock_lib.cpp — a shared library that reads the clock while
// it holds a lock, as ASan's allocator, abseil's clock and gort's own
// timers do. Its code is not registered as preemptible, so a goroutine
// must never be preempted inside it, not even while it is in the vDSO's
// clock functions (tests/preempt/clock_poll_test.cpp).
#include <time.h>
#include <x86intrin.h>

#include <atomic>
#include <cstdint>

#include "tests/preempt/clock_lib.hpp"

namespace {

int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace

extern "C" int clock_lib_locked_reads(std::atomic<bool>* lock, int reads, uint64_t give_up_cycles) {
  // The wait reads the time stamp counter, not the clock: a clock read
  // would be a safe point for the old check (and let the holder back in).
  uint64_t give_up = __rdtsc() + give_up_cycles;
  while (lock->exchange(true, std::memory_order_acquire)) {
    if (__rdtsc() > give_up) return -1;  // the holder never came back
  }
  int64_t sum = 0;
  for (int i = 0; i < reads; i++) sum += monotonic_ns() & 1;
  lock->store(false, std::memory_order_release);
  return static_cast<int>(sum >= 0);
}
