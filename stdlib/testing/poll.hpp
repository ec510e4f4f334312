// stdlib/testing/poll.hpp — how gort/testing.hpp's waits pause between
// polls. Two kinds: eventually() spins (a goroutine yields, a thread
// yields its CPU), for conditions that become true within microseconds;
// the leak checks and wait_for_state pause, since each of their polls
// lists /proc or walks every stack and what they wait for may take long.
#pragma once

#include <chrono>

#include "gort/chrono.hpp"

namespace gort::testing::detail {

// steady_clock::now() + timeout, saturated (InfiniteDuration: never).
std::chrono::steady_clock::time_point deadline_after(Duration timeout);

// The pause before poll number `round` + 1: 100 µs, doubling up to 10 ms.
// Parks a goroutine (gort::sleep), sleeps a plain thread.
void pause_between_polls(int round);

// Calls done() until it returns true or `timeout` passes (then once
// more), pausing between calls; its last result.
template <class F>
bool poll_with_pauses(F&& done, Duration timeout) {
  auto deadline = deadline_after(timeout);
  for (int round = 0;; round++) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() > deadline) return done();
    pause_between_polls(round);
  }
}

}  // namespace gort::testing::detail
