// gmp/clock_rand.hpp — the runtime's clock and cheap random numbers (Go's
// nanotime and fastrand). A header of their own so that low-level files
// (note.cpp) can read the clock without the whole scheduler (sched.hpp).
#pragma once

#include <cstdint>

namespace gort::internal {

// Monotonic clock in nanoseconds.
int64_t nanotime();
// Per-M fast random numbers (not for anything that must be unpredictable).
uint32_t fastrand();
// A number in [0, n), without a division.
uint32_t fastrandn(uint32_t n);

}  // namespace gort::internal
