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

// One futex sleep of at most `ns` (< 0: unbounded), in slices in the race
// build.
void futex_sleep_upto(std::atomic<uint32_t>* key, int64_t ns) {
  if constexpr (kRaceEnabled) ns = ns < 0 ? kRaceSleepSliceNs : std::min(ns, kRaceSleepSliceNs);
  if (ns < 0) {
    futex_sleep(key, 0);
    return;
  }
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  futex_sleep(key, 0, &ts);
  if constexpr (kRaceEnabled) {
    sigset_t pending;
    sigpending(&pending);
  }
}

}  // namespace

void Note::sleep() {
  // EINTR, spurious wake-ups and race-build slices loop.
  while (key_.load(std::memory_order_acquire) == 0) futex_sleep_upto(&key_, -1);
}

bool Note::sleep_for(int64_t ns) {
  int64_t deadline = nanotime() + ns;
  while (key_.load(std::memory_order_acquire) == 0) {
    int64_t left = deadline - nanotime();
    if (left <= 0) break;
    futex_sleep_upto(&key_, left);
  }
  return key_.load(std::memory_order_acquire) != 0;
}

}  // namespace gort::internal
