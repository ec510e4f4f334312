// gmp/os/note.hpp — a one-shot sleep/wake-up event on a futex (Go's note).
//
// One thread sleeps in `sleep`, any thread calls `wakeup` once; `clear`
// re-arms it. A wake-up that comes before the sleep is not lost.
#pragma once

#include <atomic>
#include <cstdint>

namespace gort::internal {

class Note {
 public:
  void clear() { key_.store(0, std::memory_order_relaxed); }
  void wakeup();
  // A wakeup that may come more than once before the sleeper clears the
  // note (several wakers of one sleeper, as sysmon's: a P that starts and
  // the run's end); wakeup() calls a second one a bug.
  void kick();
  void sleep();
  // Sleeps at most `ns` nanoseconds; returns true if woken.
  bool sleep_for(int64_t ns);
  bool is_set() const { return key_.load(std::memory_order_acquire) != 0; }

 private:
  std::atomic<uint32_t> key_{0};
};

}  // namespace gort::internal
