// gmp/bubble_clock.hpp — the fake clock a synctest bubble shows to the
// standard clocks (docs/testing.md, "The standard clocks").
//
// A bubble created with Options::fake_std_clocks makes clock_gettime,
// gettimeofday, time and so std::chrono's clocks read its fake clock on the
// bubble's goroutines (netpoll/hook/clock.cpp interposes them). This is the
// one question that interposer asks the scheduler core.
//
// Thread-safety and cost: lock-free and async-signal-safe; it reads the
// calling thread's current goroutine (TLS) and its bubble's clock with
// relaxed atomic loads, and never allocates, locks or makes a system call.
#pragma once

#include "gmp/room.hpp"

#include <cstdint>

namespace gort::internal {

// True when the calling thread runs a goroutine of a bubble that fakes the
// standard clocks; then *unix_ns is the bubble's fake time (Unix ns; a
// bubble starts at 2000-01-01 00:00:00 UTC) and *mono_ns the fake
// monotonic time: the real CLOCK_MONOTONIC reading taken when the bubble
// started plus the fake time elapsed since. False (outputs untouched)
// elsewhere: outside a bubble, on g0, on a plain thread.
bool bubble_std_clock_now(int64_t* unix_ns, int64_t* mono_ns);

}  // namespace gort::internal
