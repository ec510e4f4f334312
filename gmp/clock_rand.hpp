// gmp/clock_rand.hpp — cheap random numbers (Go's fastrand), from the
// calling M's state, and the runtime's clock (gmp/os/clock.hpp) beside them:
// timers, the poller, select and sync.Mutex use both.
#pragma once

#include "gmp/room.hpp"

#include <cstdint>

#include "gmp/os/clock.hpp"

namespace gort::internal {

// Per-M fast random numbers (not for anything that must be unpredictable).
uint32_t fastrand();
// A number in [0, n), without a division.
uint32_t fastrandn(uint32_t n);

}  // namespace gort::internal
