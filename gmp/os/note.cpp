// gmp/os/note.cpp — futex-backed Note.
#include "gmp/os/note.hpp"

#include <signal.h>
#include <time.h>

#include <algorithm>

#include "gmp/os/clock.hpp"
#include "gmp/os/fatal.hpp"
#include "gmp/os/futex.hpp"
#include "gort/detail/race.hpp"

namespace gort::internal {

void Note::wakeup() {
  uint32_t old = key_.exchange(1, std::memory_order_acq_rel);
  if (old != 0) fatal("notewakeup: double wakeup");
  futex_wakeup(&key_, 1);
}

void Note::kick() {
  if (key_.exchange(1, std::memory_order_acq_rel) == 0) futex_wakeup(&key_, 1);
}

namespace {

// In the race detector's build, ThreadSanitizer holds back an asynchronous
// signal (a SIGTERM that gort::signal::notify waits for, say) until the
// thread it landed on next calls a function TSan intercepts, or runs one
// it marks as blocking. The futex call is neither: an M asleep in it would
// hold the signal until something woke it, for ever in an idle server. So
// there an M sleeps in slices of kRaceSleepSliceNs and asks TSan in between
// (sigpending is intercepted; TSan then runs what it held back).
constexpr int64_t kRaceSleepSliceNs = 10 * 1000 * 1000;

void race_sleep_slice(std::atomic<uint32_t>* key) {
  timespec ts{0, kRaceSleepSliceNs};
  futex_sleep(key, 0, &ts);
  sigset_t pending;
  sigpending(&pending);
}

}  // namespace

void Note::sleep() {
  while (key_.load(std::memory_order_acquire) == 0) {
    if constexpr (kRaceEnabled) {
      race_sleep_slice(&key_);
    } else {
      futex_sleep(&key_, 0);  // EINTR and spurious wake-ups loop
    }
  }
}

bool Note::sleep_for(int64_t ns) {
  int64_t deadline = nanotime() + ns;
  while (key_.load(std::memory_order_acquire) == 0) {
    int64_t left = deadline - nanotime();
    if (left <= 0) break;
    if constexpr (kRaceEnabled) left = std::min(left, kRaceSleepSliceNs);
    timespec ts{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
    futex_sleep(&key_, 0, &ts);
    if constexpr (kRaceEnabled) {
      sigset_t pending;
      sigpending(&pending);  // TSan runs the signals it held back (above)
    }
  }
  return key_.load(std::memory_order_acquire) != 0;
}

}  // namespace gort::internal
