// gmp/lifetime.hpp — making "destroyed while a call still runs" show.
//
// A call on a shared object can still be running after its effect is
// visible to others: a channel send that has put its value in the buffer
// still wakes a parked receiver. Who sees the effect and destroys the
// object then leaves the call touching freed memory: a rare hang or a
// misleading `fatal error:`. The rule the runtime keeps for the objects
// that must be shared by reference (Mutex, WaitGroup, Once, Sema): the
// completing side's last touch of the object comes before anybody can see
// it complete without being woken by it (docs/runtime.md, "Destroying what
// others just used"). Channels, whose handles are counted, ask each
// goroutine to hold its own (docs/channels.md).
//
// lifetime_probe() marks such a window. In the AddressSanitizer build it
// yields the thread one time in eight, so that the destroyer gets in and
// ASan reports the use with both stacks; elsewhere it is nothing.
#pragma once

#include "gmp/room.hpp"

#include <sched.h>

#include "gmp/clock_rand.hpp"
#include "gmp/race/sanitizer.hpp"

namespace gort::internal {

inline void lifetime_probe() {
  if constexpr (kAsanEnabled) {
    if ((fastrand() & 7) == 0) sched_yield();
  }
}

}  // namespace gort::internal
